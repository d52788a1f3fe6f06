package binlog

// Every wait of an SQL connection to the source (Dial) for the server is
// bounded by source.read-timeout: the handshake as a whole, then each
// statement's answer. A statement that legitimately runs longer (prune's
// DELETEs, a COUNT over a large outbox table, verify's scans) is not cut:
// once the connection has been silent for source.read-timeout, a second
// connection asks the server whether the statement is still running
// (SHOW PROCESSLIST, which lists the user's own threads without the
// PROCESS privilege). Only when the server does not answer that either
// (stopped, frozen, a silent network) or no longer runs the statement
// (the connection lost) does the statement fail, with a *StallError
// naming source.read-timeout.

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// Conn is an SQL connection to the source made by Dial: go-mysql's, whose
// Execute and ExecuteSelectStreaming return a *StallError when the server
// stopped answering.
type Conn struct {
	*client.Conn
	w *watchConn
}

// Execute runs a statement (go-mysql's Execute), its waits bounded.
func (c *Conn) Execute(command string, args ...any) (*mysql.Result, error) {
	r, err := c.Conn.Execute(command, args...)
	return r, c.stalled(command, err)
}

// ExecuteSelectStreaming runs a SELECT row by row (go-mysql's), its waits
// bounded.
func (c *Conn) ExecuteSelectStreaming(command string, result *mysql.Result, perRow client.SelectPerRowCallback, perResult client.SelectPerResultCallback) error {
	return c.stalled(command, c.Conn.ExecuteSelectStreaming(command, result, perRow, perResult))
}

// stalled turns err into a *StallError when a wait of the connection ran
// out (go-mysql keeps only the text of the read error: the connection
// records it).
func (c *Conn) stalled(stmt string, err error) error {
	if err == nil || !c.w.stalled.Load() {
		return err
	}
	return &StallError{Addr: c.w.addr, Bound: c.w.bound, Stmt: stmtHead(stmt), Err: err}
}

// stmtHead is the start of a statement, for messages.
func stmtHead(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// watchConn is the network connection under a Conn. During the handshake
// its deadline is the one Dial set; after it (live), each read waits at
// most bound for data, then asks probe whether the server still runs the
// connection's statement: yes, it waits again; no, the read fails and
// the connection is marked stalled. Each write is bounded by bound.
type watchConn struct {
	net.Conn
	addr    string
	bound   time.Duration
	live    atomic.Bool
	probe   func() bool // nil: none (the probe's own connection)
	stalled atomic.Bool
	set     time.Time // when the read deadline was last moved; reads are sequential
}

// Read keeps a deadline less than bound/8 old (no timer update per read).
func (w *watchConn) Read(p []byte) (int, error) {
	if !w.live.Load() {
		n, err := w.Conn.Read(p)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.stalled.Store(true)
		}
		return n, err
	}
	for {
		if now := time.Now(); now.Sub(w.set) > w.bound/8 {
			_ = w.Conn.SetReadDeadline(now.Add(w.bound))
			w.set = now
		}
		n, err := w.Conn.Read(p)
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		w.set = time.Time{}
		if w.probe != nil {
			if w.probe() {
				continue // the server runs the statement: wait on
			}
			// Idle or gone on the server: an answer sent meanwhile is
			// still read.
			_ = w.Conn.SetReadDeadline(time.Now().Add(time.Second))
			if n, err = w.Conn.Read(p); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
				return n, err
			}
		}
		w.stalled.Store(true)
		return n, err
	}
}

func (w *watchConn) Write(p []byte) (int, error) {
	if w.live.Load() {
		_ = w.Conn.SetWriteDeadline(time.Now().Add(w.bound))
	}
	n, err := w.Conn.Write(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.stalled.Store(true)
	}
	return n, err
}

// start ends the handshake: from now on each wait is bounded by bound.
func (w *watchConn) start() error {
	w.live.Store(true)
	return w.Conn.SetDeadline(time.Time{})
}

// running reports whether the server at cfg.Addr answers a new connection
// (its handshake and SHOW PROCESSLIST each within source.read-timeout) and
// runs a statement on connection id: not idle ("Sleep") nor gone.
func running(cfg Config, tc *tls.Config, id uint32) bool {
	c, err := dial(context.Background(), cfg, "", tc, false)
	if err != nil {
		return false
	}
	defer c.Close()
	r, err := c.Execute("SHOW PROCESSLIST")
	if err != nil {
		return false
	}
	for i := 0; i < r.RowNumber(); i++ {
		if n, _ := r.GetUintByName(i, "Id"); n == uint64(id) {
			cmd, _ := r.GetStringByName(i, "Command")
			return cmd != "" && !strings.EqualFold(cmd, "Sleep")
		}
	}
	return false
}
