//go:build linux && !race && !386

package rawconn

import (
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// An answer arriving while a pause is on and its connection held does
// not make the socket readable, so the goroutine waiting to read it stays
// parked; End lowers the mark, and that alone wakes it with the answer
// (the kernel signals the socket when the mark is lowered: without it
// the read below would wait forever). Held again after End and outside
// a pause, nothing is raised.
func TestPaceHoldsAnswers(t *testing.T) {
	r, w := pair(t)
	hold := HoldAnswers(r)
	if hold == nil {
		t.Skip("lowering SO_RCVLOWAT does not signal readability on this kernel (before 4.18)")
	}
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 100)
		_, err := io.ReadFull(r, buf)
		if err != nil {
			buf = nil
		}
		got <- buf
	}()
	parked(t, "TestPaceHoldsAnswers.func1") // a read issued after the answer came would return it, held or not
	p := NewPace()
	if p.Hold(hold) {
		t.Fatal("held outside a pause")
	}
	if m := sockopt(t, r, syscall.SO_RCVLOWAT); m != 1 {
		t.Fatalf("mark %d outside a pause, want 1", m)
	}
	p.Begin()
	if !p.Hold(hold) {
		t.Fatal("not held in a pause")
	}
	if m := sockopt(t, r, syscall.SO_RCVLOWAT); m != answerMark {
		t.Fatalf("mark %d while held, want %d", m, answerMark)
	}
	if _, err := w.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if readable(t, r, 50) {
		t.Fatal("the answer made the socket readable while held")
	}
	select {
	case <-got:
		t.Fatal("the reader woke while held")
	default:
	}
	p.End()
	select {
	case b := <-got:
		if len(b) != 100 {
			t.Fatalf("read %d bytes, want 100", len(b))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not wake when the pause ended")
	}
	if m := sockopt(t, r, syscall.SO_RCVLOWAT); m != 1 {
		t.Fatalf("mark %d after End, want 1", m)
	}
	if p.Hold(hold) {
		t.Fatal("held after End, outside a pause")
	}
}

// queuedBytes is c's SIOCINQ: the bytes received and not read.
func queuedBytes(t *testing.T, c net.Conn) int {
	t.Helper()
	var n int
	var err error
	fdCall(t, c, func(fd int) { n, err = unix.IoctlGetInt(fd, unix.SIOCINQ) })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitQueued waits until c has bytes received and not read.
func waitQueued(t *testing.T, c net.Conn) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); queuedBytes(t, c) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nothing arrived")
		}
	}
}

// An answer held in one pause and signalled by its End must not be held
// again by a Hold of the next pause before its reader ran: epoll reports
// the socket by the mark when it is polled, so a raised mark would drop
// the wake-up until the next End (one pause late per request sent
// meanwhile). Hold refuses while bytes are queued, and the parked reader
// wakes during the second pause.
func TestPaceKeepsSignalledAnswer(t *testing.T) {
	r, w := pair(t)
	hold := HoldAnswers(r)
	if hold == nil {
		t.Skip("kernel before 4.18")
	}
	p := NewPace()
	// Without a reader: the refusal itself.
	p.Begin()
	if !p.Hold(hold) {
		t.Fatal("not held in a pause")
	}
	if _, err := w.Write(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, r)
	p.End()
	p.Begin()
	if p.Hold(hold) {
		t.Fatal("raised again with the signalled answer still queued")
	}
	if m := sockopt(t, r, syscall.SO_RCVLOWAT); m != 1 {
		t.Fatalf("mark %d with an answer queued, want 1", m)
	}
	p.End()
	if _, err := io.ReadFull(r, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	// With a parked reader: it wakes in the second pause.
	got := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(r, make([]byte, 10))
		got <- err
	}()
	parked(t, "TestPaceKeepsSignalledAnswer.func1")
	p.Begin()
	p.Hold(hold)
	if _, err := w.Write(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, r)
	p.End()
	p.Begin() // the next pause, a request sent on the same connection at once
	p.Hold(hold)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the reader did not wake in the next pause: its wake-up was dropped")
	}
	p.End()
}

// parked waits until the goroutine running fn waits in the network
// poller (its stack's state "IO wait").
func parked(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[IO wait") && strings.Contains(g, fn) {
				return
			}
		}
	}
	t.Fatalf("%s never waited in the poller", fn)
}

// Several pauses on at once (Begin twice): holds are allowed until the
// last ends; every End releases what is held. A nil Pace and a nil hold
// do nothing.
func TestPaceNested(t *testing.T) {
	r, _ := pair(t)
	hold := HoldAnswers(r)
	if hold == nil {
		t.Skip("kernel before 4.18")
	}
	p := NewPace()
	p.Begin()
	p.Begin()
	p.Hold(hold)
	p.End()
	if m := sockopt(t, r, syscall.SO_RCVLOWAT); m != 1 {
		t.Fatalf("mark %d after an End, want 1", m)
	}
	if !p.Hold(hold) {
		t.Fatal("not held while the second pause is on")
	}
	p.End()
	if m := sockopt(t, r, syscall.SO_RCVLOWAT); m != 1 {
		t.Fatalf("mark %d after the last End, want 1", m)
	}
	if p.Hold(hold) {
		t.Fatal("held with no pause on")
	}
	p.End() // unbalanced: stays at no pause
	if p.Hold(hold) {
		t.Fatal("held after an unbalanced End")
	}
	var none *Pace
	none.Begin()
	none.End()
	if none.Hold(hold) || p.Hold(nil) {
		t.Fatal("a nil Pace or a nil hold held")
	}
	var tls net.Conn = struct{ net.Conn }{r} // no SyscallConn: a TLS connection's case
	if HoldAnswers(tls) != nil {
		t.Fatal("a hold for a connection without a socket")
	}
}

func TestKernelAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"6.18.44-fc-v1045", true},
		{"4.18.0-553.el8_10.x86_64", true},
		{"4.19.0", true},
		{"5.0", true},
		{"4.17.19", false},
		{"3.10.0-1160.el7.x86_64", false},
		{"", false},
		{"garbage", false},
	} {
		if got := kernelAtLeast(c.release, 4, 18); got != c.want {
			t.Errorf("kernelAtLeast(%q, 4, 18) = %v, want %v", c.release, got, c.want)
		}
	}
}
