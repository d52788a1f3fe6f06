package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The single im table: its columns are read from the server, and its
// name is the metrics' one table.
func TestTablesLegacy(t *testing.T) {
	cfg := testConfig()
	ts, cols, err := Tables(cfg, newFakeServer())
	if err != nil || !ts.Legacy() || len(cols) != 1 || cols[0] != "id" {
		t.Fatalf("Tables = %v %v %v", ts, cols, err)
	}
	if names := tableNames(cfg, newFakeServer()); len(names) != 1 || names[0] != "im.outbox" {
		t.Fatalf("tableNames = %v", names)
	}
	if !legacy(cfg) {
		t.Fatal("the single table is not legacy")
	}
}

// Which stored checkpoint run resumes from.
func TestStoredWins(t *testing.T) {
	cp := cpAt(4, nil)
	for _, c := range []struct {
		s    Stored
		want string
	}{
		{Stored{Redis: cp, Mirror: cp}, "redis"},
		{Stored{RedisCorrupt: checkpoint.ErrCorrupt, Mirror: cp}, "redis"},
		{Stored{Mirror: cp}, "mirror"},
		{Stored{}, "none"},
	} {
		if got := c.s.Wins(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.s, got, c.want)
		}
	}
	e := &RefusedError{Err: ErrPublisherRunning}
	if !errors.Is(e, ErrPublisherRunning) || e.Error() != ErrPublisherRunning.Error() {
		t.Fatalf("RefusedError %v", e)
	}
}

// NewPublisher wires the real dependencies without connecting; the
// liveness period covers a read timeout and a produce round's retries.
func TestNewPublisher(t *testing.T) {
	cfg := testConfig()
	p := NewPublisher(cfg, Options{}, Observers{}, zap.NewNop())
	defer p.store.Close()
	if p.mirror == nil || p.mirror.Topic() != cfg.Checkpoint.MirrorTopic || p.connect == nil || p.topics == nil {
		t.Fatalf("publisher %+v", p)
	}
	cfg.Checkpoint.MirrorTopic = ""
	if q := NewPublisher(cfg, Options{}, Observers{}, zap.NewNop()); q.mirror != nil {
		t.Fatal("a mirror without checkpoint.mirror-topic")
	}
	if d := LivenessPeriod(cfg); d < 2*cfg.Source.ReadTimeout+cfg.Kafka.WriteTimeout {
		t.Fatalf("LivenessPeriod %s", d)
	}
}

// The backfill's progress counts acknowledged rows and draws the bar;
// its records carry backfill=true.
func TestBackfillProgressAndRouter(t *testing.T) {
	var bar []int64
	core, logs := observer.New(zap.InfoLevel)
	st := &backfillState{began: time.Now().Add(-time.Minute), last: time.Now().Add(-time.Minute), total: 10, log: zap.New(core),
		bar: func(acked, total int64, _ string) { bar = append(bar, acked) }}
	st.ack(sink.Ack{End: at(10), Events: 4})
	st.ack(sink.Ack{End: at(20), Events: 3})
	if st.acked != 7 || fmt.Sprint(bar) != "[4 7]" || logs.FilterMessage("backfill progress").Len() != 1 {
		t.Fatalf("acked %d, bar %v, %d progress lines", st.acked, bar, logs.FilterMessage("backfill progress").Len())
	}
	cfg := testConfig()
	r := backfillRouter{router.New(cfg.Router, cfg.ReservedTopics())}
	m, _ := r.Route(&binlog.Event{EventType: "e", Payload: []byte(`{}`)}, at(10))
	if len(m.Headers) == 0 || m.Headers[len(m.Headers)-1].Key != HeaderBackfill {
		t.Fatalf("headers %v", m.Headers)
	}
}

// A <file>:<pos> start the server purged is looked up in source.archive:
// refused, naming what the archive holds, when it is not there.
func TestResolveStartArchive(t *testing.T) {
	cfg := testConfig()
	cfg.Source.Archive = "../binlog/testdata/json/binlog.000005"
	p := testPublisher(cfg, &fakeStore{}, nil, fakeTopics{})
	srv := &unavailable{newFakeServer()}
	_, err := p.resolveStart(srv, binlog.Start{Kind: binlog.StartFilePos, File: "b.000001", Pos: 4})
	if !errors.Is(err, binlog.ErrPositionUnavailable) || !strings.Contains(err.Error(), "does not hold it either") {
		t.Fatalf("resolveStart = %v", err)
	}
	p.cfg.Source.Archive = ""
	if _, err := p.resolveStart(srv, binlog.Start{Kind: binlog.StartFilePos, File: "b.000001", Pos: 4}); !errors.Is(err, binlog.ErrPositionUnavailable) {
		t.Fatalf("without an archive: %v", err)
	}
	if archiveRange(nil) != "no files" || cmpErr(nil, errFake) != errFake || cmpErr(errFake, nil) != errFake {
		t.Fatal("archive helpers")
	}
	_ = context.Background()
}

// unavailable is a server without the position asked for.
type unavailable struct{ *fakeServer }

func (u *unavailable) Resolve(binlog.Start) (binlog.Position, error) {
	return binlog.Position{}, fmt.Errorf("%w: purged", binlog.ErrPositionUnavailable)
}

// A resume position in the oldest binlog file the server keeps: a Warn
// (the next purge takes it), at most once per 10 minutes.
func TestWarnHeadroom(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	p := testPublisher(testConfig(), &fakeStore{}, nil, fakeTopics{})
	p.log = zap.New(core)
	srv := newFakeServer()
	srv.files = []binlog.LogFile{{Name: "b.000001", Size: 1000}, {Name: "b.000002", Size: 500}}
	p.warnHeadroom(srv, at(400))
	p.warnHeadroom(srv, at(400))
	p.warnHeadroom(srv, binlog.Position{File: "b.000002", Pos: 4})
	p.warnHeadroom(srv, binlog.Position{})
	if n := logs.FilterMessageSnippet("oldest binlog file").Len(); n != 1 {
		t.Fatalf("%d warnings, want 1", n)
	}
}

// attempt runs the phases, then streams from the resolved position: a
// source that cannot be read ends the attempt with the reader's error,
// the first checkpoint stored.
func TestAttemptStreams(t *testing.T) {
	cfg := testConfig()
	cfg.Source.Addr = "127.0.0.1:1" // nothing listens: the reader's dial fails at once
	st := &fakeStore{persistent: true, policy: "noeviction"}
	p := testPublisher(cfg, st, nil, fakeTopics{counts: map[string]int{"t": 3}})
	srv := newFakeServer()
	p.connect = func(context.Context, string) (server, error) { return srv, nil }
	err := p.attempt(context.Background(), 0)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("attempt = %v, want the reader's connection error", err)
	}
	if st.cp == nil || st.cp.Pos != 1000 || !p.known || p.resume != at(1000) {
		t.Fatalf("stored %+v, resume %s", st.cp, p.resume)
	}
}

// The start's checkpoint writer carries the lease and copies every write
// to the mirror; a failed copy is logged, the Redis write stands.
func TestWriterFenceAndMirror(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	st, m := &fakeStore{}, &fakeMirror{}
	p := testPublisher(testConfig(), st, m, fakeTopics{})
	p.log = zap.New(core)
	p.opts.Fence = fence{lost: make(chan struct{})}
	w := p.writer(checkpoint.Source{ServerID: 1}, nil, false)
	if _, err := applyIntents(context.Background(), w, p.log, []checkpoint.Intent{write("first start", at(10))}); err != nil {
		t.Fatal(err)
	}
	if st.cp == nil || st.cp.Token != 7 || st.cp.Owner != "me" {
		t.Fatalf("stored %+v, want the fence's token and owner", st.cp)
	}
	if _, ok := m.vals["k"]; !ok {
		t.Fatal("not copied to the mirror")
	}
	m.saveErr = errFake
	if _, err := applyIntents(context.Background(), w, p.log, []checkpoint.Intent{write("first start", at(20))}); err != nil || st.cp.Pos != 20 {
		t.Fatalf("a failed copy: %v, stored %+v", err, st.cp)
	}
	if logs.FilterMessageSnippet("cannot copy the checkpoint to the mirror").Len() != 1 {
		t.Fatal("the failed copy was not logged")
	}
}
