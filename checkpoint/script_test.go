package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"go.uber.org/zap"
)

// The save script against a real redis-server: monotonic per server
// (file sequence numbers as numbers), equal accepted, other servers and
// GTID-only values not compared, force for checkpoint set.
func TestSaveMonotonic(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.Key = startRedis(t), "cdc-outbox:mono"
	s := NewStore(cfg)
	defer s.Close()
	ctx := context.Background()
	steps := []struct {
		name   string
		src    uint32
		at     binlog.Position
		force  bool
		refuse bool
	}{
		{"first", 1, pos("b.999999", 900), false, false},
		{"numeric sequence: .1000000 follows .999999", 1, pos("b.1000000", 4), false, false},
		{"equal", 1, pos("b.1000000", 4), false, false},
		{"forward in the file", 1, pos("b.1000000", 5000), false, false},
		{"back in the file", 1, pos("b.1000000", 4999), false, true},
		{"back a file", 1, pos("b.999999", 9999), false, true},
		{"another server (GTID failover)", 2, pos("c.000001", 4), false, false},
		{"back on that server", 2, pos("c.000001", 3), false, true},
		{"GTID only: not compared", 2, binlog.Position{GTIDSet: "0-2-5"}, false, false},
		{"force (checkpoint set)", 2, pos("c.000001", 3), false, false},
		{"force backwards", 2, pos("c.000000", 3), true, false},
	}
	for _, st := range steps {
		w := NewWriter(s, Source{ServerID: st.src, Flavor: "mariadb"}, nil)
		w.SetForce(st.force)
		before, _ := s.Load(ctx)
		err := w.put(ctx, st.at)
		after, _ := s.Load(ctx)
		var be *BackwardsError
		switch {
		case st.refuse && !errors.As(err, &be):
			t.Fatalf("%s: %v, want a BackwardsError", st.name, err)
		case st.refuse:
			if !errors.Is(err, ErrBackwards) || be.Stored.FilePos() != before.Position().FilePos() || be.Refused.File != st.at.File ||
				!strings.Contains(err.Error(), before.Position().FilePos()) || !strings.Contains(err.Error(), st.at.FilePos()) {
				t.Fatalf("%s: %v (%+v), want both positions named", st.name, err, be)
			}
			if after.File != before.File || after.Pos != before.Pos {
				t.Fatalf("%s: refused write changed the value: %+v", st.name, after)
			}
		case err != nil:
			t.Fatalf("%s: %v", st.name, err)
		case after.File != st.at.File || after.Pos != st.at.Pos || after.ServerID != st.src:
			t.Fatalf("%s: stored %+v", st.name, after)
		}
	}
}

// A fenced write is accepted only while the lease key holds its holder; a
// key gone under a writer that wrote it is written again and reported.
func TestSaveFenceAndVanished(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.Key = startRedis(t), "cdc-outbox:fence"
	s := NewStore(cfg)
	defer s.Close()
	ctx := context.Background()
	rdb := s.Client()
	f := &Fence{LeaseKey: LeaseKey(cfg.Key), Owner: "a", Token: 7}
	w := NewWriter(s, Source{ServerID: 1}, nil)
	w.SetFence(f)
	var fe *FencedError
	if err := w.put(ctx, pos("b.000001", 10)); !errors.As(err, &fe) || fe.Holder != "" || fe.Token != 7 {
		t.Fatalf("no lease: %v, want FencedError", err)
	}
	if cp, _ := s.Load(ctx); cp != nil {
		t.Fatalf("fenced write stored %+v", cp)
	}
	rdb.Set(ctx, LeaseKey(cfg.Key), "a 7", time.Minute)
	if err := w.put(ctx, pos("b.000001", 10)); err != nil {
		t.Fatal(err)
	}
	if cp, _ := s.Load(ctx); cp.Token != 7 || cp.Owner != "a" {
		t.Fatalf("token not stored: %+v", cp)
	}
	// Taken over: b holds token 8; a's write is refused, naming b.
	rdb.Set(ctx, LeaseKey(cfg.Key), "b 8", time.Minute)
	if err := w.put(ctx, pos("b.000001", 20)); !errors.As(err, &fe) || fe.Holder != "b 8" || !Refused(err) ||
		!strings.Contains(err.Error(), "b 8") {
		t.Fatalf("taken over: %v", err)
	}
	if cp, _ := s.Load(ctx); cp.Pos != 10 {
		t.Fatalf("fenced write moved the checkpoint: %+v", cp)
	}
	// The key vanishes (eviction, FLUSHALL) under b, who wrote it before.
	wb := NewWriter(s, Source{ServerID: 1}, nil)
	wb.SetFence(&Fence{LeaseKey: LeaseKey(cfg.Key), Owner: "b", Token: 8})
	if err := wb.put(ctx, pos("b.000001", 30)); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, cfg.Key)
	var ve *VanishedError
	if err := wb.put(ctx, pos("b.000001", 40)); !errors.As(err, &ve) || Refused(err) || ve.At.Pos != 40 {
		t.Fatalf("vanished: %v", err)
	}
	if cp, _ := s.Load(ctx); cp == nil || cp.Pos != 40 {
		t.Fatalf("vanished key not written again: %+v", cp)
	}
	// A writer that never wrote (first start) finds no key: no error.
	rdb.Del(ctx, cfg.Key)
	fresh := NewWriter(s, Source{ServerID: 1}, nil)
	fresh.SetFence(&Fence{LeaseKey: LeaseKey(cfg.Key), Owner: "b", Token: 8})
	if err := fresh.put(ctx, pos("b.000001", 50)); err != nil {
		t.Fatal(err)
	}
	// The committer logs a vanished key and goes on; a fenced write ends it.
	rdb.Del(ctx, cfg.Key)
	c := NewCommitter(fresh, time.Hour, time.Second, pos("b.000001", 50), zap.NewNop())
	acks := make(chan Ack, 1)
	acks <- Ack{End: pos("b.000001", 60)}
	close(acks)
	if err := c.Run(ctx, acks); err != nil || c.Saved().Pos != 60 {
		t.Fatalf("committer on a vanished key: %v, saved %v", err, c.Saved())
	}
	rdb.Set(ctx, LeaseKey(cfg.Key), "c 9", time.Minute)
	c = NewCommitter(fresh, 5*time.Millisecond, time.Second, pos("b.000001", 60), zap.NewNop())
	live := make(chan Ack, 1)
	live <- Ack{End: pos("b.000001", 70)}
	if err := c.Run(ctx, live); !errors.Is(err, ErrFenced) {
		t.Fatalf("committer after a takeover: %v, want ErrFenced at the periodic write", err)
	}
}

// Wrong credentials are ErrAuth, naming the settings.
func TestStoreAuth(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.Key = startRedis(t, "--requirepass", "s3cret-"+time.Now().Format("150405.000")), "cdc-outbox:auth"
	for _, pw := range []string{"", "wrong"} {
		cfg.Password = pw
		s := NewStore(cfg)
		_, err := s.Load(context.Background())
		s.Close()
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "checkpoint.password") {
			t.Fatalf("password %q: %v, want ErrAuth naming checkpoint.password", pw, err)
		}
	}
}

func TestEvictionRisk(t *testing.T) {
	for _, c := range []struct {
		policy string
		max    int64
		ttl    time.Duration
		risk   bool
	}{
		{"noeviction", 1 << 20, -1, false},
		{"allkeys-lru", 0, -1, false}, // no maxmemory: never evicts
		{"allkeys-lru", 1 << 20, -1, true},
		{"allkeys-lfu", 1 << 20, -2, true},
		{"allkeys-random", 1 << 20, -1, true},
		{"volatile-lru", 1 << 20, -1, false},
		{"volatile-ttl", 1 << 20, -2, false}, // no key yet: written without a TTL
		{"volatile-lru", 1 << 20, time.Hour, true},
		{"volatile-random", 1 << 20, time.Minute, true},
	} {
		if got := EvictionRisk(c.policy, c.max, c.ttl); (got != "") != c.risk {
			t.Errorf("EvictionRisk(%s, %d, %s) = %q, want risk %v", c.policy, c.max, c.ttl, got, c.risk)
		}
	}
}

func TestStoreMaxMemory(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.Key = startRedis(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"), "cdc-outbox:mm"
	s := NewStore(cfg)
	defer s.Close()
	ctx := context.Background()
	p, n, err := s.MaxMemoryPolicy(ctx)
	if err != nil || p != "allkeys-lru" || n != 64<<20 {
		t.Fatalf("MaxMemoryPolicy = %q %d %v", p, n, err)
	}
	if ttl, err := s.TTL(ctx); err != nil || ttl >= 0 {
		t.Fatalf("TTL of a missing key = %v %v", ttl, err)
	}
}
