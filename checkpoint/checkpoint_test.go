package checkpoint

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"go.uber.org/zap"
)

// fakeBackend is an in-memory Backend that can be made to fail.
type fakeBackend struct {
	mu     sync.Mutex
	cp     *Checkpoint
	saves  []Checkpoint
	fail   error
	signal chan struct{}
}

func newFake() *fakeBackend { return &fakeBackend{signal: make(chan struct{}, 100)} }

func (f *fakeBackend) Key() string { return "k" }

func (f *fakeBackend) Load(context.Context) (*Checkpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cp, nil
}

func (f *fakeBackend) Save(_ context.Context, c Checkpoint, _ WriteOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.cp = &c
	f.saves = append(f.saves, c)
	select {
	case f.signal <- struct{}{}:
	default:
	}
	return nil
}

func (f *fakeBackend) Delete(context.Context, WriteOptions) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	existed := f.cp != nil
	f.cp = nil
	return existed, f.fail
}

// put is Apply of a plain write (the start-up phases' intents).
func (w *Writer) put(ctx context.Context, p binlog.Position) error {
	_, err := Apply(ctx, w, Intent{Why: "test", At: p})
	return err
}

func (f *fakeBackend) last() (Checkpoint, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cp == nil {
		return Checkpoint{}, 0
	}
	return *f.cp, len(f.saves)
}

func pos(f string, p uint32) binlog.Position { return binlog.Position{File: f, Pos: p} }

func TestWriterBuildsTheValue(t *testing.T) {
	b := newFake()
	w := NewWriter(b, Source{ServerID: 7, ServerUUID: "u", Flavor: "mysql"}, map[string]int{"a": 3})
	at := time.Unix(1700000000, 0).UTC()
	if err := w.put(context.Background(), binlog.Position{File: "f.000002", Pos: 99, GTIDSet: "u:1-5", GTID: "u:5", Time: at}); err != nil {
		t.Fatal(err)
	}
	got, _ := b.last()
	if got.File != "f.000002" || got.Pos != 99 || got.GTIDSet != "u:1-5" || got.GTID != "u:5" || !got.EventTime.Equal(at) ||
		got.ServerID != 7 || got.ServerUUID != "u" || got.Flavor != "mysql" || got.Partitions["a"] != 3 {
		t.Fatalf("value %+v", got)
	}
	if !got.FileOpened.IsZero() {
		t.Fatalf("file_opened %v for a position without it", got.FileOpened)
	}
	w.AddPartitions(map[string]int{"b": 6})
	w.SetPartitions(nil)
	_ = w.put(context.Background(), pos("f.000002", 120))
	if got, _ := b.last(); got.Partitions != nil {
		t.Fatalf("partitions after SetPartitions(nil): %v", got.Partitions)
	}
	w.AddPartitions(map[string]int{"b": 6})
	_ = w.put(context.Background(), pos("f.000002", 130))
	if got, _ := b.last(); got.Partitions["b"] != 6 || len(w.Partitions()) != 1 || w.Key() != "k" {
		t.Fatalf("partitions %v", got.Partitions)
	}
}

// The file's creation time travels with the position into the stored
// value and back (Checkpoint.Position), and a value written before the
// field existed still parses, without it (the history check then has no
// creation time to compare).
func TestFileOpenedStoredAndOptional(t *testing.T) {
	b := newFake()
	w := NewWriter(b, Source{ServerID: 1, Flavor: "mariadb"}, nil)
	opened := time.Unix(1700000000, 0).UTC()
	if err := w.put(context.Background(), binlog.Position{File: "f.000008", Pos: 405, GTIDSet: "0-1-1522", Opened: opened}); err != nil {
		t.Fatal(err)
	}
	got, _ := b.last()
	enc, err := Encode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(enc), `"file_opened":"2023-11-14T22:13:20Z"`) {
		t.Fatalf("encoded value lacks file_opened: %s", enc)
	}
	back, err := Parse("k", enc)
	if err != nil || !back.Position().Opened.Equal(opened) || back.Version != Version {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	old := `{"version":1,"file":"mariadb-bin.000008","pos":405,"gtid_set":"0-1-1522","server_id":1,"flavor":"mariadb","event_time":"2026-12-01T10:00:00Z","updated_at":"2026-12-01T10:00:01Z"}`
	cp, err := Parse("k", []byte(old))
	if err != nil || !cp.FileOpened.IsZero() || !cp.Position().Opened.IsZero() || cp.Position().FilePos() != "mariadb-bin.000008:405" {
		t.Fatalf("old value: %+v, %v", cp, err)
	}
	if enc, _ := Encode(*cp); strings.Contains(string(enc), "file_opened") {
		t.Fatalf("a value without a creation time writes one: %s", enc)
	}
}

// The committer writes only positions it was given, the newest one,
// periodically and once more at the end; partition counts travel with the
// acknowledgements.
func TestCommitterWritesNewestAcked(t *testing.T) {
	b := newFake()
	c := NewCommitter(NewWriter(b, Source{ServerID: 1, Flavor: "mariadb"}, map[string]int{"t": 2}), 20*time.Millisecond, time.Second, pos("f.000001", 4), zap.NewNop())
	acks := make(chan Ack)
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), acks) }()
	acks <- Ack{End: pos("f.000001", 100)}
	acks <- Ack{End: pos("f.000001", 200), Partitions: map[string]int{"t": 2, "u": 5}}
	for {
		<-b.signal
		if got, _ := b.last(); got.Pos == 200 {
			if got.Partitions["u"] != 5 || got.Partitions["t"] != 2 {
				t.Fatalf("partitions %v", got.Partitions)
			}
			break
		}
	}
	_, n := b.last()
	// Nothing new: no write at the following ticks.
	acks <- Ack{End: pos("f.000001", 200)}
	time.Sleep(60 * time.Millisecond) // several intervals; a write would show below
	if _, m := b.last(); m != n {
		t.Fatalf("rewrote an unchanged position: %d writes, then %d", n, m)
	}
	acks <- Ack{End: pos("f.000002", 4)}
	close(acks)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := b.last(); got.File != "f.000002" || got.Pos != 4 || c.Saved() != c.Acked() {
		t.Fatalf("final %+v, acked %v saved %v", got, c.Acked(), c.Saved())
	}
}

// Cancelled, the committer takes what was already reported and writes it.
func TestCommitterFinalOnCancel(t *testing.T) {
	b := newFake()
	c := NewCommitter(NewWriter(b, Source{}, nil), time.Hour, time.Second, binlog.Position{}, zap.NewNop())
	acks := make(chan Ack, 2)
	acks <- Ack{End: pos("f.000001", 10)}
	acks <- Ack{End: pos("f.000001", 20)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Run(ctx, acks); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.last(); got.Pos != 20 {
		t.Fatalf("final write %+v, want pos 20", got)
	}
}

// A failed periodic write goes on publishing; a failed final write is the
// Run's error (the process must not exit 0 with the position unsaved).
func TestCommitterFailures(t *testing.T) {
	b := newFake()
	b.fail = errors.New("redis down")
	c := NewCommitter(NewWriter(b, Source{}, nil), 5*time.Millisecond, 50*time.Millisecond, binlog.Position{}, zap.NewNop())
	acks := make(chan Ack)
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), acks) }()
	acks <- Ack{End: pos("f.000001", 10)}
	time.Sleep(30 * time.Millisecond)     // failing ticks
	acks <- Ack{End: pos("f.000001", 20)} // still consuming
	close(acks)
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "redis down") {
		t.Fatalf("Run = %v, want the final write's error", err)
	}
	if !c.Saved().IsZero() || c.Acked().Pos != 20 {
		t.Fatalf("saved %v acked %v", c.Saved(), c.Acked())
	}
	// Nothing acknowledged: nothing to write, no error.
	c = NewCommitter(NewWriter(b, Source{}, nil), time.Hour, time.Second, binlog.Position{}, zap.NewNop())
	empty := make(chan Ack)
	close(empty)
	if err := c.Run(context.Background(), empty); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c = Config{Addr: "nope", DB: -1, Interval: time.Millisecond}
	err := c.Validate()
	for _, want := range []string{"checkpoint.addr", "checkpoint.key", "checkpoint.db", "checkpoint.interval", "checkpoint.timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %s named", err, want)
		}
	}
	cp := Checkpoint{File: "f", Pos: 9, GTIDSet: "s", GTID: "g"}
	if p := cp.Position(); p.File != "f" || p.Pos != 9 || p.GTIDSet != "s" || p.GTID != "g" {
		t.Fatalf("Position %+v", p)
	}
}

// startRedis runs a private redis-server (from the dev stack's packages)
// on a free loopback port for the test; skipped when none is installed.
func startRedis(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed (scripts/dev-stack.sh up installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.Args = append(cmd.Args, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if i > 200 {
			t.Fatalf("redis-server did not listen on %s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStoreOnRedis(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.Key = startRedis(t), "cdc-outbox:test"
	s := NewStore(cfg)
	defer s.Close()
	ctx := context.Background()
	if cp, err := s.Load(ctx); err != nil || cp != nil {
		t.Fatalf("empty: %v %v", cp, err)
	}
	w := NewWriter(s, Source{ServerID: 3, Flavor: "mariadb"}, map[string]int{"t": 4})
	if err := w.put(ctx, binlog.Position{File: "b.000001", Pos: 400, GTIDSet: "0-3-9"}); err != nil {
		t.Fatal(err)
	}
	cp, err := s.Load(ctx)
	if err != nil || cp.File != "b.000001" || cp.Pos != 400 || cp.Version != Version || cp.Partitions["t"] != 4 || cp.ServerID != 3 {
		t.Fatalf("Load = %+v, %v", cp, err)
	}
	if aof, rdb, err := s.Persistence(ctx); err != nil || aof || rdb {
		t.Fatalf("Persistence = %v %v %v, want none", aof, rdb, err)
	}
	if ok, err := s.Persistent(ctx); err != nil || ok {
		t.Fatalf("Persistent = %v %v", ok, err)
	}
	if err := s.rdb.Set(ctx, s.Key(), `{"version":1}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("empty value: %v, want ErrCorrupt", err)
	}
	if err := s.rdb.Set(ctx, s.Key(), `not json`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("not json: %v, want ErrCorrupt", err)
	}
	if ok, err := s.Delete(ctx, WriteOptions{}); err != nil || !ok {
		t.Fatalf("Delete = %v %v", ok, err)
	}
	if ok, err := s.Delete(ctx, WriteOptions{}); err != nil || ok {
		t.Fatalf("Delete again = %v %v", ok, err)
	}
	s.Close()
	if err := s.Save(ctx, Checkpoint{File: "x", Pos: 4}, WriteOptions{}); err == nil || !strings.Contains(err.Error(), cfg.Key) {
		t.Fatalf("Save on a closed client = %v, want an error naming the key", err)
	}
	if _, err := s.Load(ctx); err == nil {
		t.Fatal("Load on a closed client succeeded")
	}
	if _, err := s.Delete(ctx, WriteOptions{}); err == nil {
		t.Fatal("Delete on a closed client succeeded")
	}
	if _, _, err := s.Persistence(ctx); err == nil {
		t.Fatal("Persistence on a closed client succeeded")
	}
}
