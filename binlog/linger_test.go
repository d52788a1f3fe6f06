package binlog

import (
	"errors"
	"net"
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
	c := &lingerConn{Conn: &chunks{sizes: []int{100, 100, 64 << 10, 64 << 10, 1 << 10, 100}, held: &held}, linger: 2 * time.Millisecond,
		sleep: func(d time.Duration) {
			if !held {
				t.Error("paused without the low-water mark raised")
			}
			pauses = append(pauses, d)
			time.Sleep(d)
		},
		hold: func(on bool) bool {
			if on == held {
				t.Errorf("hold(%v) twice", on)
			}
			held = on
			holds++
			return on
		},
		from: time.Now().Add(-time.Second)}
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
// earlier deadline (interrupting a read), a zero one (none) and
// SetDeadline pass at once.
func TestLingerConnDeadlines(t *testing.T) {
	d := &deadlines{}
	c := &lingerConn{Conn: d}
	const timeout = 8 * time.Second
	base := time.Now()
	for i := 0; i < 2000; i++ { // 2 s of asks, one per millisecond
		asked := base.Add(time.Duration(i)*time.Millisecond + timeout)
		slack := asked.Sub(time.Now()) / 8 // an eighth of the distance (the asks run ahead of the clock here)
		if err := c.SetReadDeadline(asked); err != nil {
			t.Fatal(err)
		}
		if last := d.set[len(d.set)-1]; last.Before(asked) || last.Sub(asked) > slack {
			t.Fatalf("ask %d: deadline %s after the ask, want within [0, %s]", i, last.Sub(asked), slack)
		}
	}
	if n := len(d.set); n < 2 || n > 4 {
		t.Fatalf("%d deadlines set for 2000 asks over 2 s at a timeout of %s, want 2 to 4 (one per second)", n, timeout)
	}
	n := len(d.set)
	past := time.Unix(1, 0)
	c.SetReadDeadline(past)
	if len(d.set) != n+1 || !d.set[n].Equal(past) {
		t.Fatalf("an earlier deadline was not passed on at once: %v", d.set[n:])
	}
	c.SetReadDeadline(base.Add(timeout))
	c.SetReadDeadline(time.Time{})
	if len(d.set) != n+3 || !d.set[n+2].IsZero() {
		t.Fatalf("a zero deadline was not passed on: %v", d.set[n:])
	}
	c.SetReadDeadline(base.Add(timeout))
	c.SetDeadline(base.Add(2 * timeout))
	c.SetReadDeadline(base.Add(timeout + time.Millisecond))
	if len(d.set) != n+6 {
		t.Fatalf("after SetDeadline the next read deadline was coalesced with the one before: %v", d.set[n:])
	}
}
