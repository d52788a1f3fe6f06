package checkpoint

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An intent carries its own server (an accepted partition change keeps
// the checkpoint's) and partition counts (kept for the later writes); a
// Delete removes the key and tombstones the mirror copy.
func TestApply(t *testing.T) {
	b, m := newFake(), &fakeMirror{}
	w := NewWriter(b, Source{ServerID: 1, Flavor: "mariadb"}, map[string]int{"t": 1})
	w.SetMirror(m, time.Hour, nil)
	ctx := context.Background()
	other := &Source{ServerID: 9, ServerUUID: "u9", Flavor: "mariadb"}
	if _, err := Apply(ctx, w, Intent{Why: "partition change", At: pos("f.000001", 10), Source: other, Partitions: map[string]int{"t": 3}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.last(); got.ServerID != 9 || got.ServerUUID != "u9" || got.Partitions["t"] != 3 {
		t.Fatalf("stored %+v, want server 9 and 3 partitions", got)
	}
	if _, err := Apply(ctx, w, Intent{Why: "first start", At: pos("f.000001", 20)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.last(); got.ServerID != 1 || got.Partitions["t"] != 3 {
		t.Fatalf("stored %+v, want the writer's server and the intent's partitions kept", got)
	}
	if _, ok, _ := m.Load(ctx, "k"); !ok {
		t.Fatal("the write was not copied to the mirror")
	}
	a, err := Apply(ctx, w, Intent{Why: "checkpoint reset", Delete: true})
	if err != nil || !a.Existed || a.String() != "checkpoint reset: delete" {
		t.Fatalf("delete: %+v %v", a, err)
	}
	if cp, _ := b.Load(ctx); cp != nil {
		t.Fatalf("key kept: %+v", cp)
	}
	if _, ok, _ := m.Load(ctx, "k"); ok {
		t.Fatal("the mirror copy was not tombstoned")
	}
	if a, err := Apply(ctx, w, Intent{Why: "checkpoint reset", Delete: true}); err != nil || a.Existed {
		t.Fatalf("delete again: %+v %v", a, err)
	}
	m.delFail = errors.New("kafka down")
	if _, err := Apply(ctx, w, Intent{Why: "checkpoint reset", Delete: true}); !errors.Is(err, ErrTombstone) {
		t.Fatalf("failed tombstone: %v, want ErrTombstone", err)
	}
}

// The delete script: refused while an instance holds the lease (unless
// forced), under a fence only while that fence holds it.
func TestDeleteUnderLease(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.Key = startRedis(t), "cdc-outbox:del"
	s := NewStore(cfg)
	defer s.Close()
	ctx := context.Background()
	rdb := s.Client()
	set := func() { rdb.Set(ctx, cfg.Key, `{"version":1,"file":"b.000001","pos":4}`, 0) }
	set()
	rdb.Set(ctx, LeaseKey(cfg.Key), "a 7", time.Minute)
	var he *HeldError
	if ok, err := s.Delete(ctx, WriteOptions{}); !errors.As(err, &he) || he.Holder != "a 7" || ok {
		t.Fatalf("held lease: %v %v, want HeldError naming a 7", ok, err)
	}
	var fe *FencedError
	if _, err := s.Delete(ctx, WriteOptions{Fence: &Fence{LeaseKey: LeaseKey(cfg.Key), Owner: "b", Token: 8}}); !errors.As(err, &fe) || fe.Holder != "a 7" {
		t.Fatalf("other fence: %v, want FencedError", err)
	}
	if cp, _ := s.Load(ctx); cp == nil {
		t.Fatal("a refused delete deleted")
	}
	if ok, err := s.Delete(ctx, WriteOptions{Fence: &Fence{LeaseKey: LeaseKey(cfg.Key), Owner: "a", Token: 7}}); err != nil || !ok {
		t.Fatalf("own fence: %v %v", ok, err)
	}
	set()
	if ok, err := s.Delete(ctx, WriteOptions{Force: true}); err != nil || !ok {
		t.Fatalf("force: %v %v", ok, err)
	}
	set()
	rdb.Del(ctx, LeaseKey(cfg.Key))
	if ok, err := s.Delete(ctx, WriteOptions{}); err != nil || !ok {
		t.Fatalf("free lease: %v %v", ok, err)
	}
}
