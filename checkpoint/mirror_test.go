package checkpoint

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"go.uber.org/zap"
)

// slowMirror is a Mirror whose copies block until released (or their
// context ends) while hold is set, or fail with fail; it records the
// position of every copy made and counts the tries.
type slowMirror struct {
	mu      sync.Mutex
	hold    chan struct{} // non-nil: Save waits for it to close
	entered chan struct{} // a Save began (buffered)
	fail    error
	tries   int
	copied  []uint32
}

func newSlowMirror() *slowMirror { return &slowMirror{entered: make(chan struct{}, 100)} }

func (m *slowMirror) Save(ctx context.Context, key string, value []byte) error {
	m.mu.Lock()
	m.tries++
	hold, fail := m.hold, m.fail
	m.mu.Unlock()
	select {
	case m.entered <- struct{}{}:
	default:
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		return fail
	}
	cp, err := Parse(key, value)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.copied = append(m.copied, cp.Pos)
	m.mu.Unlock()
	return nil
}

func (m *slowMirror) Load(context.Context, string) ([]byte, bool, error) { return nil, false, nil }
func (m *slowMirror) Delete(context.Context, string) error               { return nil }

func (m *slowMirror) state() (tries int, copied []uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tries, append([]uint32(nil), m.copied...)
}

// waitFor polls cond until it holds, failing after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// send hands a to the Committer, failing when it does not take it within
// 5 s (the Committer no longer reads the acknowledgements).
func send(t *testing.T, acks chan<- Ack, a Ack) {
	t.Helper()
	select {
	case acks <- a:
	case <-time.After(5 * time.Second):
		t.Fatalf("the Committer did not take the acknowledgement of %d within 5 s", a.End.Pos)
	}
}

// A copy to the mirror that hangs (its broker paused) holds neither the
// acknowledgements nor the Redis writes: the Committer takes them and
// stores the newest while the copy waits; once it is released, the copy
// that follows is of the newest position (the ones between are dropped),
// and the final write leaves the mirror up to date.
func TestCommitterCopyOffTheAckPath(t *testing.T) {
	b, m := newFake(), newSlowMirror()
	m.hold = make(chan struct{})
	w := NewWriter(b, Source{}, nil)
	w.SetMirror(m, 5*time.Millisecond, nil)
	c := NewCommitter(w, 5*time.Millisecond, time.Minute, binlog.Position{}, zap.NewNop())
	acks := make(chan Ack)
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), acks) }()

	send(t, acks, Ack{End: pos("f.000001", 10)})
	<-m.entered // the copy of 10 hangs
	for _, p := range []uint32{20, 30, 40} {
		send(t, acks, Ack{End: pos("f.000001", p)})
	}
	waitFor(t, "Redis to hold 40 while the copy hangs", func() bool { cp, _ := b.last(); return cp.Pos == 40 })
	if tries, _ := m.state(); tries != 1 {
		t.Fatalf("%d copies tried while the first hangs, want 1", tries)
	}
	close(m.hold)
	waitFor(t, "the copy of 40", func() bool { _, copied := m.state(); return len(copied) == 2 })
	close(acks)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, copied := m.state(); len(copied) != 2 || copied[0] != 10 || copied[1] != 40 {
		t.Fatalf("copies of %v, want [10 40]: the newest wins", copied)
	}
}

// A failing copy is counted and reported, retried off the
// acknowledgement path, and tried once more, bounded, by the final write.
func TestCommitterCopyFailures(t *testing.T) {
	b, m := newFake(), newSlowMirror()
	m.fail = errors.New("mirror broker paused")
	var mu sync.Mutex
	var reported []error
	w := NewWriter(b, Source{}, nil)
	w.SetMirror(m, 5*time.Millisecond, func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() })
	// timeout: the final write's bound is 2 × timeout.
	c := NewCommitter(w, 5*time.Millisecond, 50*time.Millisecond, binlog.Position{}, zap.NewNop())
	acks := make(chan Ack)
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), acks) }()
	send(t, acks, Ack{End: pos("f.000001", 10)})
	waitFor(t, "two failed copies", func() bool { return c.MirrorFailures() >= 2 })
	send(t, acks, Ack{End: pos("f.000001", 20)})
	waitFor(t, "Redis to hold 20", func() bool { cp, _ := b.last(); return cp.Pos == 20 })

	// The final write tries the copy once, within its bound, even when
	// it hangs.
	m.mu.Lock()
	m.hold, m.fail = make(chan struct{}), nil
	m.mu.Unlock()
	for len(m.entered) > 0 {
		<-m.entered
	}
	before, _ := m.state()
	close(acks)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the final write waited for the hanging copy beyond its bound")
	}
	tries, copied := m.state()
	if tries-before > 3 || len(copied) != 0 { // the copier's tries cut short or timed out (one, two under load), and the final one
		t.Fatalf("%d tries at the end, copies %v", tries-before, copied)
	}
	mu.Lock()
	n := len(reported)
	mu.Unlock()
	if n < 3 || uint64(n) != c.MirrorFailures() {
		t.Fatalf("%d failures reported, %d counted", n, c.MirrorFailures())
	}
}

// copyRetry: every after a success; after failures interval, doubling,
// up to every.
func TestCopyRetry(t *testing.T) {
	const interval, every = time.Second, 10 * time.Second
	for _, c := range []struct {
		err          bool
		failed, want time.Duration
	}{
		{false, 0, every},
		{false, 8 * time.Second, every},
		{true, 0, interval},
		{true, interval, 2 * time.Second},
		{true, 4 * time.Second, 8 * time.Second},
		{true, 8 * time.Second, every},
		{true, every, every},
	} {
		nf, got := copyRetry(c.err, c.failed, interval, every)
		if got != c.want || (c.err && nf != got) || (!c.err && nf != 0) {
			t.Errorf("copyRetry(%v, %s) = %s, %s; want wait %s", c.err, c.failed, nf, got, c.want)
		}
	}
}

// hangingBackend's Save waits until hold is closed (or its ctx ends), as
// a paused Redis does until checkpoint.timeout.
type hangingBackend struct {
	*fakeBackend
	entered chan struct{}
	once    sync.Once
	hold    chan struct{}
}

func (h *hangingBackend) Save(ctx context.Context, c Checkpoint, o WriteOptions) error {
	h.once.Do(func() { close(h.entered) })
	select {
	case <-h.hold:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.fakeBackend.Save(ctx, c, o)
}

// A Redis write that hangs (Redis paused or slow, each write waiting up
// to checkpoint.timeout) does not hold the acknowledgements: the Committer
// takes them meanwhile, so the writer goes on publishing, and the next
// write stores the newest. Before, the Committer read about one
// acknowledgement per timed-out write, and the writer stalled behind the
// full buffer.
func TestCommitterAcksWhileRedisHangs(t *testing.T) {
	h := &hangingBackend{fakeBackend: newFake(), entered: make(chan struct{}), hold: make(chan struct{})}
	w := NewWriter(h, Source{}, nil)
	c := NewCommitter(w, 5*time.Millisecond, time.Minute, binlog.Position{}, zap.NewNop())
	acks := make(chan Ack)
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), acks) }()
	send(t, acks, Ack{End: pos("f.000001", 10)})
	<-h.entered // the write of 10 hangs
	for p := uint32(20); p <= 1000; p += 10 {
		send(t, acks, Ack{End: pos("f.000001", p)})
	}
	close(h.hold)
	waitFor(t, "Redis to hold 1000", func() bool { cp, _ := h.last(); return cp.Pos == 1000 })
	close(acks)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
