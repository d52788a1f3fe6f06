package binlog

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"
)

func TestLingering(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		n    int64
		d    time.Duration
		want bool
	}{
		{"a trickle: 6 KiB in a 2ms period", 6 << 10, 2 * ms, true},
		{"one small transaction after a long quiet", 500, time.Second, true},
		{"just under the burst per period", lingerBurst - 1, 2 * ms, true},
		{"a burst per period: read at once", lingerBurst, 2 * ms, false},
		{"a backlog: 1 MiB in 5ms", 1 << 20, 5 * ms, false},
		{"20 KiB within 100µs: fast", 20 << 10, 100 * time.Microsecond, false},
	} {
		if got := lingering(c.n, c.d, 2*ms); got != c.want {
			t.Errorf("%s: lingering(%d, %s, 2ms) = %v, want %v", c.name, c.n, c.d, got, c.want)
		}
	}
}

// chunks is a net.Conn whose reads return its chunks in turn, the
// number of bytes of each (smaller than the reader's buffer: drained).
type chunks struct {
	net.Conn
	sizes []int
	held  *bool // the low-water mark raised (lingerConn.hold)
}

func (c *chunks) Read(p []byte) (int, error) {
	if c.held != nil && *c.held {
		return 0, errors.New("read with the low-water mark raised")
	}
	n := c.sizes[0]
	c.sizes = c.sizes[1:]
	return n, nil
}

// TestLingerConnPauses: a slow stream pauses between drained reads, for
// at most the linger; a full read (a backlog) and a fast stream do not.
func TestLingerConnPauses(t *testing.T) {
	var pauses []time.Duration
	var held bool
	holds := 0
	// A clock that moves only in the pauses: the reads take no time, so
	// that the test does not depend on the machine's load (under load a
	// read of 129 KiB took longer than a linger and paused once more).
	clock := time.Now()
	c := &lingerConn{Conn: &chunks{sizes: []int{100, 100, 64 << 10, 64 << 10, 1 << 10, 100}, held: &held}, linger: 2 * time.Millisecond,
		now: func() time.Time { return clock },
		sleep: func(d time.Duration) {
			if !held {
				t.Error("paused without the low-water mark raised")
			}
			pauses = append(pauses, d)
			clock = clock.Add(d)
		},
		hold: func(on bool) bool {
			if on == held {
				t.Errorf("hold(%v) twice", on)
			}
			held = on
			holds++
			return on
		},
		from: clock.Add(-time.Second)}
	buf := make([]byte, 64<<10)
	for i := 0; i < 6; i++ {
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	// Reads 1 and 2 were small and drained: reads 2 and 3 waited. Read 3
	// filled the buffer: no pause before 4; read 4 too. Read 5 drained
	// the stream after 129 KiB within about one linger: fast, no pause
	// before 6.
	if len(pauses) != 2 {
		t.Fatalf("paused %d times (%v), want 2: before the 2nd and 3rd reads only", len(pauses), pauses)
	}
	if holds != 4 || held {
		t.Fatalf("the mark raised and lowered %d times, held at the end %v; want 4, false (around each pause)", holds, held)
	}
	for _, p := range pauses {
		if p <= 0 || p > 2*time.Millisecond {
			t.Errorf("pause %s, want (0, 2ms]", p)
		}
	}
}

// deadlines is a net.Conn that records the read deadlines set on it.
type deadlines struct {
	net.Conn
	set []time.Time
}

func (d *deadlines) SetReadDeadline(t time.Time) error { d.set = append(d.set, t); return nil }
func (d *deadlines) SetDeadline(t time.Time) error     { d.set = append(d.set, t); return nil }

// The per-packet read deadlines go-mysql asks for (now + read timeout)
// reach the socket only when the one set would be more than an eighth of
// the timeout late: never earlier than asked, at most 12.5 % later. An
// earlier deadline (go-mysql's close asks for now+100ms), a past one, a
// zero one (none) and SetDeadline are set as asked, at once.
func TestLingerConnDeadlines(t *testing.T) {
	d := &deadlines{}
	clock := time.Now()
	c := &lingerConn{Conn: d, now: func() time.Time { return clock }}
	const timeout = 8 * time.Second
	for i := 0; i < 2000; i++ { // 2 s of asks, one per millisecond
		clock = clock.Add(time.Millisecond)
		asked := clock.Add(timeout)
		if err := c.SetReadDeadline(asked); err != nil {
			t.Fatal(err)
		}
		if last := d.set[len(d.set)-1]; last.Before(asked) || last.Sub(asked) > timeout/8 {
			t.Fatalf("ask %d: deadline %s after the ask, want within [0, %s]", i, last.Sub(asked), timeout/8)
		}
	}
	if n := len(d.set); n != 2 {
		t.Fatalf("%d deadlines set for 2000 asks over 2 s at a timeout of %s, want 2 (one per second)", n, timeout)
	}
	exact := func(what string, ask time.Time, set func(time.Time) error) {
		t.Helper()
		n := len(d.set)
		if err := set(ask); err != nil {
			t.Fatal(err)
		}
		if len(d.set) != n+1 || !d.set[n].Equal(ask) {
			t.Fatalf("%s was not set as asked, at once: %v, want %v", what, d.set[n:], ask)
		}
	}
	exact("an interrupting deadline (now+100ms)", clock.Add(100*time.Millisecond), c.SetReadDeadline)
	exact("a past deadline", time.Unix(1, 0), c.SetReadDeadline)
	c.SetReadDeadline(clock.Add(timeout))
	exact("a zero deadline", time.Time{}, c.SetReadDeadline)
	c.SetReadDeadline(clock.Add(timeout))
	exact("SetDeadline", clock.Add(2*timeout), c.SetDeadline)
	n := len(d.set)
	c.SetReadDeadline(clock.Add(timeout + time.Millisecond))
	if len(d.set) != n+1 {
		t.Fatalf("after SetDeadline the next read deadline was coalesced with the one before: %v", d.set[n:])
	}
}

// A release that finds bytes queued keeps the mark raised (hold(false)
// reports true): the read goes ahead, and the next pause raises nothing
// again; once a release lowers it, the next pause raises it anew.
func TestLingerConnKeepsMarkWhileQueued(t *testing.T) {
	var calls []string
	queued := []bool{true, false} // what the releases find, in turn
	clock := time.Now()           // fixed: the pauses stay due however slow the machine
	c := &lingerConn{Conn: &chunks{sizes: []int{100, 100, 100, 100}}, linger: time.Millisecond,
		now:   func() time.Time { return clock },
		sleep: func(time.Duration) { calls = append(calls, "sleep") },
		hold: func(on bool) bool {
			if on {
				calls = append(calls, "raise")
				return true
			}
			q := queued[0]
			queued = queued[1:]
			calls = append(calls, map[bool]string{true: "keep", false: "lower"}[q])
			return q
		},
		from: clock.Add(-time.Second)}
	buf := make([]byte, 1000)
	for i := 0; i < 3; i++ {
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		c.from = clock.Add(-time.Millisecond / 2) // the next pause is due in half a millisecond
	}
	want := []string{"raise", "sleep", "keep", "sleep", "lower"}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	if c.held {
		t.Fatal("held after a release that lowered the mark")
	}
}

// pacer records its calls into the same list as the pause's sleep.
type pacer struct{ calls *[]string }

func (p pacer) Begin() { *p.calls = append(*p.calls, "begin") }
func (p pacer) End()   { *p.calls = append(*p.calls, "end") }

// The Pacer is told of every pause, and only of pauses: Begin before the
// sleep, End after it, once each; a read with no pause due tells nothing.
func TestLingerConnTellsPacer(t *testing.T) {
	var calls []string
	clock := time.Now() // fixed: the pause stays due however slow the machine
	c := &lingerConn{Conn: &chunks{sizes: []int{100, 100, 100}}, linger: time.Millisecond,
		now:   func() time.Time { return clock },
		sleep: func(time.Duration) { calls = append(calls, "sleep") },
		pace:  pacer{&calls},
		from:  clock.Add(-time.Second)}
	buf := make([]byte, 1000)
	for i := 0; i < 2; i++ { // the first read drains (no pause before it), the second pauses
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		c.from = clock.Add(-time.Millisecond / 2)
	}
	c.pause = false // the stream got busy: no pause before the third read
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	want := []string{"begin", "sleep", "end"}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
}

// withLinger hands its Pacer to every connection it wraps.
func TestWithLingerPacer(t *testing.T) {
	var calls []string
	pace := pacer{&calls}
	dial := withLinger(func(context.Context, string, string) (net.Conn, error) {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, nil
	}, time.Millisecond, pace)
	c, err := dial(context.Background(), "tcp", "x")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if lc, ok := c.(*lingerConn); !ok || lc.pace != pace {
		t.Fatalf("withLinger gave %T without the Pacer", c)
	}
}
