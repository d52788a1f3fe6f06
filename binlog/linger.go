package binlog

import (
	"context"
	"net"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/rawconn"
)

// lingerBurst is how much may arrive per linger period before pauses
// stop: at or above lingerBurst per Config.Linger (32 MiB/s at 2ms, some
// 50,000 events/s of 600 bytes) the stream is read at once, so that a
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
// (rawconn.HoldWakeups), so that the segments arriving meanwhile do not wake the
// runtime's network poller for nothing (no goroutine is reading): about
// a fifth of the context switches of a trickle. The pause ends on its
// timer, and the mark is back at one byte before every read.
type lingerConn struct {
	net.Conn
	linger time.Duration
	sleep  func(time.Duration) // time.Sleep
	hold   func(on bool)       // rawconn.HoldWakeups, or nil
	pause  bool                // the next read waits until from+linger
	since  int64               // bytes read since from
	from   time.Time           // the last drained read
}

func (c *lingerConn) Read(p []byte) (int, error) {
	if c.pause {
		if wait := time.Until(c.from.Add(c.linger)); wait > 0 {
			if c.hold != nil {
				c.hold(true)
			}
			c.sleep(wait)
			if c.hold != nil {
				c.hold(false)
			}
		}
		c.pause = false
	}
	n, err := c.Conn.Read(p)
	c.since += int64(n)
	if n < len(p) && err == nil {
		now := time.Now()
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

// withLinger wraps dial's connections in a lingerConn (linger 0: dial).
func withLinger(dial func(ctx context.Context, network, addr string) (net.Conn, error), linger time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
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
		return &lingerConn{Conn: c, linger: linger, sleep: time.Sleep, hold: rawconn.HoldWakeups(sock, lingerBurst), from: time.Now()}, nil
	}
}
