//go:build linux

package rawconn

import (
	"testing"
	"time"
)

// Sleep waits at least its duration on the timerfd, and not the
// millisecond steps of the poller's timeouts: 300 sleeps of 1.2 ms take
// less than the 600 ms that time.Sleep's two 1 ms epoll waits each would
// (a bound loose enough for a loaded machine: each sleep may overrun by
// 0.8 ms on average). A sleep of 0 or less returns at once; after Close a
// sleep returns (early) rather than hang.
func TestSleeper(t *testing.T) {
	s, err := NewSleeper()
	if err != nil {
		t.Fatal(err)
	}
	const d, n = 1200 * time.Microsecond, 300
	began := time.Now()
	for i := 0; i < n; i++ {
		t0 := time.Now()
		s.Sleep(d)
		if got := time.Since(t0); got < d {
			t.Fatalf("slept %s, want at least %s", got, d)
		}
	}
	if took := time.Since(began); took >= n*2*time.Millisecond {
		t.Errorf("%d sleeps of %s took %s: as long as millisecond steps", n, d, took)
	}
	t0 := time.Now()
	s.Sleep(0)
	s.Sleep(-time.Second)
	if got := time.Since(t0); got > 50*time.Millisecond {
		t.Errorf("sleeps of 0 and -1s took %s", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Sleep(time.Hour); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep after Close did not return")
	}
}
