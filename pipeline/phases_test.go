package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// memBackend is an in-memory checkpoint.Backend recording every write.
type memBackend struct {
	mu     sync.Mutex
	cp     *checkpoint.Checkpoint
	writes []checkpoint.Checkpoint
	fail   error
}

func (m *memBackend) Key() string { return "k" }

func (m *memBackend) Load(context.Context) (*checkpoint.Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cp, nil
}

func (m *memBackend) Save(_ context.Context, c checkpoint.Checkpoint, o checkpoint.WriteOptions) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if o.Fence != nil { // as Store.Save stamps them
		c.Token, c.Owner = o.Fence.Token, o.Fence.Owner
	}
	m.cp = &c
	m.writes = append(m.writes, c)
	return nil
}

func (m *memBackend) Delete(context.Context, checkpoint.WriteOptions) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	had := m.cp != nil
	m.cp = nil
	return had, m.fail
}

func (m *memBackend) positions() []uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []uint32
	for _, c := range m.writes {
		out = append(out, c.Pos)
	}
	return out
}

func at(pos uint32) binlog.Position { return binlog.Position{File: "b.000001", Pos: pos} }

// The phase loop: phases run in order; each step's intents are applied in
// order through the start's writer, then its applied runs; a phase asking
// again runs again; a failed write stops the start before applied.
func TestRunPhases(t *testing.T) {
	b := &memBackend{}
	p := &Publisher{log: zap.NewNop()}
	st := &startState{}
	var trace []string
	rounds := 0
	phases := []phase{
		{"writer", func(context.Context, *startState) (step, error) {
			trace = append(trace, "writer")
			st.cpw = checkpoint.NewWriter(b, checkpoint.Source{ServerID: 1}, nil)
			return step{}, nil
		}},
		{"two writes", func(context.Context, *startState) (step, error) {
			trace = append(trace, "two writes")
			return step{writes: []checkpoint.Intent{write("a", at(10)), write("b", at(20))}, applied: func() {
				trace = append(trace, "applied after "+st.cpw.Key())
				if got := b.positions(); !slices.Equal(got, []uint32{10, 20}) {
					t.Errorf("applied ran after writes %v, want [10 20]", got)
				}
			}}, nil
		}},
		{"again", func(context.Context, *startState) (step, error) {
			rounds++
			trace = append(trace, "again")
			return step{writes: []checkpoint.Intent{write("hand-over", at(uint32(30+rounds)))}, again: rounds < 3}, nil
		}},
	}
	if err := p.runPhases(context.Background(), phases, st); err != nil {
		t.Fatal(err)
	}
	if want := []string{"writer", "two writes", "applied after k", "again", "again", "again"}; !slices.Equal(trace, want) {
		t.Fatalf("trace %v, want %v", trace, want)
	}
	if got := b.positions(); !slices.Equal(got, []uint32{10, 20, 31, 32, 33}) {
		t.Fatalf("writes %v", got)
	}

	b.fail = errors.New("redis down")
	ran := false
	err := p.runPhases(context.Background(), []phase{{"fails", func(context.Context, *startState) (step, error) {
		return step{writes: []checkpoint.Intent{write("x", at(40))}, applied: func() { ran = true }}, nil
	}}, {"never", func(context.Context, *startState) (step, error) {
		t.Error("a phase ran after a failed write")
		return step{}, nil
	}}}, st)
	if err == nil || ran {
		t.Fatalf("failed write: %v, applied ran %v", err, ran)
	}

	refused := errors.New("refused")
	if err := p.runPhases(context.Background(), []phase{{"refuses", func(context.Context, *startState) (step, error) {
		return step{}, refused
	}}}, st); !errors.Is(err, refused) {
		t.Fatalf("a phase's error: %v", err)
	}
	if err := p.runPhases(context.Background(), []phase{{"early", func(context.Context, *startState) (step, error) {
		return step{writes: []checkpoint.Intent{write("x", at(1))}}, nil
	}}}, &startState{}); err == nil {
		t.Fatal("a write before the writer exists was accepted")
	}
}

// The start-up phases, in the order of the table in docs/operations.md
// ("Where a run starts"), and the checkpoint writes the table says each
// may want are the ones the code names.
func TestStartPhases(t *testing.T) {
	var names []string
	for _, ph := range (&Publisher{}).startPhases() {
		names = append(names, ph.name)
	}
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	code := readGo(t)
	for line := range strings.SplitSeq(string(b), "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if !strings.HasPrefix(line, "| ") || len(cells) != 3 || !slices.Contains(names, strings.TrimSpace(cells[0])) {
			continue
		}
		doc = append(doc, strings.TrimSpace(cells[0]))
		for i, w := range strings.Split(cells[2], "`") {
			if i%2 == 0 || strings.HasPrefix(w, "--") { // outside code spans; a flag
				continue
			}
			if !strings.Contains(code, `"`+w+`"`) {
				t.Errorf("phase %s: the write %q of the docs is not an Intent.Why of the code", cells[0], w)
			}
		}
	}
	if !slices.Equal(names, doc) {
		t.Fatalf("phases %v, the docs' table %v", names, doc)
	}
}

// readGo returns the package's non-test Go source.
func readGo(t *testing.T) string {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	var sb strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(b)
	}
	return sb.String()
}

// The start-up phases on fakes, case by case: where the start streams
// from, the checkpoint writes it applies (by Intent.Why, in order) or the
// error that refuses it.
func TestStartPhasesTable(t *testing.T) {
	counts := map[string]int{"t": 3}
	mirrorCopy := func() *fakeMirror {
		b, _ := checkpoint.Encode(*cpAt(700, counts))
		return &fakeMirror{vals: map[string][]byte{"k": b}}
	}
	purged := &binlog.Purged{Oldest: binlog.Position{File: "b.000002", Pos: 4}, FilesPurged: 1, Transactions: -1}
	cases := []struct {
		name    string
		cfg     func(*config.Config)
		stored  *checkpoint.Checkpoint
		mirror  *fakeMirror
		topics  fakeTopics
		srv     func(*fakeServer)
		known   bool // a restart: p.resume is known
		accept  bool
		writes  []string
		from    uint32
		wantErr error
		errHas  string
	}{
		{name: "first start: the configured start (latest) stored", writes: []string{"first start"}, from: 1000},
		{name: "first start, --start earliest", cfg: func(c *config.Config) { c.Source.Start = "earliest" }, writes: []string{"first start"}, from: 4},
		{name: "Redis checkpoint: resume there, nothing written", stored: cpAt(500, counts), from: 500},
		{name: "Redis lost the key, the mirror has a copy: written back", mirror: mirrorCopy(), writes: []string{"mirror resume"}, from: 700},
		{name: "mirror topic without a copy: first start", mirror: &fakeMirror{}, writes: []string{"first start"}, from: 1000},
		{name: "partition count changed: refused", stored: cpAt(500, map[string]int{"t": 2}), wantErr: ErrPartitionsChanged},
		{name: "partition count changed, --accept-partition-change: stored, then resume", stored: cpAt(500, map[string]int{"t": 2}), accept: true,
			writes: []string{"partition change"}, from: 500},
		{name: "topic missing: the start stored, then refused", topics: fakeTopics{counts: map[string]int{}}, writes: []string{"first start"}, wantErr: ErrTopicMissing},
		{name: "topic missing with a checkpoint: refused, nothing written", stored: cpAt(500, map[string]int{}), topics: fakeTopics{counts: map[string]int{}}, wantErr: ErrTopicMissing},
		{name: "topic missing, kafka.missing-topic create: the first record creates it", topics: fakeTopics{counts: map[string]int{}},
			cfg: func(c *config.Config) { c.Kafka.MissingTopic = "create" }, writes: []string{"first start"}, from: 1000},
		{name: "no checkpoint, the topic holds records: refused with the position", topics: fakeTopics{counts: counts, heads: map[int]map[string]string{0: {"binlog_txn_end": "b.000001:300"}}},
			wantErr: binlog.ErrStart, errHas: "--start b.000001:300"},
		{name: "no checkpoint, records, recover: start there", cfg: func(c *config.Config) { c.Checkpoint.Recover = true },
			topics: fakeTopics{counts: counts, heads: map[int]map[string]string{0: {"binlog_txn_end": "b.000001:300"}}}, writes: []string{"first start"}, from: 300},
		{name: "stored checkpoint of another history: refused", stored: cpAt(500, counts), srv: func(s *fakeServer) { s.offset = "not at an event" }, wantErr: binlog.ErrHistory},
		{name: "checkpoint purged, on-purged fail: refused", stored: cpAt(500, counts), srv: func(s *fakeServer) { s.purged = purged }, wantErr: binlog.ErrPositionUnavailable},
		{name: "checkpoint purged, on-purged earliest: the skip stored", stored: cpAt(500, counts), cfg: func(c *config.Config) { c.Source.OnPurged = binlog.OnPurgedEarliest },
			srv: func(s *fakeServer) { s.purged, s.skipTo = purged, binlog.Position{File: "b.000002", Pos: 4} }, writes: []string{"on-purged skip"}, from: 4},
		{name: "start purged on the server, on-purged fail: refused before it is stored", cfg: func(c *config.Config) { c.Source.Start = "earliest" },
			srv: func(s *fakeServer) { s.purged = purged }, wantErr: binlog.ErrPositionUnavailable, errHas: "start "},
		{name: "archive set, the file still on the server: nothing to catch up", stored: cpAt(500, counts), cfg: func(c *config.Config) { c.Source.Archive = t.TempDir() }, from: 500},
		{name: "archive that cannot bridge the purge: on-purged decides", stored: cpAt(500, counts),
			cfg: func(c *config.Config) { c.Source.Archive = t.TempDir() + "/none/*" },
			srv: func(s *fakeServer) {
				s.files = []binlog.LogFile{{Name: "b.000002", Size: 1000}}
				s.purged = purged
			}, wantErr: binlog.ErrPositionUnavailable},
		{name: "archive without the purged file: on-purged decides", stored: cpAt(500, counts),
			cfg: func(c *config.Config) { c.Source.Archive = "../binlog/testdata/json/binlog.000005" },
			srv: func(s *fakeServer) {
				s.files = []binlog.LogFile{{Name: "b.000002", Size: 1000}}
				s.purged = purged
			}, wantErr: binlog.ErrPositionUnavailable},
		{name: "archive, the server's files older than the position: nothing to catch up", stored: cpAt(500, counts),
			cfg: func(c *config.Config) { c.Source.Archive = "../binlog/testdata/json/binlog.000005" },
			srv: func(s *fakeServer) { s.files = []binlog.LogFile{{Name: "a.000001", Size: 1000}} }, from: 500},
		{name: "first start, source.backfill without a condition: refused", cfg: func(c *config.Config) { c.Source.Backfill, c.Source.BackfillWhere = true, " " },
			wantErr: ErrBackfill, errHas: "backfill-where"},
		{name: "first start, source.backfill with source.tables: refused", cfg: func(c *config.Config) {
			c.Source.Backfill, c.Source.Tables = true, []binlog.TableConfig{{Schema: "im", Table: "outbox"}}
		}, wantErr: ErrBackfill, errHas: "source.tables"},
		{name: "restart: the acknowledged position, nothing written", known: true, from: 900},
		{name: "source.backfill with a checkpoint: ignored, resume", stored: cpAt(500, counts), cfg: func(c *config.Config) { c.Source.Backfill = true }, from: 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			tp := c.topics
			if tp.counts == nil {
				tp.counts = counts
			}
			st := &fakeStore{persistent: true, policy: "noeviction"}
			st.cp = c.stored
			p := testPublisher(cfg, st, c.mirror, tp)
			core, logs := observer.New(zap.DebugLevel)
			p.log = zap.New(core)
			p.opts.AcceptPartitionChange = c.accept
			srv := newFakeServer()
			if c.srv != nil {
				c.srv(srv)
			}
			n := 0
			if c.known {
				n = 1
				p.known, p.resume, p.parts = true, at(900), counts
				p.resumeOf = checkpoint.Source{ServerID: 1, Flavor: "mariadb"}
			}
			s := &startState{n: n, srv: srv, ident: checkpoint.Source{ServerID: srv.id, Flavor: srv.flavor}, from: p.resume, saved: p.resume}
			err := p.runPhases(context.Background(), p.startPhases(), s)
			var whys []string
			for _, e := range logs.FilterMessage("checkpoint written").All() {
				whys = append(whys, e.ContextMap()["why"].(string))
			}
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) || !strings.Contains(fmt.Sprint(err), c.errHas) {
					t.Fatalf("error %v, want %v naming %q", err, c.wantErr, c.errHas)
				}
				if !slices.Equal(whys, c.writes) || len(st.writes) != len(c.writes) {
					t.Fatalf("writes %v (%d stored) before the refusal, want %v", whys, len(st.writes), c.writes)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(whys, c.writes) || len(st.writes) != len(c.writes) {
				t.Fatalf("writes %v (%d stored), want %v", whys, len(st.writes), c.writes)
			}
			if s.from.Pos != c.from || s.saved.Pos != c.from && !c.known {
				t.Fatalf("from %s saved %s, want pos %d", s.from, s.saved, c.from)
			}
			if !p.known || p.resume != s.from && !c.known {
				t.Fatalf("p.resume %s known %v after the start", p.resume, p.known)
			}
			if n == 0 && srv.checks != 1 {
				t.Fatalf("preflight checked the server %d times", srv.checks)
			}
		})
	}
}
