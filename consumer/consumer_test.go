package consumer_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/consumer"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"golang.org/x/sync/errgroup"
)

// These tests run the Consumer against kfake, franz-go's in-process Kafka
// (consumer groups, transactions, read_committed); the real-broker tests are
// in test/integration (TestConsumerAcrossPublisherKillAndReplay).

func kgoRecord(partition int32, conv, seq int64, id uint64) *kgo.Record {
	return &kgo.Record{Partition: partition, Key: []byte(strconv.FormatInt(conv, 10)),
		Value: []byte(fmt.Sprintf(`{"seq":%d}`, seq)),
		Headers: []kgo.RecordHeader{
			{Key: consumer.HeaderEventID, Value: []byte(strconv.FormatUint(id, 10))},
			{Key: consumer.HeaderEventType, Value: []byte("message.created")},
			{Key: consumer.HeaderSeqNo, Value: []byte(strconv.FormatInt(seq, 10))},
		}}
}

// collect runs a Consumer until done(handled) holds, then stops it.
func collect(t *testing.T, cfg consumer.Config, h func(r *consumer.Record), done func() bool) {
	t.Helper()
	c, err := consumer.New(cfg, consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error { h(r); return nil }),
		consumer.Options{OnGap: func(_ context.Context, g consumer.Gap) error { t.Errorf("unexpected %s", g); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c, done)
}

// run runs c until done holds (at most 30 s), then stops it.
func run(t *testing.T, c *consumer.Consumer, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var g errgroup.Group
	g.Go(func() error { return c.Run(ctx) })
	for !done() {
		if ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A transactional publisher (exactly-once mode) with aborted transactions:
// one sent again with the same event ids (as cdc-outbox does after a failed
// round) and one aborted for good. Under read_committed the handler never
// gets a record of an aborted transaction (KIP-98: the fetch answer's
// aborted-transactions list; kafka-go's own Reader passes them on,
// segmentio/kafka-go#1332), so each event once without any duplicate to
// skip; under read_uncommitted the aborted copies come first (the resent
// ones are duplicates). Never, in either level, does a transaction marker
// (COMMIT/ABORT control record) reach OnInvalid.
func TestIsolationAbortedTransactions(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "im.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.TransactionalID("cdc-outbox-test"),
		kgo.DefaultProduceTopic("im.events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	txn := func(commit bool, recs ...*kgo.Record) {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, kgoRecord(0, 7, 1, 101), kgoRecord(0, 7, 2, 102))
	txn(false, kgoRecord(0, 7, 3, 103), kgoRecord(0, 7, 4, 104)) // aborted round
	txn(true, kgoRecord(0, 7, 3, 103), kgoRecord(0, 7, 4, 104))  // sent again
	txn(false, kgoRecord(0, 8, 1, 901))                          // aborted for good
	txn(true, kgoRecord(0, 7, 5, 105))

	for _, tc := range []struct {
		isolation string
		want      []string
		dups      int
	}{
		{consumer.ReadCommitted, []string{"101", "102", "103", "104", "105"}, 0},
		{consumer.ReadUncommitted, []string{"101", "102", "103", "104", "901", "105"}, 2},
	} {
		t.Run(tc.isolation, func(t *testing.T) {
			var mu sync.Mutex
			var ids []string
			var late, invalid int
			reg := prometheus.NewRegistry()
			c, err := consumer.New(consumer.Config{Brokers: cluster.ListenAddrs(), Topics: []string{"im.events"}, Group: "g-" + tc.isolation,
				Isolation: tc.isolation, MaxWait: 50 * time.Millisecond},
				consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
					mu.Lock()
					defer mu.Unlock()
					ids = append(ids, r.EventID)
					if r.Late {
						late++
					}
					return nil
				}), consumer.Options{Metrics: consumer.NewMetrics(reg),
					OnInvalid: func(_ context.Context, m kafka.Message, err error) error {
						mu.Lock()
						defer mu.Unlock()
						invalid++
						t.Errorf("OnInvalid got offset %d (key %x): %v", m.Offset, m.Key, err)
						return nil
					}})
			if err != nil {
				t.Fatal(err)
			}
			run(t, c, func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(ids, "105") })
			if !slices.Equal(ids, tc.want) || late != 0 || invalid != 0 {
				t.Fatalf("handled %v (%d late, %d invalid), want %v", ids, late, invalid, tc.want)
			}
			if got := testutil.ToFloat64(metric(t, reg, "duplicate")); int(got) != tc.dups {
				t.Fatalf("%v duplicates skipped, want %d", got, tc.dups)
			}
		})
	}
}

// metric returns cdc_consumer_records_total{result} of reg's only topic.
func metric(t *testing.T, reg *prometheus.Registry, result string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sum"})
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() != "cdc_consumer_records_total" {
				continue
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					c.Add(m.GetCounter().GetValue())
				}
			}
		}
	}
	return c
}

// Back-pressure: a handler stuck on one partition stalls that partition
// only; the other partition's records (more than the prefetch queue holds)
// are all handled meanwhile. Released, the stuck partition finishes in order.
func TestSlowPartitionDoesNotStallOthers(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "im.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("im.events"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 300 // per partition; QueueCapacity is 10
	var recs []*kgo.Record
	for s := int64(1); s <= n; s++ {
		recs = append(recs, kgoRecord(0, 1, s, uint64(s)), kgoRecord(1, 2, s, uint64(1000+s)))
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	var mu sync.Mutex
	seqs := map[int][]int64{}
	count := func(p int) int { mu.Lock(); defer mu.Unlock(); return len(seqs[p]) }
	c, err := consumer.New(consumer.Config{Brokers: cluster.ListenAddrs(), Topics: []string{"im.events"}, Group: "g",
		QueueCapacity: 10, MaxWait: 50 * time.Millisecond},
		consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
			if r.Partition == 0 && r.SeqNo == 2 {
				select { // stuck until released
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			mu.Lock()
			seqs[r.Partition] = append(seqs[r.Partition], r.SeqNo)
			mu.Unlock()
			return nil
		}), consumer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var g errgroup.Group
	g.Go(func() error { return c.Run(ctx) })
	for count(1) < n && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if got := count(1); got != n {
		t.Fatalf("partition 1: %d of %d handled while partition 0 was stuck", got, n)
	}
	// Partition 0's first record may be handled after partition 1's last
	// (one Fetch answer holds both; the goroutines run in any order), but
	// never a record past the stuck one.
	for count(0) < 1 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if got := count(0); got != 1 {
		t.Fatalf("partition 0 handled %d records past its stuck handler, want 1", got)
	}
	close(release)
	for count(0) < n && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		for i, s := range seqs[p] {
			if s != int64(i+1) {
				t.Fatalf("partition %d: record %d has seq_no %d", p, i, s)
			}
		}
		if len(seqs[p]) != n {
			t.Fatalf("partition %d: %d handled, want %d", p, len(seqs[p]), n)
		}
	}
}

// SASL (SCRAM-SHA-512) against kfake with SASL on: the group's and the
// partition readers' connections log in (every record handled, in order).
// A refused login ending Run needs a real broker's answer (kfake closes
// the connection instead): TestSecureConsumer.
func TestSASL(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "im.events"), kfake.EnableSASL(),
		kfake.Superuser(sink.MechanismSCRAM512, "gateway", "right-password"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("im.events"),
		kgo.SASL(scram.Auth{User: "gateway", Pass: "right-password"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for s := int64(1); s <= 20; s++ {
		if err := cl.ProduceSync(context.Background(), kgoRecord(0, 9, s, uint64(s))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := consumer.Config{Brokers: cluster.ListenAddrs(), Topics: []string{"im.events"}, Group: "g", MaxWait: 50 * time.Millisecond,
		SASL: consumer.SASL{Mechanism: sink.MechanismSCRAM512, Username: "gateway", Password: "right-password"}}
	var mu sync.Mutex
	var seqs []int64
	collect(t, cfg, func(r *consumer.Record) { mu.Lock(); defer mu.Unlock(); seqs = append(seqs, r.SeqNo) },
		func() bool { mu.Lock(); defer mu.Unlock(); return len(seqs) == 20 })
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("record %d has seq_no %d (%v)", i, s, seqs)
		}
	}
	if len(seqs) != 20 {
		t.Fatalf("handled %d of 20 with SASL", len(seqs))
	}
}

// A temporary error of a partition read (KAFKA_STORAGE_ERROR on Fetch,
// as a broker with a failing disk answers) passes: kafka-go's reader
// reports it and reads again, and Run keeps going (it returned the error
// before, stopping the consumer on a passing broker fault); every record
// is handled once, in order.
func TestTemporaryFetchErrorPasses(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "im.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("im.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for s := int64(1); s <= 20; s++ {
		if err := cl.ProduceSync(context.Background(), kgoRecord(0, 3, s, uint64(s))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var failed atomic.Int32
	cluster.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if failed.Load() >= 3 {
			return nil, nil, false // then as usual
		}
		cluster.KeepControl()
		failed.Add(1)
		req := kreq.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.KafkaStorageError.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	var mu sync.Mutex
	var seqs []int64
	collect(t, consumer.Config{Brokers: cluster.ListenAddrs(), Topics: []string{"im.events"}, Group: "g", MaxWait: 50 * time.Millisecond},
		func(r *consumer.Record) { mu.Lock(); defer mu.Unlock(); seqs = append(seqs, r.SeqNo) },
		func() bool { mu.Lock(); defer mu.Unlock(); return len(seqs) == 20 })
	if failed.Load() < 3 {
		t.Fatalf("only %d fetches failed: the test did not inject its errors", failed.Load())
	}
	if len(seqs) != 20 {
		t.Fatalf("handled %d of 20 after temporary fetch errors", len(seqs))
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("record %d has seq_no %d (%v)", i, s, seqs)
		}
	}
}

// debeziumTopic returns the brokers of an in-process Kafka (kfake) whose
// topic outbox.event.order holds records as Debezium's outbox event router
// (and cdc-outbox's debezium preset) writes them: key aggregateid, headers
// id and type; written by a transactional producer, the second
// transaction aborted (Example_debezium). stop closes it.
func debeziumTopic() (brokers []string, stop func()) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "outbox.event.order"))
	if err != nil {
		panic(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.TransactionalID("debezium-example"),
		kgo.DefaultProduceTopic("outbox.event.order"))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	rec := func(id, typ string) *kgo.Record {
		return &kgo.Record{Key: []byte("order-17"), Value: []byte(`{}`),
			Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(id)}, {Key: "type", Value: []byte(typ)}}}
	}
	for _, txn := range []struct {
		commit bool
		recs   []*kgo.Record
	}{
		{true, []*kgo.Record{rec("4d1c0b8e-0001", "OrderCreated")}},
		{false, []*kgo.Record{rec("4d1c0b8e-0002", "OrderCancelled")}},
		{true, []*kgo.Record{rec("4d1c0b8e-0003", "OrderPaid"), rec("4d1c0b8e-0004", "OrderShipped")}},
	} {
		if err := cl.BeginTransaction(); err != nil {
			panic(err)
		}
		if err := cl.ProduceSync(context.Background(), txn.recs...).FirstErr(); err != nil {
			panic(err)
		}
		if err := cl.EndTransaction(context.Background(), kgo.TransactionEndTry(txn.commit)); err != nil {
			panic(err)
		}
	}
	return cluster.ListenAddrs(), cluster.Close
}

// The partitions are read as the Java consumer reads them: one Fetch
// request per leader broker holding all the partitions it leads (before:
// a request per partition, so the broker served n requests per round for
// n partitions). When leaders move mid-stream (NOT_LEADER_OR_FOLLOWER),
// the reads are grouped again by fresh metadata: every record is handled,
// once, in order.
func TestFetchPerLeaderFollowsMovedLeaders(t *testing.T) {
	const parts, n = 6, 200 // n records per partition, half before the moves
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(parts, "im.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	var mu sync.Mutex
	most := 0 // the most partitions in one Fetch request
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		k := 0
		for _, t := range req.(*kmsg.FetchRequest).Topics {
			k += len(t.Partitions)
		}
		mu.Lock()
		most = max(most, k)
		mu.Unlock()
		return nil, nil, false
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("im.events"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(from, to int64) {
		var recs []*kgo.Record
		for s := from; s <= to; s++ {
			for p := range int32(parts) {
				recs = append(recs, kgoRecord(p, int64(p), s, uint64(int64(p)*10_000+s)))
			}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(1, n/2)
	seqs := map[int][]int64{}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		c := 0
		for _, s := range seqs {
			c += len(s)
		}
		return c
	}
	c, err := consumer.New(consumer.Config{Brokers: cluster.ListenAddrs(), Topics: []string{"im.events"}, Group: "g", MaxWait: 50 * time.Millisecond},
		consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
			mu.Lock()
			seqs[r.Partition] = append(seqs[r.Partition], r.SeqNo)
			mu.Unlock()
			return nil
		}), consumer.Options{OnGap: func(_ context.Context, g consumer.Gap) error { t.Errorf("unexpected %s", g); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var g errgroup.Group
	g.Go(func() error { return c.Run(ctx) })
	for count() < parts*n/2 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	for p := range int32(parts) {
		if err := cluster.MoveTopicPartition("im.events", p, (p+1)%3); err != nil {
			t.Fatal(err)
		}
	}
	produce(n/2+1, n)
	for count() < parts*n && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for p := range parts {
		want := make([]int64, n)
		for i := range want {
			want[i] = int64(i + 1)
		}
		if !slices.Equal(seqs[p], want) {
			t.Errorf("partition %d: handled %d records %v..., want seq_no 1..%d once each, in order", p, len(seqs[p]), seqs[p][:min(len(seqs[p]), 5)], n)
		}
	}
	if most < 2 {
		t.Errorf("the largest Fetch request held %d partitions, want all of a leader's (%d partitions on 3 brokers)", most, parts)
	}
}
