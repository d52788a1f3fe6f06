package binlog

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/rawconn"
)

// lingerBurst is how much may arrive per linger period before pauses
// stop: at or above lingerBurst per Config.Linger (21 MiB/s at 3ms, some
// 35,000 events/s of 600 bytes) the stream is read at once, so that a
// pause never limits a backlog to a socket buffer per period; batching
// then happens by itself.
const lingerBurst = 64 << 10

// lingerConn is the binlog stream's connection with Config.Linger: a
// read that finds the socket drained (returns less than asked) while the
// stream is slow (lingering) is followed by a pause of linger before the
// next read. The transactions committed meanwhile are then read with one
// system call and handed on as one burst, so that the goroutines that
// read, publish and checkpoint wake once per burst rather than once per
// transaction (at 5,000 events/s in 1–10-row transactions the wake-ups
// were most of the CPU: BENCHMARKS.md, "Live cost of small
// transactions"). The read deadline set by go-mysql covers the pause.
//
// During the pause the socket's receive low-water mark is raised
// (rawconn.HoldWakeups), so that the segments arriving meanwhile do not
// wake the runtime's network poller for nothing (no goroutine is
// reading): about a fifth of the context switches of a trickle. The
// pause ends on a timerfd (rawconn.Sleeper: one wake-up at its end, where
// time.Sleep's timer wakes the process once per millisecond of it).
// With a Pacer the pause is announced (Begin before it, End after), so
// that the Kafka connections hold the wake-ups of the answers arriving in
// it and are read in the wake-up that ends it (rawconn.Pace).
// Before every read the mark is released: back at one byte unless bytes
// are queued, so that no read waits with the mark raised, and a stream
// busy at every read leaves it raised from one pause to the next.
//
// go-mysql sets the read deadline before every read of every packet
// (thousands a second, each moving a runtime timer). lingerConn sets a
// deadline that extends the one set an eighth of its distance later, and
// drops the asks it then already covers: a deadline no earlier than asked
// and later by at most an eighth of the ask's own distance (with the
// default source.read-timeout of 30s one update per 3.75 s, the read
// timeout holding to within 12.5 % later, never earlier). A deadline
// earlier than the one set (one that interrupts a read: go-mysql's close
// asks for now+100ms) is set as asked, at once.
type lingerConn struct {
	net.Conn
	linger  time.Duration
	sleep   func(time.Duration) // time.Sleep
	hold    func(on bool) bool  // rawconn.HoldWakeups, or nil
	held    bool                // the mark is raised
	pause   bool                // the next read waits until from+linger
	since   int64               // bytes read since from
	from    time.Time           // the last drained read
	sleeper *rawconn.Sleeper    // sleep's timer, or nil (time.Sleep)
	pace    Pacer               // told of each pause, or nil
	now     func() time.Time    // time.Now (tests: a clock of their own)

	dmu sync.Mutex // the deadline calls come from two goroutines (go-mysql's stream and its close)
	set time.Time  // the read deadline set on the socket (zero: none, or not known)
}

// clock is c.now, or time.Now.
func (c *lingerConn) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// Close closes the connection and the pause's timer.
func (c *lingerConn) Close() error {
	if c.sleeper != nil {
		c.sleeper.Close()
	}
	return c.Conn.Close()
}

// SetReadDeadline sets the read deadline, coalesced as the type says.
func (c *lingerConn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	set := t
	if !t.IsZero() {
		d := t.Sub(c.clock())
		if !c.set.IsZero() && !t.After(c.set) {
			if d > 0 && c.set.Sub(t) <= d/8 {
				return nil // covered: the deadline set is later than t by at most an eighth of t's distance
			}
		} else if d > 0 {
			set = t.Add(d / 8) // extends the deadline set: an eighth later, so the next asks are covered
		}
	}
	if err := c.Conn.SetReadDeadline(set); err != nil {
		c.set = time.Time{}
		return err
	}
	c.set = set
	return nil
}

// SetDeadline sets both deadlines, exactly (the read deadline no longer
// coalesced with the one before).
func (c *lingerConn) SetDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.set = time.Time{}
	return c.Conn.SetDeadline(t)
}

func (c *lingerConn) Read(p []byte) (int, error) {
	if c.pause {
		if wait := c.from.Add(c.linger).Sub(c.clock()); wait > 0 {
			if c.hold != nil && !c.held {
				c.held = c.hold(true)
			}
			if c.pace != nil {
				c.pace.Begin()
			}
			c.sleep(wait)
			if c.pace != nil {
				c.pace.End()
			}
		}
		c.pause = false
	}
	if c.held {
		c.held = c.hold(false)
	}
	n, err := c.Conn.Read(p)
	c.since += int64(n)
	if n < len(p) && err == nil {
		now := c.clock()
		c.pause = lingering(c.since, now.Sub(c.from), c.linger)
		c.since, c.from = 0, now
	}
	return n, err
}

// lingering reports whether a stream that brought n bytes in d (between
// two reads that drained it) is slow enough to pause for linger before
// the next read: less than lingerBurst per linger.
func lingering(n int64, d, linger time.Duration) bool {
	return n*int64(linger) < lingerBurst*int64(d)
}

// Pacer is told when the stream's linger pause begins and ends, so that
// the connections of other stages can read their answers in the wake-up
// that ends it (rawconn.Pace). Begin and End are called in pairs from the
// goroutine reading a connection (the stream's, and the one go-mysql
// dials to KILL it on close: pauses may overlap) and must not block.
type Pacer interface {
	Begin()
	End()
}

// withLinger wraps dial's connections in a lingerConn (linger 0: dial)
// that tells pace (nil: none) of its pauses.
func withLinger(dial func(ctx context.Context, network, addr string) (net.Conn, error), linger time.Duration, pace Pacer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if linger <= 0 {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sock := c
		if g, ok := c.(*keyGuard); ok {
			sock = g.Conn
		}
		lc := &lingerConn{Conn: c, linger: linger, sleep: time.Sleep, hold: rawconn.HoldWakeups(sock, lingerBurst), pace: pace, from: time.Now()}
		if s, err := rawconn.NewSleeper(); err == nil {
			lc.sleep, lc.sleeper = s.Sleep, s
		}
		return lc, nil
	}
}
