package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"go.uber.org/zap"
)

// fakeServer is a source server with one binlog file, b.000001 of size
// 1000; purged, when set, is what CheckResume reports.
type fakeServer struct {
	flavor  string
	id      uint32
	files   []binlog.LogFile
	purged  *binlog.Purged
	skipTo  binlog.Position
	offset  string // HistoryFacts.Offset: the stored offset refused
	checks  int    // Check calls
	checkFn func() error
}

func newFakeServer() *fakeServer {
	return &fakeServer{flavor: "mariadb", id: 1, files: []binlog.LogFile{{Name: "b.000001", Size: 1000}}}
}

func (s *fakeServer) ServerID() uint32   { return s.id }
func (s *fakeServer) ServerUUID() string { return "" }
func (s *fakeServer) Flavor() string     { return s.flavor }
func (s *fakeServer) Check(context.Context) error {
	s.checks++
	if s.checkFn != nil {
		return s.checkFn()
	}
	return nil
}
func (s *fakeServer) Resolve(st binlog.Start) (binlog.Position, error) {
	switch st.Kind {
	case binlog.StartFilePos:
		return binlog.Position{File: st.File, Pos: st.Pos}, nil
	case binlog.StartEarliest:
		return binlog.Position{File: s.files[0].Name, Pos: 4}, nil
	}
	last := s.files[len(s.files)-1]
	return binlog.Position{File: last.Name, Pos: uint32(last.Size)}, nil
}
func (s *fakeServer) CheckPosition(binlog.Position) error { return nil }
func (s *fakeServer) CheckResume(p binlog.Position) (*binlog.Purged, error) {
	if s.purged != nil {
		pg := *s.purged
		pg.Stored = p
		return &pg, nil
	}
	return nil, nil
}
func (s *fakeServer) Skip(*binlog.Purged, string) (binlog.Position, error) { return s.skipTo, nil }
func (s *fakeServer) CompleteGTIDSet(p binlog.Position) (binlog.Position, error) {
	return p, nil
}
func (s *fakeServer) GTIDSetAt(binlog.Position) (string, error) { return "0-1-5", nil }
func (s *fakeServer) HistoryFacts(p binlog.Position, mode string) (binlog.HistoryFacts, error) {
	return binlog.HistoryFacts{Flavor: s.flavor, Mode: mode, Stored: p, Newest: s.files[len(s.files)-1].Name, Listed: true, Offset: s.offset}, nil
}
func (s *fakeServer) BinaryLogs() ([]string, error) {
	var out []string
	for _, f := range s.files {
		out = append(out, f.Name)
	}
	return out, nil
}
func (s *fakeServer) BinaryLogSizes() ([]binlog.LogFile, error) { return s.files, nil }
func (s *fakeServer) Retention() (binlog.Retention, error) {
	return binlog.Retention{ExpireSeconds: 3600}, nil
}
func (s *fakeServer) CheckTables(*binlog.TableSet) ([]*binlog.Table, error) { return nil, nil }
func (s *fakeServer) Columns() ([]string, error)                            { return []string{"id"}, nil }
func (s *fakeServer) Close() error                                          { return nil }

// fakeStore is memBackend with the preflight's answers and the stop
// record.
type fakeStore struct {
	memBackend
	persistent bool
	policy     string
	authErr    error
	stop       *checkpoint.Stop
}

func (s *fakeStore) SaveStop(_ context.Context, st checkpoint.Stop) error { s.stop = &st; return nil }
func (s *fakeStore) ClearStop(context.Context) error                      { s.stop = nil; return nil }

func (s *fakeStore) Persistent(context.Context) (bool, error) { return s.persistent, s.authErr }
func (s *fakeStore) MaxMemoryPolicy(context.Context) (string, int64, error) {
	return s.policy, 1 << 20, nil
}
func (s *fakeStore) TTL(context.Context) (time.Duration, error) { return -1, nil }
func (s *fakeStore) Close() error                               { return nil }

// fakeMirror is an in-memory checkpoint.mirror-topic.
type fakeMirror struct {
	vals    map[string][]byte
	created bool
	err     error
	saveErr error
}

func (m *fakeMirror) Save(_ context.Context, key string, v []byte) error {
	if m.saveErr != nil {
		return m.saveErr
	}
	if m.vals == nil {
		m.vals = map[string][]byte{}
	}
	m.vals[key] = v
	return nil
}
func (m *fakeMirror) Load(_ context.Context, key string) ([]byte, bool, error) {
	v, ok := m.vals[key]
	return v, ok, m.err
}
func (m *fakeMirror) Delete(_ context.Context, key string) error { delete(m.vals, key); return nil }
func (m *fakeMirror) Ensure(context.Context) (bool, error)       { return !m.created, nil }
func (m *fakeMirror) Topic() string                              { return "mirror" }
func (m *fakeMirror) Close() error                               { return nil }

// fakeTopics answers the partition counts and the newest headers.
type fakeTopics struct {
	counts map[string]int
	heads  map[int]map[string]string
}

func (t fakeTopics) PartitionCounts(_ context.Context, names []string) (map[string]int, error) {
	out := map[string]int{}
	for _, n := range names {
		if c, ok := t.counts[n]; ok {
			out[n] = c
		}
	}
	return out, nil
}
func (t fakeTopics) NewestHeaders(context.Context, string) (map[int]map[string]string, error) {
	return t.heads, nil
}

var errFake = errors.New("fake failure")

// testConfig is the default configuration for the single im table,
// publishing to topic t.
func testConfig() config.Config {
	cfg := config.Default()
	cfg.Source.Schema, cfg.Source.Table = "im", "outbox"
	cfg.Router.Topic = "t"
	cfg.Checkpoint.Key = "k"
	return cfg
}

// testPublisher is a Publisher on fakes.
func testPublisher(cfg config.Config, st *fakeStore, m *fakeMirror, tp fakeTopics) *Publisher {
	p := &Publisher{cfg: cfg, store: st, topics: tp, obs: Observers{}.orNop(), log: zap.NewNop(),
		headroom: logging.NewLimiter(10*time.Minute, 1), mirrorWarn: logging.NewLimiter(time.Minute, 1)}
	if m != nil {
		p.mirror = m
	}
	return p
}

// cpAt is a stored checkpoint of server 1 at b.000001:pos with counts.
func cpAt(pos uint32, counts map[string]int) *checkpoint.Checkpoint {
	return &checkpoint.Checkpoint{Version: checkpoint.Version, File: "b.000001", Pos: pos, GTIDSet: "0-1-3", ServerID: 1, Flavor: "mariadb", Partitions: counts}
}
