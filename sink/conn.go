package sink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"golang.org/x/sync/errgroup"
)

// brokerConn is one TCP connection to a broker speaking kafka-go's
// protocol encoding. Requests are pipelined: send writes a request and
// returns at once; a reader goroutine (owned by the connection, stopped by
// close) reads the answers in order (a broker answers the requests of a
// connection in the order it received them) and completes each call. The
// first read or write error, or an answer not received within its
// deadline, breaks the connection: every call not yet answered fails with
// that error and later sends fail at once.
type brokerConn struct {
	addr     string
	nc       net.Conn
	rd       *bufio.Reader
	versions map[protocol.ApiKey]int16 // highest version both sides support

	mu     sync.Mutex // serialises writes, correlation ids and the queue
	corr   int32
	wbuf   []byte // the Produce request being written (wire.go); under mu
	rbuf   []byte // the Produce response being read; the reader's own
	broken error
	last   *call // the last call sent; under mu
	queue  chan *call
	quit   chan struct{}
	g      errgroup.Group
	// hold: rawconn.HoldAnswers of nc for the cluster's Pacer (produce
	// connections); nil: never held.
	hold func(on bool) bool
}

// call is one request on a brokerConn; done is closed once res or err is set.
type call struct {
	key      protocol.ApiKey
	version  int16
	corr     int32
	deadline time.Time
	timeout  time.Duration // the call's own bound
	within   string        // the setting timeout comes from, for a *TimeoutError
	res      protocol.Message
	err      error
	done     chan struct{}
}

func (c *call) ready() <-chan struct{} { return c.done }

// wait returns the call's answer, or ctx's error (the call stays pending
// on its connection).
func (c *call) wait(ctx context.Context) (protocol.Message, error) {
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// maxQueued bounds the calls in flight on one connection (the Producer
// keeps at most maxInFlight produce requests per partition, and a
// partition's leader is one broker).
const maxQueued = 32

// dialBroker connects to addr and negotiates the API versions
// (ApiVersions v0), the whole within timeout: a broker that accepts the
// TCP connection but does not answer (paused, overloaded) costs at most
// timeout before the caller moves on to another broker. With sec, the
// connection is TLS and/or logs in with SASL (security.go), within the
// same timeout; failures no retry fixes are *SecurityError.
//
// timeout is kafka.dial-timeout: a broker that does not answer within it
// is a *TimeoutError naming that setting (ctx's earlier end is ctx's
// error).
func dialBroker(ctx context.Context, addr string, timeout time.Duration, sec *Security) (*brokerConn, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	bc, err := dialBrokerConn(dctx, addr, sec)
	if err != nil && sec != nil {
		err = sec.explain(dctx, addr, err)
	}
	if err != nil && ownDeadlinePassed(ctx, dctx) && !errors.Is(err, ErrSecurity) {
		err = &TimeoutError{Addr: addr, What: "the connection's handshake (API versions)", Within: withinDial, Bound: timeout, Err: err}
	}
	return bc, err
}

// ownDeadlinePassed reports whether the deadline of own (derived from
// ctx with a bound of the configuration) has passed and is not ctx's
// own: the clock decides, as the socket's deadline may fire an instant
// before own's timer.
func ownDeadlinePassed(ctx, own context.Context) bool {
	dl, ok := own.Deadline()
	if !ok || time.Now().Before(dl) {
		return false
	}
	pdl, ok := ctx.Deadline()
	return !ok || pdl.After(dl)
}

func dialBrokerConn(ctx context.Context, addr string, sec *Security) (*brokerConn, error) {
	nc, err := sec.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	rd := bufio.NewReaderSize(nc, 64<<10)
	rw := struct {
		io.Reader
		io.Writer
	}{rd, nc}
	// Cancelling ctx (another broker answered first) ends the handshake at once.
	av, err := sec.handshake(ctx, addr, nc, &rw)
	if err != nil {
		nc.Close()
		return nil, err
	}
	versions := map[protocol.ApiKey]int16{}
	for _, k := range av.ApiKeys {
		key := protocol.ApiKey(k.ApiKey)
		switch key {
		case protocol.Produce, protocol.Metadata, protocol.InitProducerId, protocol.CreateTopics, protocol.DescribeConfigs:
		default:
			if !negotiated(key) { // txn.go: transactions, the committed read
				continue
			}
		}
		if lo, hi := max(k.MinVersion, key.MinVersion()), min(k.MaxVersion, key.MaxVersion()); lo <= hi {
			versions[key] = hi
		}
	}
	c := &brokerConn{addr: addr, nc: nc, rd: rd, versions: versions, queue: make(chan *call, maxQueued), quit: make(chan struct{})}
	c.g.Go(c.read)
	return c, nil
}

const clientID = "cdc-outbox"

// errConnClosed: the connection was closed by the Producer (not a broker failure).
var errConnClosed = errors.New("sink: connection closed")

// send writes msg (within the version range [lo, hi] of the Produce
// request the caller encodes; lo 0 for others) and returns its call,
// answered within timeout of the moment the broker turns to it
// (answerDeadline) or failed; within names the setting timeout comes
// from (a *TimeoutError names it when the answer does not come).
func (c *brokerConn) send(msg protocol.Message, lo, hi int16, timeout time.Duration, within string) (*call, error) {
	v, ok := c.versions[msg.ApiKey()]
	if !ok || v < lo {
		return nil, fmt.Errorf("broker %s does not support %s v%d or later", c.addr, msg.ApiKey(), lo)
	}
	v = min(v, hi)
	cl := &call{key: msg.ApiKey(), version: v, timeout: timeout, within: within, done: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return nil, c.broken
	}
	c.corr++
	cl.corr = c.corr
	now := time.Now()
	var ahead time.Time
	if c.last != nil && !isClosed(c.last.done) {
		ahead = c.last.deadline
	}
	cl.deadline = answerDeadline(now, timeout, ahead)
	c.last = cl
	// Writing does not wait for the calls ahead: its own timeout.
	_ = c.nc.SetWriteDeadline(now.Add(timeout))
	// Queue first: the answer may be read before WriteRequest returns.
	c.queue <- cl
	if err := c.write(v, cl.corr, msg); err != nil {
		c.breakLocked(c.timedOut(cl, &net.OpError{Op: "write", Net: "tcp", Addr: c.nc.RemoteAddr(), Err: err}, errors.Is(err, os.ErrDeadlineExceeded)))
		return nil, c.broken
	}
	return cl, nil
}

// answerDeadline returns when the answer to a request sent at now with
// timeout must have arrived, given the deadline of the request ahead of
// it on the connection still unanswered (zero: none). A broker handles
// the requests of one connection one at a time, in order: a request's own
// timeout (a Produce request's broker-side timeout, plus a margin) starts
// only once the one ahead was answered, at the latest at that one's
// deadline. So: the later of now + timeout and ahead + timeout. Without
// it, the 2nd to 5th pipelined Produce requests to a healthy broker whose
// first waits out its timeout (a dead follower not fenced yet) broke the
// connection with the client's own read deadline.
func answerDeadline(now time.Time, timeout time.Duration, ahead time.Time) time.Time {
	own := now.Add(timeout)
	if ahead.IsZero() {
		return own
	}
	return later(own, ahead.Add(timeout))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// write writes msg as version v with correlation id corr: a Produce
// request encoded by wire.go in one write, others by kafka-go. c.mu is
// held.
func (c *brokerConn) write(v int16, corr int32, msg protocol.Message) error {
	if req, ok := msg.(*rawproduce.Request); ok {
		if b, ok := appendProduceRequest(c.wbuf[:0], v, corr, req); ok {
			_, err := c.nc.Write(b)
			if c.wbuf = b; cap(b) > wireBufMax {
				c.wbuf = nil
			}
			return err
		}
	}
	return protocol.WriteRequest(c.nc, v, corr, clientID, msg)
}

// roundTrip sends msg and waits for its answer (send).
func (c *brokerConn) roundTrip(ctx context.Context, msg protocol.Message, timeout time.Duration, within string) (protocol.Message, error) {
	cl, err := c.send(msg, 0, msg.ApiKey().MaxVersion(), timeout, within)
	if err != nil {
		return nil, err
	}
	return cl.wait(ctx)
}

// read completes the queued calls in order until the connection breaks or closes.
func (c *brokerConn) read() error {
	for {
		var cl *call
		select {
		case cl = <-c.queue:
		case <-c.quit:
			return nil
		}
		_ = c.nc.SetReadDeadline(cl.deadline)
		var (
			corr int32
			res  protocol.Message
			err  error
		)
		if cl.key == protocol.Produce && cl.version >= produceMinVersion && cl.version <= produceMaxVersion {
			var pr *produceAPI.Response
			if corr, pr, c.rbuf, err = readProduceResponse(c.rd, cl.version, c.rbuf); err == nil {
				res = pr
			}
			if cap(c.rbuf) > wireBufMax {
				c.rbuf = nil
			}
		} else {
			corr, res, err = protocol.ReadResponse(c.rd, cl.key, cl.version)
		}
		if err == nil && corr != cl.corr {
			err = fmt.Errorf("correlation id %d, want %d", corr, cl.corr)
		}
		if err != nil {
			// The answer's deadline passed: kafka-go's decoders may keep
			// only the text of the socket's error, so the clock decides.
			late := errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(cl.deadline)
			c.mu.Lock()
			c.breakLocked(c.timedOut(cl, &net.OpError{Op: "read", Net: "tcp", Addr: c.nc.RemoteAddr(), Err: err}, late))
			cl.err = c.broken
			close(cl.done)
			c.mu.Unlock()
			return nil
		}
		cl.res = res
		close(cl.done)
	}
}

// timedOut is err as a *TimeoutError naming cl's setting when late (its
// deadline passed), else err.
func (c *brokerConn) timedOut(cl *call, err error, late bool) error {
	if !late || cl.within == "" {
		return err
	}
	bound := cl.timeout
	if cl.key == protocol.Produce {
		bound -= produceMargin // the setting's value, without the margin
	}
	return &TimeoutError{Addr: c.addr, What: "a " + cl.key.String() + " request", Within: cl.within, Bound: bound, Err: err}
}

// breakLocked marks the connection broken with err (the first error
// wins), closes it and fails every queued call. c.mu is held.
func (c *brokerConn) breakLocked(err error) {
	if c.broken == nil {
		c.broken = err
		c.nc.Close()
		close(c.quit)
	}
	for {
		select {
		case cl := <-c.queue:
			cl.err = c.broken
			close(cl.done)
		default:
			return
		}
	}
}

// alive reports whether the connection can take requests.
func (c *brokerConn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken == nil
}

// abandon breaks the connection with err: the calls in flight fail with
// it. It waits for the reader to stop.
func (c *brokerConn) abandon(err error) {
	c.mu.Lock()
	c.breakLocked(err)
	c.mu.Unlock()
	_ = c.g.Wait()
}

// close closes the connection, fails the calls in flight and waits for
// the reader to stop.
func (c *brokerConn) close() {
	c.mu.Lock()
	c.breakLocked(errConnClosed)
	c.mu.Unlock()
	_ = c.g.Wait()
}
