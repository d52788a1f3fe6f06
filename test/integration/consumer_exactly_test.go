//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/consumer"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
)

// The consumer package under read_committed, the publisher in exactly-once
// mode (kafka.delivery: exactly-once), and aborted transactions on the
// topic: the publisher SIGKILLed twice while rows arrive (the next one's
// InitProducerId aborts the transaction it left open, KIP-98), and a
// transactional producer's transactions aborted for good in every partition
// (records in the im layout whose event ids the publisher never uses). With
// no dedupe Store, the handler gets every event exactly once, in seq_no
// order per conversation, never a record of an aborted transaction, and
// needs no dedupe at all (cdc_consumer_records_total{result="duplicate"}
// stays 0: the publisher's exactly-once holds end to end); no transaction
// marker reaches OnInvalid. kafka-go's own Reader, which the consumer used
// before, handed aborted records to the handler and markers to OnInvalid
// (segmentio/kafka-go#1332).
func TestConsumerExactlyOnceAborts(t *testing.T) {
	e := newEnv(t)
	e.noHA = true // the killed publisher is fenced by Kafka alone
	e.kafkaExtra = "  delivery: exactly-once\n"
	e.batchSize = 50 // many transactions
	plan := workload.Generate(uint64(time.Now().UnixNano()), 0, 60, 6000, 1, 20, 200)

	kcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("it-"+e.name), kgo.DefaultProduceTopic(e.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	// txn writes one im-layout record per partition (conversation 0,
	// event ids prefix-PARTITION) in a transaction committed or aborted.
	txn := func(prefix string, commit bool) {
		t.Helper()
		ctx := context.Background()
		if err := kcl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range partitions {
			r := &kgo.Record{Partition: int32(p), Key: []byte("0"), Value: []byte(`{}`), Headers: []kgo.RecordHeader{
				{Key: consumer.HeaderEventID, Value: fmt.Appendf(nil, "%s-%d", prefix, p)},
				{Key: consumer.HeaderEventType, Value: []byte("message.created")},
				{Key: consumer.HeaderSeqNo, Value: []byte("1")}}}
			if err := kcl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := kcl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}

	log := &handledLog{byEvent: map[string]int{}, order: map[int64][]int64{}}
	var invalid, gaps atomic.Int32
	reg := prometheus.NewRegistry()
	c, err := consumer.New(consumer.Config{Brokers: brokers, Topics: []string{e.topic}, Group: "it-" + e.name,
		Isolation: consumer.ReadCommitted, CommitInterval: 200 * time.Millisecond, MaxWait: 100 * time.Millisecond},
		log, consumer.Options{Metrics: consumer.NewMetrics(reg),
			OnInvalid: func(_ context.Context, m kafka.Message, err error) error {
				if invalid.Add(1) <= 5 {
					t.Errorf("OnInvalid got %s/%d@%d (key %x): %v", m.Topic, m.Partition, m.Offset, m.Key, err)
				}
				return nil
			},
			OnGap: func(_ context.Context, g consumer.Gap) error { gaps.Add(1); t.Errorf("gap: %s", g); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var g errgroup.Group
	g.Go(func() error { return c.Run(ctx) })
	waitFor := func(what string, timeout time.Duration, ok func() bool) {
		t.Helper()
		log.waitFor(t, what, plan.Total, timeout, ok)
	}

	txn("aborted-a", false)
	a := e.start()
	pr := e.produceBackground(plan, 1000)
	// killInTxn kills p once a third (then two thirds) of the rows are
	// written and one of its transactions is open (the next start aborts
	// it), or at once when every row is written and none will open again
	// (a loaded machine's publisher can fall that far behind; the topic's
	// aborted records then come from txn alone, which the last check
	// still requires). The consumer, whose group join alone can take
	// seconds, is not waited for: the kills land while rows arrive.
	killInTxn := func(p *publisher, written int64) {
		t.Helper()
		waitFor(fmt.Sprintf("%d rows written", written), time.Minute, func() bool { return pr.committed.Load() >= written })
		waitFor("a transaction open or every row written", 30*time.Second, func() bool {
			return e.transactionOpen() || pr.committed.Load() >= int64(plan.Total)
		})
		if !e.transactionOpen() {
			t.Logf("every row written before a transaction was open: killed outside one")
		}
		p.kill(t)
	}
	killInTxn(a, int64(plan.Total/3))
	txn("aborted-b", false)
	b := e.start()
	killInTxn(b, int64(2*plan.Total/3))
	last := e.start()
	pr.wait(t)
	waitFor("every event", 2*time.Minute, func() bool { return log.distinct() >= plan.Total })
	// A committed record after everything in every partition: once all are
	// handled, every record before them was read.
	txn("end", true)
	waitFor("the end records", time.Minute, func() bool { return log.distinct() >= plan.Total+partitions })
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatalf("consumer Run: %v", err)
	}
	last.stop(t, 30*time.Second)

	log.mu.Lock()
	defer log.mu.Unlock()
	for id, n := range log.byEvent {
		switch {
		case strings.HasPrefix(id, "aborted-"):
			t.Errorf("event %s of an aborted transaction handled %d times", id, n)
		case n != 1:
			t.Errorf("event %s handled %d times", id, n)
		}
	}
	if len(log.byEvent) != plan.Total+partitions {
		t.Errorf("%d distinct events handled, want %d", len(log.byEvent), plan.Total+partitions)
	}
	log.requireInOrder(t, plan.Last)
	if log.late != 0 {
		t.Errorf("%d late records", log.late)
	}
	dups := testutil.ToFloat64(metricVec(t, reg, "cdc_consumer_records_total", "duplicate"))
	inv := testutil.ToFloat64(metricVec(t, reg, "cdc_consumer_records_total", "invalid"))
	if dups != 0 || inv != 0 || invalid.Load() != 0 {
		t.Errorf("%v duplicates skipped, %v invalid records (%d to OnInvalid): want none", dups, inv, invalid.Load())
	}
	aborted := e.abortedRecords(t, plan.Total+partitions)
	t.Logf("handled %d events once each, no dedupe needed; the topic holds %d records of aborted transactions (%d the publisher's)",
		len(log.byEvent), aborted, aborted-2*partitions)
	if aborted < 2*partitions {
		t.Errorf("only %d aborted records on the topic: the test did not abort its transactions", aborted)
	}
}

// transactionOpen reports whether a partition of e's topic has a
// transaction open: its last stable offset below its high watermark.
func (e *env) transactionOpen() bool {
	for p := range partitions {
		committed := sink.NewPartitionReader(sink.Config{Brokers: brokers}, e.topic, p, true)
		uncommitted := sink.NewPartitionReader(sink.Config{Brokers: brokers}, e.topic, p, false)
		_, lso, err1 := committed.Offsets(context.Background())
		_, hw, err2 := uncommitted.Offsets(context.Background())
		committed.Close()
		uncommitted.Close()
		if err1 == nil && err2 == nil && lso < hw {
			return true
		}
	}
	return false
}

// abortedRecords counts the data records of e's topic that a
// read_uncommitted consumer gets beyond the committed ones (committed):
// the records of aborted transactions (franz-go, which, like any client,
// never returns control records).
func (e *env) abortedRecords(t *testing.T, committed int) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(e.topic), kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n, idle := 0, 0
	for idle < 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		got := cl.PollFetches(ctx).NumRecords()
		cancel()
		if n += got; got == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	return n - committed
}
