package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/health"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"go.uber.org/zap"
)

// recorder records the publisher's states, liveness and observations.
type recorder struct {
	mu        sync.Mutex
	states    []health.State
	pauses    int
	onPause   func()
	restarts  int
	sourceSt  [][2]bool
	behind    []int64
	headroom  [][2]int64
	heardSets int
	nop
}

func (r *recorder) Set(s health.State, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, s)
}
func (r *recorder) Tick() {}
func (r *recorder) Pause() {
	r.mu.Lock()
	r.pauses++
	f := r.onPause
	r.mu.Unlock()
	if f != nil {
		f()
	}
}
func (r *recorder) Restarted() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restarts++
}
func (r *recorder) SourceState(connected, caughtUp bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sourceSt = append(r.sourceSt, [2]bool{connected, caughtUp})
}
func (r *recorder) SetBytesBehind(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.behind = append(r.behind, n)
}
func (r *recorder) SetRetentionHeadroom(b int64, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.headroom = append(r.headroom, [2]int64{b, int64(d)})
}

func (r *recorder) last() health.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return health.Starting
	}
	return r.states[len(r.states)-1]
}

// fence is a lease whose loss the test decides.
type fence struct{ lost chan struct{} }

func (f fence) Token() uint64         { return 7 }
func (f fence) Owner() string         { return "me" }
func (f fence) Lost() <-chan struct{} { return f.lost }

// Publisher.Run's rule: a fatal error stops it (Failed without a lease);
// a retryable one restarts after the backoff (Degraded, Restarted, the
// liveness paused), and a signal during the backoff stops it with nil; a
// lost lease stops it at once with ErrLeaseLost.
func TestPublisherRun(t *testing.T) {
	t.Run("fatal", func(t *testing.T) {
		rec := &recorder{}
		p := testPublisher(testConfig(), &fakeStore{}, &fakeMirror{}, fakeTopics{})
		p.opts.Phase, p.opts.Live = rec, rec
		p.connect = func(context.Context, string) (server, error) {
			return nil, fmt.Errorf("%w: no such server", binlog.ErrStart)
		}
		st := &fakeStore{stop: &checkpoint.Stop{Reason: "an earlier stop"}}
		p.store = st
		err := p.Run(context.Background())
		if !errors.Is(err, binlog.ErrStart) || rec.last() != health.Failed || rec.restarts != 0 {
			t.Fatalf("Run = %v, state %s, %d restarts", err, rec.last(), rec.restarts)
		}
		// The stop is recorded for the status command: the start cleared
		// the earlier record, the fatal error wrote its own.
		if st.stop == nil || st.stop.Reason != err.Error() || st.stop.At.IsZero() {
			t.Fatalf("stop record %+v, want the error %q", st.stop, err)
		}
	})
	t.Run("a start clears the stop record", func(t *testing.T) {
		st := &fakeStore{stop: &checkpoint.Stop{Reason: "an earlier stop"}}
		p := testPublisher(testConfig(), st, nil, fakeTopics{})
		ctx, cancel := context.WithCancel(context.Background())
		p.connect = func(context.Context, string) (server, error) {
			if st.stop != nil {
				t.Errorf("the stop record %+v is still there when the start connects", st.stop)
			}
			cancel()
			return nil, context.Canceled
		}
		if err := p.Run(ctx); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
	t.Run("retry, then a signal", func(t *testing.T) {
		rec := &recorder{}
		p := testPublisher(testConfig(), &fakeStore{}, nil, fakeTopics{})
		p.obs = Observers{Stops: rec, Lag: rec}.orNop()
		p.opts.Phase, p.opts.Live = rec, rec
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls := 0
		p.connect = func(context.Context, string) (server, error) {
			calls++
			return nil, errFake
		}
		rec.onPause = func() {
			if rec.last() != health.Degraded {
				t.Errorf("paused in state %s, want degraded", rec.last())
			}
			cancel()
		}
		if err := p.Run(ctx); err != nil || calls != 1 || rec.restarts != 1 || rec.pauses != 1 {
			t.Fatalf("Run = %v after %d attempts, %d restarts, %d pauses", err, calls, rec.restarts, rec.pauses)
		}
	})
	t.Run("retry, then fatal", func(t *testing.T) {
		rec := &recorder{}
		p := testPublisher(testConfig(), &fakeStore{}, nil, fakeTopics{})
		p.opts.Phase = rec
		calls := 0
		p.connect = func(context.Context, string) (server, error) {
			if calls++; calls == 1 {
				return nil, errFake
			}
			return nil, fmt.Errorf("%w: refused", ErrTopicMissing)
		}
		if err := p.Run(context.Background()); !errors.Is(err, ErrTopicMissing) || calls != 2 {
			t.Fatalf("Run = %v after %d attempts", err, calls)
		}
	})
	t.Run("lease lost", func(t *testing.T) {
		p := testPublisher(testConfig(), &fakeStore{}, nil, fakeTopics{})
		f := fence{lost: make(chan struct{})}
		p.opts.Fence = f
		p.connect = func(ctx context.Context, _ string) (server, error) {
			close(f.lost)
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		if err := p.Run(context.Background()); !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrAbort) {
			t.Fatalf("Run = %v, want ErrLeaseLost", err)
		}
	})
	t.Run("a fatal error under a lease: the supervisor decides", func(t *testing.T) {
		rec := &recorder{}
		p := testPublisher(testConfig(), &fakeStore{}, nil, fakeTopics{})
		p.opts.Phase, p.opts.Fence = rec, fence{lost: make(chan struct{})}
		p.connect = func(context.Context, string) (server, error) {
			return nil, &checkpoint.FencedError{Key: "k"}
		}
		st := &fakeStore{}
		p.store = st
		if err := p.Run(context.Background()); !errors.Is(err, checkpoint.ErrFenced) || rec.last() == health.Failed || st.stop != nil {
			t.Fatalf("Run = %v, state %s, stop record %+v", err, rec.last(), st.stop)
		}
	})
}

// The caught-up tracking: the dump's start at the end of the binlog is
// caught up at once; a heartbeat is caught up when everything read up to
// it is acknowledged, and an acknowledgement reaching the heartbeat's
// position catches up.
func TestProgress(t *testing.T) {
	rec := &recorder{}
	p := &Publisher{obs: Observers{Lag: rec}.orNop(), log: zap.NewNop()}
	g := &progress{p: p, acked: at(100)}
	g.Streaming()
	if g.caughtUp() {
		t.Fatal("caught up before any heartbeat")
	}
	g.Idle(at(200))
	if g.caughtUp() {
		t.Fatal("caught up with 100 acknowledged of 200 read")
	}
	g.ack(sink.Ack{End: at(200)})
	if !g.caughtUp() {
		t.Fatal("not caught up with everything acknowledged")
	}
	g.Idle(at(200))
	want := [][2]bool{{true, false}, {true, false}, {true, true}, {true, true}}
	if fmt.Sprint(rec.sourceSt) != fmt.Sprint(want) || fmt.Sprint(rec.behind) != "[0]" {
		t.Fatalf("source states %v, bytes behind %v", rec.sourceSt, rec.behind)
	}
}

// One measurement: bytes behind (not caught up), and the retention
// headroom of the saved position in bytes and, once its file's opening
// time is known, in seconds.
func TestMeasureOnce(t *testing.T) {
	rec := &recorder{}
	p := &Publisher{obs: Observers{Lag: rec}.orNop(), log: zap.NewNop()}
	srv := newFakeServer()
	srv.files = []binlog.LogFile{{Name: "b.000001", Size: 1000}, {Name: "b.000002", Size: 500}}
	w := checkpoint.NewWriter(&memBackend{}, checkpoint.Source{ServerID: 1}, nil)
	c := checkpoint.NewCommitter(w, time.Second, time.Second, at(400), zap.NewNop())
	files := &fileTimes{}
	if err := p.measureOnce(srv, c, &progress{p: p}, files); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rec.behind) != "[1100]" || len(rec.headroom) != 1 || rec.headroom[0][0] != 400 || rec.headroom[0][1] >= 0 {
		t.Fatalf("behind %v, headroom %v", rec.behind, rec.headroom)
	}
	files.FileStarted("b.000001", time.Now().Add(-time.Minute))
	if err := p.measureOnce(srv, c, &progress{p: p}, files); err != nil {
		t.Fatal(err)
	}
	if d := time.Duration(rec.headroom[1][1]); d < 58*time.Minute || d > time.Hour {
		t.Fatalf("headroom %s, want about 59 min (an hour's expiry, the file opened a minute ago)", d)
	}
}

// empty is a source with nothing to read.
type empty struct{ out chan binlog.Txn }

func (s *empty) Txns() <-chan binlog.Txn   { return s.out }
func (s *empty) Run(context.Context) error { close(s.out); return nil }

// A stream of a source that ends at once: nothing produced, the resume
// position stays the saved one, and the partition counts written with
// the checkpoint are kept for the next start.
func TestStreamEmpty(t *testing.T) {
	p := testPublisher(testConfig(), &fakeStore{}, nil, fakeTopics{})
	p.parts = map[string]int{"t": 3}
	cpw := checkpoint.NewWriter(&memBackend{}, checkpoint.Source{ServerID: 1}, map[string]int{"u": 2})
	if err := p.stream(context.Background(), "test", &empty{out: make(chan binlog.Txn)}, nil, nil, cpw, at(100), true); err != nil {
		t.Fatal(err)
	}
	if p.resume != at(100) || p.parts["t"] != 3 || p.parts["u"] != 2 {
		t.Fatalf("resume %s, parts %v", p.resume, p.parts)
	}
}
