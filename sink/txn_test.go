package sink

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// eosProducer returns an exactly-once Producer on cl under transactional id id.
func eosProducer(t *testing.T, cl *kfake.Cluster, id string) *Producer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Brokers = cl.ListenAddrs()
	cfg.Delivery, cfg.TransactionalID = DeliveryExactlyOnce, id
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg = cfg.Transactional("k")
	p := NewProducer(cfg, &kafka.Hash{}, zap.NewNop())
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// committedKeys reads every record of topic "t" as a read_committed
// consumer (franz-go: aborted transactions filtered), by partition.
func committedKeys(t *testing.T, brokers []string, level kgo.IsolationLevel) map[int32][]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("t"), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out := map[int32][]string{}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out
		}
		fs.EachRecord(func(r *kgo.Record) { out[r.Partition] = append(out[r.Partition], string(r.Key)) })
	}
}

func wantKeys(rounds ...[]kafka.Message) map[int32][]string {
	want := map[int32][]string{}
	for _, msgs := range rounds {
		for _, m := range msgs {
			p := int32((&kafka.Hash{}).Balance(m, 0, 1, 2))
			want[p] = append(want[p], string(m.Key))
		}
	}
	return want
}

func sameKeys(t *testing.T, what string, got, want map[int32][]string) {
	t.Helper()
	for p := range int32(3) {
		if !slicesEqual(got[p], want[p]) {
			t.Errorf("%s: partition %d: %d records %v…, want %d %v…", what, p, len(got[p]), head(got[p]), len(want[p]), head(want[p]))
		}
	}
}

// Each round is one committed transaction: a read_committed consumer sees
// every record once, in order, and the newest committed record's headers
// are read back past the commit markers.
func TestKfakeTxnCommit(t *testing.T) {
	cl, _ := kfakeFault(t, 0, 0, 0)
	p := eosProducer(t, cl, "cdc-outbox-k")
	if p.MaxInFlight() != 1 {
		t.Fatalf("MaxInFlight = %d, want 1 in exactly-once mode", p.MaxInFlight())
	}
	ctx := context.Background()
	var rounds [][]kafka.Message
	for i := range 4 {
		m := roundFrom(i*30, 30)
		for j := range m {
			m[j].Headers = []kafka.Header{{Key: HeaderTxnEnd, Value: []byte("b.000001:" + string(m[j].Key))}}
		}
		if err := p.WriteMessages(ctx, m...); err != nil {
			t.Fatal(err)
		}
		rounds = append(rounds, m)
	}
	sameKeys(t, "read_committed", committedKeys(t, cl.ListenAddrs(), kgo.ReadCommitted()), wantKeys(rounds...))
	cfg := p.cfg
	heads, err := CommittedHeads(ctx, cfg, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := wantKeys(rounds...)
	for part := range int32(3) {
		keys := want[part]
		if got := heads[int(part)][HeaderTxnEnd]; got != "b.000001:"+keys[len(keys)-1] {
			t.Errorf("partition %d: newest committed binlog_txn_end %q, want b.000001:%s", part, got, keys[len(keys)-1])
		}
	}
}

// A newer producer of the same transactional id fences the older one: its
// next round fails with the named, fatal error and writes nothing visible.
func TestKfakeTxnProducerFenced(t *testing.T) {
	cl, _ := kfakeFault(t, 0, 0, 0)
	ctx := context.Background()
	a := eosProducer(t, cl, "cdc-outbox-k")
	first := roundFrom(0, 30)
	if err := a.WriteMessages(ctx, first...); err != nil {
		t.Fatal(err)
	}
	b := eosProducer(t, cl, "cdc-outbox-k")
	second := roundFrom(30, 30)
	if err := b.WriteMessages(ctx, second...); err != nil {
		t.Fatal(err)
	}
	err := a.WriteMessages(ctx, roundFrom(1000, 30)...)
	var fe *FencedError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFenced) || !IsFatal(err) || fe.TransactionalID != "cdc-outbox-k" {
		t.Fatalf("the fenced producer's round: %v, want a fatal *FencedError", err)
	}
	t.Log(err)
	sameKeys(t, "read_committed", committedKeys(t, cl.ListenAddrs(), kgo.ReadCommitted()), wantKeys(first, second))
}

// A refused commit or a batch refused inside a transaction aborts it;
// the round is produced again in a new transaction: a read_committed
// consumer sees each record once (and, for the refused commit, a
// read_uncommitted one sees the aborted copies too).
func TestKfakeTxnAborted(t *testing.T) {
	t.Run("commit refused", func(t *testing.T) {
		cl, _ := kfakeFault(t, 0, 0, 0)
		var armed atomic.Bool
		var refused atomic.Int32
		cl.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
			cl.KeepControl()
			r := req.(*kmsg.EndTxnRequest)
			if !armed.Load() || !r.Commit || refused.Load() > 0 {
				return nil, nil, false
			}
			refused.Add(1)
			resp := r.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = 48 // INVALID_TXN_STATE: abortable
			return resp, nil, true
		})
		p := eosProducer(t, cl, "cdc-outbox-k")
		ctx := context.Background()
		r1, r2 := roundFrom(0, 30), roundFrom(30, 30)
		if err := p.WriteMessages(ctx, r1...); err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		if err := p.WriteMessages(ctx, r2...); err != nil {
			t.Fatal(err)
		}
		if refused.Load() != 1 {
			t.Fatal("no commit refused")
		}
		sameKeys(t, "read_committed", committedKeys(t, cl.ListenAddrs(), kgo.ReadCommitted()), wantKeys(r1, r2))
		all := committedKeys(t, cl.ListenAddrs(), kgo.ReadUncommitted())
		if n := len(all[0]) + len(all[1]) + len(all[2]); n != 90 {
			t.Fatalf("read_uncommitted: %d records, want 90 (round 2 twice: once aborted)", n)
		}
	})
	t.Run("produce refused", func(t *testing.T) {
		// UNKNOWN_PRODUCER_ID (no epoch bump inside a transaction) twice.
		cl, failed := kfakeFault(t, 1, 59, 2)
		p := eosProducer(t, cl, "cdc-outbox-k")
		ctx := context.Background()
		r1, r2 := roundFrom(0, 30), roundFrom(30, 30)
		for _, r := range [][]kafka.Message{r1, r2} {
			if err := p.WriteMessages(ctx, r...); err != nil {
				t.Fatal(err)
			}
		}
		if failed.Load() != 2 {
			t.Fatalf("%d failures injected, want 2", failed.Load())
		}
		sameKeys(t, "read_committed", committedKeys(t, cl.ListenAddrs(), kgo.ReadCommitted()), wantKeys(r1, r2))
	})
}
