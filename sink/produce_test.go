package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"go.uber.org/zap"
)

func TestRetriable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{kafka.NotLeaderForPartition, true},
		{fmt.Errorf("t/1: %w", kafka.LeaderNotAvailable), true},
		{kafka.RequestTimedOut, true},
		{kafka.NotEnoughReplicas, true},
		{kafka.UnknownTopicOrPartition, true},
		{kafka.MessageSizeTooLarge, false},
		{kafka.InvalidTopic, false},
		{kafka.TopicAuthorizationFailed, false},
		{kafka.InvalidMessage, true}, // CORRUPT_MESSAGE
		{io.ErrUnexpectedEOF, true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{errors.New("unexpected produce response"), false},
		{fmt.Errorf("t/3: %w", errNoAnswer), true},
	} {
		if got := retriable(c.err); got != c.want {
			t.Errorf("retriable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// fakeCluster is a kafka.RoundTripper standing in for a broker: it answers
// metadata for its topics (partitions 0..n-1, all led by broker 1) and
// produce requests, failing a partition's batch with the next code of
// fail[partition] while any is left.
type fakeCluster struct {
	parts int
	fail  map[int32][]kafka.Error
	sent  map[int32][][]byte // each batch sent per partition, as sent
	reqs  int
}

func (f *fakeCluster) RoundTrip(_ context.Context, _ net.Addr, msg protocol.Message) (protocol.Message, error) {
	switch req := msg.(type) {
	case *metadataAPI.Request:
		res := &metadataAPI.Response{}
		for _, name := range req.TopicNames {
			t := metadataAPI.ResponseTopic{Name: name}
			for p := range f.parts {
				t.Partitions = append(t.Partitions, metadataAPI.ResponsePartition{PartitionIndex: int32(p), LeaderID: 1})
			}
			res.Topics = append(res.Topics, t)
		}
		return res, nil
	case *rawproduce.Request:
		f.reqs++
		res := &produceAPI.Response{}
		for _, t := range req.Topics {
			rt := produceAPI.ResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				b, _ := io.ReadAll(p.RecordSet.Reader)
				f.sent[p.Partition] = append(f.sent[p.Partition], b)
				rp := produceAPI.ResponsePartition{Partition: p.Partition}
				if codes := f.fail[p.Partition]; len(codes) > 0 {
					rp.ErrorCode, f.fail[p.Partition] = int16(codes[0]), codes[1:]
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			res.Topics = append(res.Topics, rt)
		}
		return res, nil
	}
	return nil, fmt.Errorf("unexpected request %T", msg)
}

func fakeProducer(f *fakeCluster) *Producer {
	cfg := DefaultConfig()
	cfg.MaxAttempts = 3
	p := NewProducer(cfg, &kafka.Hash{}, zap.NewNop())
	p.rt = f
	return p
}

func roundOf(n int) []kafka.Message {
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Topic: "t", Key: []byte(fmt.Sprint(i)), Value: []byte(`{}`)}
	}
	return msgs
}

// A retriable error on one partition resends that partition's batch only,
// as the same bytes, until acknowledged; the others are sent once.
func TestProducerRetriesOnlyFailedPartitions(t *testing.T) {
	f := &fakeCluster{parts: 3, fail: map[int32][]kafka.Error{1: {kafka.NotLeaderForPartition, kafka.RequestTimedOut}}, sent: map[int32][][]byte{}}
	if err := fakeProducer(f).WriteMessages(context.Background(), roundOf(30)...); err != nil {
		t.Fatal(err)
	}
	if f.reqs != 3 {
		t.Errorf("%d produce requests, want 3 (one per attempt, all partitions share a leader)", f.reqs)
	}
	for p, batches := range f.sent {
		want := 1
		if p == 1 {
			want = 3
		}
		if len(batches) != want {
			t.Errorf("partition %d: sent %d times, want %d", p, len(batches), want)
		}
		for _, b := range batches[1:] {
			if !bytes.Equal(b, batches[0]) {
				t.Errorf("partition %d: a retry sent other bytes than the first attempt", p)
			}
		}
	}
}

// A partition that keeps failing, or fails with an error that is not
// retriable, fails its records only: kafka.WriteErrors has nil for the
// records of the partitions acknowledged; a non-retriable batch is not resent.
func TestProducerReportsPerRecord(t *testing.T) {
	for _, c := range []struct {
		name  string
		codes []kafka.Error
		sends int
	}{
		{"retriable until the last attempt", []kafka.Error{kafka.NotEnoughReplicas, kafka.NotEnoughReplicas, kafka.NotEnoughReplicas}, 3},
		{"not retriable", []kafka.Error{kafka.MessageSizeTooLarge}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeCluster{parts: 3, fail: map[int32][]kafka.Error{2: c.codes}, sent: map[int32][][]byte{}}
			msgs := roundOf(30)
			err := fakeProducer(f).WriteMessages(context.Background(), msgs...)
			var werrs kafka.WriteErrors
			if !errors.As(err, &werrs) || len(werrs) != len(msgs) {
				t.Fatalf("err = %v, want kafka.WriteErrors for %d records", err, len(msgs))
			}
			balancer := &kafka.Hash{}
			for i, m := range msgs {
				p := balancer.Balance(m, 0, 1, 2)
				if (p == 2) != (werrs[i] != nil) {
					t.Errorf("record %d (partition %d): error %v", i, p, werrs[i])
				}
				if p == 2 && !errors.Is(werrs[i], c.codes[len(c.codes)-1]) {
					t.Errorf("record %d: error %v, want %v", i, werrs[i], c.codes[len(c.codes)-1])
				}
			}
			if len(f.sent[2]) != c.sends || len(f.sent[0]) != 1 || len(f.sent[1]) != 1 {
				t.Errorf("sends per partition: %d, %d, %d; want 1, 1, %d", len(f.sent[0]), len(f.sent[1]), len(f.sent[2]), c.sends)
			}
		})
	}
}

// A topic whose partition count changes under the Producer (pinned at
// start, or at its first use) is refused before anything is sent.
func TestProducerRefusesPartitionCountChange(t *testing.T) {
	for _, pin := range []bool{true, false} {
		f := &fakeCluster{parts: 3, sent: map[int32][][]byte{}}
		p := fakeProducer(f)
		if pin {
			p.Pin(map[string]int{"t": 3})
		}
		if err := p.WriteMessages(context.Background(), roundOf(10)...); err != nil {
			t.Fatal(err)
		}
		f.parts = 4
		reqs := f.reqs
		err := p.WriteMessages(context.Background(), roundOf(10)...)
		var pce *PartitionCountError
		if !errors.As(err, &pce) || pce.Pinned != 3 || pce.Now != 4 || !errors.Is(err, ErrPartitionCount) || !IsFatal(err) {
			t.Fatalf("pin %v: err = %v, want a fatal PartitionCountError 3 → 4", pin, err)
		}
		if f.reqs != reqs {
			t.Fatalf("pin %v: %d produce requests sent after the change", pin, f.reqs-reqs)
		}
	}
}
