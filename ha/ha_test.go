package ha

import (
	"testing"

	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/pipeline"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// run's start options go to the source they name only; without a name
// (one source configured) to every source.
func TestPublisherOptions(t *testing.T) {
	o := pipeline.Options{ExplicitStart: true, Backfill: true, AcceptPartitionChange: true, Version: "v1",
		BackfillProgress: func(int64, int64, string) {}}
	for _, c := range []struct {
		start, name string
		want        bool
	}{{"", "default", true}, {"", "shard1", true}, {"shard2", "shard2", true}, {"shard2", "shard1", false}} {
		got := PublisherOptions(o, c.start, c.name)
		if got.ExplicitStart != c.want || got.Backfill != c.want || got.AcceptPartitionChange != c.want || (got.BackfillProgress != nil) != c.want {
			t.Errorf("PublisherOptions(start source %q, %q) = %+v, want the start options %v", c.start, c.name, got, c.want)
		}
		if got.Version != "v1" {
			t.Errorf("PublisherOptions dropped Version")
		}
	}
}

// The publisher's log entries carry the source once and the checkpoint key
// only where the publisher adds it, under the publisher's own stage names
// (not "ha.binlog"): zap repeats a field given twice, and JSON readers then
// keep one of the two at random.
func TestPublisherLogFields(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	s := newSupervisor(config.Config{}, Options{}, zap.New(core), nil, 1)
	s.publisherLog("shard1").Info("resuming from checkpoint", zap.String("key", "cdc-outbox:checkpoint:shard1"))
	s.publisherLog("shard1").Named("binlog").Info("streaming binlog")
	all := logs.All()
	if len(all) != 2 {
		t.Fatalf("got %d entries, want 2", len(all))
	}
	for i, wantName := range []string{"", "binlog"} {
		e := all[i]
		if e.LoggerName != wantName {
			t.Errorf("%q: logger name %q, want %q", e.Message, e.LoggerName, wantName)
		}
		count := map[string]int{}
		for _, f := range e.Context {
			count[f.Key]++
		}
		if count["source"] != 1 || e.ContextMap()["source"] != "shard1" {
			t.Errorf("%q: fields %v, want source=shard1 once", e.Message, e.ContextMap())
		}
		if wantKey := map[int]int{0: 1, 1: 0}[i]; count["key"] != wantKey {
			t.Errorf("%q: the key field %d times, want %d", e.Message, count["key"], wantKey)
		}
	}
}

func TestAnotherServerID(t *testing.T) {
	for _, c := range []struct {
		taken, n int
		want     bool
	}{
		{1, 16, true},   // the first id taken: try the next
		{15, 16, true},  // one id of the range left
		{16, 16, false}, // every id tried
		{1, 1, false},   // one id only (ha.server-ids 1)
		{3, 2, false},
	} {
		if got := anotherServerID(c.taken, c.n); got != c.want {
			t.Errorf("anotherServerID(%d, %d) = %v, want %v", c.taken, c.n, got, c.want)
		}
	}
}
