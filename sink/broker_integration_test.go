//go:build integration

package sink

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"go.uber.org/zap"
)

// These tests talk to the real broker of scripts/dev-stack.sh
// (CDC_KAFKA_BROKERS, from `scripts/dev-stack.sh env`); they are skipped
// without it.
func realBrokers(t *testing.T) []string {
	v := os.Getenv("CDC_KAFKA_BROKERS")
	if v == "" {
		t.Skip("CDC_KAFKA_BROKERS not set: start scripts/dev-stack.sh up and eval its env")
	}
	return strings.Split(v, ",")
}

func realTopic(t *testing.T, brokers []string, parts int) string {
	t.Helper()
	topic := fmt.Sprintf("it.sink.%s.%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano())
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: &kafka.Transport{}}
	res, err := c.CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: parts, ReplicationFactor: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Errors[topic]; err != nil {
		t.Fatal(err)
	}
	return topic
}

// Idempotence on, five rounds in flight: every record stored once, in
// order, each in its key's partition; the producer has a real producer id.
func TestBrokerIdempotentRoundTrip(t *testing.T) {
	brokers := realBrokers(t)
	const parts = 3
	topic := realTopic(t, brokers, parts)
	cfg := DefaultConfig()
	cfg.Brokers = brokers
	p := NewProducer(cfg, &kafka.Hash{}, zap.NewNop())
	defer p.Close()
	var rounds []*Round
	var all [][]kafka.Message
	for i := range 20 {
		if len(rounds) == p.MaxInFlight() {
			if err := p.Wait(context.Background(), rounds[0]); err != nil {
				t.Fatal(err)
			}
			rounds = rounds[1:]
		}
		msgs := roundFrom(i*50, 50)
		for j := range msgs {
			msgs[j].Topic = topic
		}
		r, err := p.Begin(context.Background(), msgs)
		if err != nil {
			t.Fatal(err)
		}
		rounds, all = append(rounds, r), append(all, msgs)
	}
	for _, r := range rounds {
		if err := p.Wait(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if p.pid < 0 {
		t.Fatalf("producer id %d", p.pid)
	}
	want := map[int][]string{}
	for _, msgs := range all {
		for _, m := range msgs {
			part := (&kafka.Hash{}).Balance(m, 0, 1, 2)
			want[part] = append(want[part], string(m.Key))
		}
	}
	for part := range parts {
		if got := realKeys(t, brokers, topic, part); !slicesEqual(got, want[part]) {
			t.Errorf("partition %d: %d records %v…, want %d", part, len(got), head(got), len(want[part]))
		}
	}
}

// The broker deduplicates: the same batch (same producer id, epoch and
// sequence) sent again is answered as written and stored once; a batch
// with a sequence gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestBrokerDeduplicatesResentBatch(t *testing.T) {
	brokers := realBrokers(t)
	topic := realTopic(t, brokers, 1)
	cfg := DefaultConfig()
	cfg.Brokers = brokers
	p := NewProducer(cfg, &kafka.Hash{}, zap.NewNop())
	defer p.Close()
	cl := p.tr.(*cluster)
	msgs := roundFrom(0, 10)
	for i := range msgs {
		msgs[i].Topic = topic
	}
	r, err := p.Begin(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	raw := append([]byte(nil), r.batches[0].raw...)
	leader := r.batches[0].leader
	if err := p.Wait(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if batchSequence(raw) != 0 {
		t.Fatalf("first batch sequence %d", batchSequence(raw))
	}
	send := func(b []byte) kafka.Error {
		t.Helper()
		req := &rawproduce.Request{Acks: -1, Timeout: 10000, Topics: []rawproduce.RequestTopic{{Topic: topic,
			Partitions: []rawproduce.RequestPartition{{Partition: 0, RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(b)}}}}}}
		pd, err := cl.produce(context.Background(), leader, req)
		if err != nil {
			t.Fatal(err)
		}
		res, err := pd.wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return kafka.Error(res.(*produceAPI.Response).Topics[0].Partitions[0].ErrorCode)
	}
	for range 2 {
		if code := send(raw); code != 0 && code != kafka.DuplicateSequenceNumber {
			t.Fatalf("resent batch: %v", code)
		}
	}
	gap := append([]byte(nil), raw...)
	pid, epoch := batchProducer(raw)
	stampBatch(gap, pid, epoch, 20)
	if code := send(gap); code != kafka.OutOfOrderSequenceNumber {
		t.Fatalf("batch with a sequence gap: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", code)
	}
	if err := p.WriteMessages(context.Background(), func() []kafka.Message {
		m := roundFrom(10, 5)
		for i := range m {
			m[i].Topic = topic
		}
		return m
	}()...); err != nil {
		t.Fatal(err)
	}
	got := realKeys(t, brokers, topic, 0)
	want := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14"}
	if !slicesEqual(got, want) {
		t.Fatalf("stored %v, want %v (one copy of the resent batch)", got, want)
	}
}

// The premise of the Producer's rule that a partition's first batch goes
// alone (overtake): Kafka 4.1 writes a batch of a producer it holds no
// state of on the partition at any sequence (ProducerAppendInfo.
// checkSequence, "accept writes with any sequence number"; KAFKA-15591),
// so a later batch overtaking a refused first one is written ahead of it.
func TestBrokerWritesUnknownProducerAtAnySequence(t *testing.T) {
	brokers := realBrokers(t)
	topic := realTopic(t, brokers, 1)
	cfg := DefaultConfig()
	cfg.Brokers = brokers
	p := NewProducer(cfg, &kafka.Hash{}, zap.NewNop())
	defer p.Close()
	if err := p.initID(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	msgs := roundFrom(0, 3)
	for i := range msgs {
		msgs[i].Topic = topic
	}
	raw, err := appendBatch(nil, msgs, []int32{0, 1, 2}, time.Now().UnixMilli(), nil)
	if err != nil {
		t.Fatal(err)
	}
	stampBatch(raw, p.pid, p.epoch, 7)
	meta, err := p.metadata(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	req := &rawproduce.Request{Acks: -1, Timeout: 10000, Topics: []rawproduce.RequestTopic{{Topic: topic,
		Partitions: []rawproduce.RequestPartition{{Partition: 0, RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(raw)}}}}}}
	for attempt := 0; ; attempt++ {
		req.Topics[0].Partitions[0].RecordSet = protocol.RawRecordSet{Reader: bytes.NewReader(raw)}
		pd, err := p.tr.produce(context.Background(), leaderOf(meta, 0), req)
		if err != nil {
			t.Fatal(err)
		}
		res, err := pd.wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		code := kafka.Error(res.(*produceAPI.Response).Topics[0].Partitions[0].ErrorCode)
		if code == 0 {
			break
		}
		if !code.Temporary() || attempt > 50 {
			t.Fatalf("first batch of a producer at sequence 7: %v, want written", code)
		}
		time.Sleep(100 * time.Millisecond) // the new partition's leadership settling
	}
	if got := realKeys(t, brokers, topic, 0); !slicesEqual(got, []string{"0", "1", "2"}) {
		t.Fatalf("stored %v", got)
	}
}

// The CI failure (a replay into a freshly created topic lost a batch):
// produce to a topic right after creating it, 5 rounds in flight, a new
// producer each time, on many fresh topics; each partition holds every
// record once, in order.
func TestBrokerNewTopicPipelined(t *testing.T) {
	brokers := realBrokers(t)
	const parts, topics = 6, 50
	for n := range topics {
		topic := realTopic(t, brokers, parts)
		cfg := DefaultConfig()
		cfg.Brokers = brokers
		p := NewProducer(cfg, &kafka.Hash{}, zap.NewNop())
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var rounds []*Round
		var all [][]kafka.Message
		for i := range 12 {
			if len(rounds) == p.MaxInFlight() {
				if err := p.Wait(ctx, rounds[0]); err != nil {
					t.Fatalf("topic %d: %v", n, err)
				}
				rounds = rounds[1:]
			}
			msgs := roundFrom(i*30, 30)
			for j := range msgs {
				msgs[j].Topic = topic
			}
			r, err := p.Begin(ctx, msgs)
			if err != nil {
				t.Fatalf("topic %d: %v", n, err)
			}
			rounds, all = append(rounds, r), append(all, msgs)
		}
		for _, r := range rounds {
			if err := p.Wait(ctx, r); err != nil {
				t.Fatalf("topic %d: %v", n, err)
			}
		}
		cancel()
		p.Close()
		ids := make([]int, parts)
		for i := range ids {
			ids[i] = i
		}
		want := map[int][]string{}
		for _, msgs := range all {
			for _, m := range msgs {
				part := (&kafka.Hash{}).Balance(m, ids...)
				want[part] = append(want[part], string(m.Key))
			}
		}
		for part := range parts {
			if got := realKeys(t, brokers, topic, part); !slicesEqual(got, want[part]) {
				t.Errorf("topic %d partition %d: %d records %v…, want %d %v…", n, part, len(got), head(got), len(want[part]), head(want[part]))
			}
		}
	}
}
