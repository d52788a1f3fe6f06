package pipeline

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"go.uber.org/zap"
)

// endless sends numbered transactions until cancelled.
type endless struct{ out chan binlog.Txn }

func (s *endless) Txns() <-chan binlog.Txn { return s.out }
func (s *endless) Run(ctx context.Context) error {
	defer close(s.out)
	for i := uint32(4); ; i++ {
		select {
		case s.out <- binlog.Txn{End: binlog.Position{File: "b.000001", Pos: i}, Events: make([]binlog.Event, 1), Held: 1}:
		case <-ctx.Done():
			return nil
		}
	}
}

// slowWriter acknowledges each transaction after a delay, ignoring
// nothing it read: what it read before the signal must still be acked.
type slowWriter struct {
	acks  chan sink.Ack
	delay time.Duration
	mu    sync.Mutex
	read  []binlog.Position
	first chan struct{} // closed at the first transaction read, when set
	once  sync.Once
}

func (w *slowWriter) Acks() <-chan sink.Ack { return w.acks }
func (w *slowWriter) Run(ctx context.Context, in <-chan binlog.Txn) error {
	defer close(w.acks)
	for txn := range in {
		w.mu.Lock()
		w.read = append(w.read, txn.End)
		w.mu.Unlock()
		if w.first != nil {
			w.once.Do(func() { close(w.first) })
		}
		select {
		case <-time.After(w.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		w.acks <- sink.Ack{End: txn.End, Held: txn.Held, Txns: 1, Events: len(txn.Events)}
	}
	return nil
}

type lastCommitter struct{ last binlog.Position }

func (c *lastCommitter) Run(_ context.Context, acks <-chan checkpoint.Ack) error {
	for a := range acks {
		c.last = a.End
	}
	return nil
}

type released struct {
	mu sync.Mutex
	n  int64
}

func (r *released) Release(n int64) { r.mu.Lock(); r.n += n; r.mu.Unlock() }

// A signal stops the source; everything the writer already read is still
// acknowledged and reaches the committer and the budget (one shutdown rule
// for every flow).
func TestRunSignalDrains(t *testing.T) {
	src := &endless{out: make(chan binlog.Txn, 8)}
	w := &slowWriter{acks: make(chan sink.Ack, 64), delay: 2 * time.Millisecond}
	c := &lastCommitter{}
	b := &released{}
	events := 0
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	err := Run(ctx, Stages{Name: "test", Source: src, Writer: w, Committer: c, Budget: b, OnAck: func(a sink.Ack) { events += a.Events }}, 10*time.Second, zap.NewNop())
	if err != nil {
		t.Fatalf("Run = %v, want nil after a complete drain", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.read) == 0 || c.last != w.read[len(w.read)-1] {
		t.Fatalf("committer at %v, writer read up to %v", c.last, w.read[len(w.read)-1])
	}
	if b.n != int64(len(w.read)) || events != len(w.read) {
		t.Fatalf("released %d, events %d, want %d", b.n, events, len(w.read))
	}
}

// A drain that does not end within the shutdown timeout is cut short.
func TestRunDrainBounded(t *testing.T) {
	src := &endless{out: make(chan binlog.Txn, 8)}
	w := &slowWriter{acks: make(chan sink.Ack, 64), delay: time.Hour, first: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-w.first; cancel() }()
	began := time.Now()
	err := Run(ctx, Stages{Name: "test", Source: src, Writer: w}, 20*time.Millisecond, zap.NewNop())
	if err == nil || time.Since(began) > 5*time.Second {
		t.Fatalf("Run = %v after %s, want the cut-short drain's error", err, time.Since(began))
	}
}

// fencedCommitter reads nothing until the acknowledgements' buffer is
// full (a slow write), then refuses (another instance holds the lease).
type fencedCommitter struct{}

func (fencedCommitter) Run(_ context.Context, acks <-chan checkpoint.Ack) error {
	for len(acks) < cap(acks) {
		time.Sleep(time.Millisecond)
	}
	return checkpoint.ErrFenced
}

// A committer that returned (fenced) stops the run: the relay does not
// wait for it with the acknowledgements' buffer full (issue 30 item 1: the
// old owner hung for good after a Redis outage, ignoring SIGTERM).
func TestRunCommitterReturnedDoesNotHang(t *testing.T) {
	src := &endless{out: make(chan binlog.Txn, 8)}
	w := &slowWriter{acks: make(chan sink.Ack, 64)}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Stages{Name: "test", Source: src, Writer: w, Committer: fencedCommitter{}}, 10*time.Second, zap.NewNop())
	}()
	select {
	case err := <-done:
		if !errors.Is(err, checkpoint.ErrFenced) {
			t.Fatalf("Run = %v, want ErrFenced", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still running 30 s after the committer returned ErrFenced")
	}
}
