package sink

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap"

	"github.com/cdc-outbox/cdc-outbox/router"
)

// BenchmarkWriterDrain drains a queued backlog of 20,000 events (binlog
// transactions of 4) through a Writer and its Producer on a fake
// cluster (answers at once, no network): the CPU per event of the
// Writer's rounds and the Producer's encoding. Idempotent: up to
// MaxInFlight rounds in flight (the default); else one.
func BenchmarkWriterDrain(b *testing.B) {
	const events = 20000
	sizes := make([]int, events/4)
	for i := range sizes {
		sizes[i] = 4
	}
	txns := binlogTxns(1, sizes...)
	r := router.New(router.Config{Topic: "t"}, router.Reserved{})
	for _, idempotent := range []bool{true, false} {
		b.Run(fmt.Sprintf("idempotent=%v", idempotent), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Idempotent = idempotent
			b.ReportAllocs()
			for range b.N {
				p := newProducer(cfg, router.Balancer(), zap.NewNop(), newFake(3))
				w := newWriter(cfg, r, p, zap.NewNop())
				w.prod = p
				acked := make(chan int)
				go func() {
					n := 0
					for a := range w.Acks() {
						n += a.Events
					}
					acked <- n
				}()
				if err := w.Run(context.Background(), queued(txns, true)); err != nil {
					b.Fatal(err)
				}
				if n := <-acked; n != events {
					b.Fatalf("%d events acknowledged, want %d", n, events)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		})
	}
}
