package sink

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
)

// idObserver records the event ids of every round reported acknowledged.
type idObserver struct {
	mu  sync.Mutex
	ids []string
}

func (o *idObserver) Produced(msgs []kafka.Message, _ time.Duration, err error) {
	if err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range msgs {
		for _, h := range m.Headers {
			if h.Key == router.HeaderEventID {
				o.ids = append(o.ids, string(h.Value))
			}
		}
	}
}

func (*idObserver) Acked(binlog.Position) {}
func (*idObserver) Requested(int)         {}
func (*idObserver) Transacted(bool)       {}

// A transaction without outbox rows, landed at once (nothing in flight),
// must not hand the slices still gathering the next round to a later
// round: then the round gathered after it would be overwritten by the
// next one while in flight, and cleared when it lands. Here the first
// produce request is held until a second round is in flight; every
// round's records must be reported as its own.
func TestWriterRoundSlicesAfterEmptyRound(t *testing.T) {
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	arrived, release := make(chan struct{}), make(chan struct{})
	var armed, held atomic.Bool
	cl.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		// The first produce request once armed is answered only when
		// released; the others at once.
		if armed.Load() && held.CompareAndSwap(false, true) {
			close(arrived)
			cl.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	cfg := DefaultConfig()
	cfg.Brokers = cl.ListenAddrs()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(cfg, router.New(router.Config{Topic: "t"}, router.Reserved{}), router.Balancer(), zap.NewNop())
	obs := &idObserver{}
	w.SetObserver(obs)
	in := make(chan binlog.Txn)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background(), in) }()
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	acks := make(chan struct{}, 8)
	go func() {
		for range w.Acks() {
			acks <- struct{}{}
		}
	}()
	txns := binlogTxns(1, 3, 3, 3)
	in <- txns[0] // a round: the Writer's slices have room from now on
	wait("the first round's acknowledgement", acks)
	in <- txn(txns[0].End.Pos + 50) // no outbox rows, nothing in flight: acknowledged at once
	wait("the empty transaction's acknowledgement", acks)
	armed.Store(true)
	in <- txns[1]
	wait("the held round's produce request", arrived)
	in <- txns[2] // received, hence gathered, before the held round can land (the Writer's one goroutine)
	close(release)
	close(in)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	slices.Sort(obs.ids)
	if want := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9"}; !slices.Equal(obs.ids, want) {
		t.Fatalf("rounds reported with records %v, want %v each once", obs.ids, want)
	}
}
