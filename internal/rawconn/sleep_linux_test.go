//go:build linux

package rawconn

import (
	"slices"
	"testing"
	"time"
)

// Sleep waits at least its duration on the timerfd, and not the
// millisecond steps of the poller's timeouts: the median of 100 sleeps
// of 1.2 ms is under 2 ms, which time.Sleep's two whole-millisecond epoll
// waits each cannot be. A sleep of 0 or less returns at once; a sleep
// when or while the Sleeper is closed returns (early) rather than hang.
func TestSleeper(t *testing.T) {
	s, err := NewSleeper()
	if err != nil {
		t.Fatal(err)
	}
	const d, n = 1200 * time.Microsecond, 100
	took := make([]time.Duration, n)
	for i := range took {
		t0 := time.Now()
		s.Sleep(d)
		if took[i] = time.Since(t0); took[i] < d {
			t.Fatalf("slept %s, want at least %s", took[i], d)
		}
	}
	slices.Sort(took)
	if med := took[n/2]; med >= 2*time.Millisecond {
		t.Errorf("median of %d sleeps of %s: %s, as long as two millisecond steps", n, d, med)
	}
	t0 := time.Now()
	s.Sleep(0)
	s.Sleep(-time.Second)
	if got := time.Since(t0); got > 50*time.Millisecond {
		t.Errorf("sleeps of 0 and -1s took %s", got)
	}
	done := make(chan struct{})
	go func() { s.Sleep(time.Hour); close(done) }() // closed below, before or during the sleep
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep did not return when the Sleeper was closed")
	}
	t0 = time.Now()
	s.Sleep(time.Hour)
	if got := time.Since(t0); got > time.Second {
		t.Errorf("a sleep after Close took %s", got)
	}
}
