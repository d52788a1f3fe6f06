package ha

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
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

func TestTakenIDs(t *testing.T) {
	conflict := fmt.Errorf("%w: replica r uses server_id 7", binlog.ErrServerID)
	kicked := &binlog.PositionError{Err: fmt.Errorf("%w: ERROR 4052", binlog.ErrServerID)}
	privileges := errors.Join(conflict, fmt.Errorf("%w: REPLICATION CLIENT missing", binlog.ErrPrivileges))
	set := func(ids ...uint32) map[uint32]bool {
		m := map[uint32]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	for _, c := range []struct {
		name  string
		taken map[uint32]bool
		err   error
		id    uint32
		want  map[uint32]bool
	}{
		{"first conflict", nil, conflict, 7, set(7)},
		{"next id", set(7), fmt.Errorf("start: %w", errors.Join(conflict)), 8, set(7, 8)},
		{"the same id again (another instance in between)", set(7, 8), conflict, 7, set(7, 8)},
		{"kicked while streaming: a fresh walk", set(7, 8), kicked, 9, set(9)},
		{"another fatal error beside it", set(7), privileges, 8, nil},
		{"another end of the term", set(7), errors.New("broker down"), 8, nil},
		{"a clean end", set(7), nil, 8, nil},
	} {
		if got := takenIDs(c.taken, c.err, c.id); !maps.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
