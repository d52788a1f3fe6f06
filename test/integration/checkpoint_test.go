//go:build integration

package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

func store(t *testing.T, key string) *checkpoint.Store {
	cfg := checkpoint.DefaultConfig()
	cfg.Addr, cfg.Key = redisAddr, key
	s := checkpoint.NewStore(cfg)
	t.Cleanup(func() { s.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	rdb.Del(context.Background(), key)
	return s
}

func TestCheckpointStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := store(t, "cdc-outbox:it:store:"+runID)
	if cp, err := s.Load(ctx); err != nil || cp != nil {
		t.Fatalf("missing key: got %+v, %v", cp, err)
	}
	want := checkpoint.Checkpoint{File: "mariadb-bin.000007", Pos: 1234, GTIDSet: "0-1-99,1-2-5", GTID: "0-1-99",
		ServerID: 1, Flavor: "mariadb", EventTime: time.Unix(1700000000, 0).UTC()}
	if err := s.Save(ctx, want, checkpoint.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.File != want.File || got.Pos != want.Pos || got.GTIDSet != want.GTIDSet || got.GTID != want.GTID ||
		got.ServerID != 1 || got.Flavor != "mariadb" || !got.EventTime.Equal(want.EventTime) ||
		got.Version != checkpoint.Version || time.Since(got.UpdatedAt) > time.Minute {
		t.Fatalf("round trip: got %+v", got)
	}
	if ok, err := s.Persistent(ctx); err != nil || !ok {
		t.Fatalf("the dev stack's Redis must persist: %v %v", ok, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	rdb.Set(ctx, s.Key(), "not json", 0)
	if _, err := s.Load(ctx); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("corrupt value: want ErrCorrupt, got %v", err)
	}
}

// The committer writes only positions it was given as acknowledged, the
// newest one, periodically and once more when the acks channel closes.
func TestCommitterWritesAcknowledgedPositions(t *testing.T) {
	ctx := context.Background()
	s := store(t, "cdc-outbox:it:committer:"+runID)
	c := checkpoint.NewCommitter(checkpoint.NewWriter(s, checkpoint.Source{ServerID: 1, Flavor: "mariadb"}, nil), 50*time.Millisecond, 2*time.Second, binlog.Position{}, zap.NewNop())
	acks := make(chan checkpoint.Ack)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, acks) }()

	acks <- checkpoint.Ack{End: binlog.Position{File: "f.000001", Pos: 100}}
	acks <- checkpoint.Ack{End: binlog.Position{File: "f.000001", Pos: 200}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		cp, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cp != nil && cp.Pos == 200 {
			break
		}
		if cp != nil && cp.Pos != 100 {
			t.Fatalf("unexpected checkpoint %+v", cp)
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint never reached pos 200: %+v", cp)
		}
		time.Sleep(10 * time.Millisecond)
	}
	acks <- checkpoint.Ack{End: binlog.Position{File: "f.000002", Pos: 4}}
	close(acks)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cp, err := s.Load(ctx)
	if err != nil || cp.File != "f.000002" || cp.Pos != 4 {
		t.Fatalf("final checkpoint: %+v %v", cp, err)
	}
	if c.Acked() != c.Saved() {
		t.Fatalf("acked %v saved %v", c.Acked(), c.Saved())
	}
}
