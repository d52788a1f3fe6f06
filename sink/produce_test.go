package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
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
		{fmt.Errorf("broker 3: %w", errLeaderMoved), true},
	} {
		if got := retriable(c.err); got != c.want {
			t.Errorf("retriable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// fakeCluster is a transport standing in for a broker that leads every
// partition of its topics (partitions 0..parts-1). It applies the
// idempotent producer's sequence rules (KIP-98) as a broker does: a
// producer's batch of a partition is written only with the next
// sequence; a resend of one of the last 5 batches written is answered as
// written and not stored again; another gap is OUT_OF_ORDER_SEQUENCE_NUMBER;
// a producer it has no state of is written at any sequence (Kafka 4.1).
// Faults: fail[partition] answers the next batches with these codes
// without writing them; lose[partition] writes the next n batches but
// loses the answers (a dropped connection). With hold, answers are kept
// until release (requests in flight).
type fakeCluster struct {
	parts int
	fail  map[int32][]kafka.Error
	lose  map[int32]int
	sent  map[int32][][]byte // each batch sent per partition, as sent
	keys  map[int32][]string // the keys written per partition, in log order
	seqs  map[int32]*fakeSeq
	reqs  int
	pids  int64
	inits []string // the InitProducerId requests: "new" or "bump"
	hold  bool
	held  []*fakePending
	// strictFirst refuses a first batch of a producer on a partition
	// with a sequence other than 0 (Kafka before 2.5, and 4.5+ on a
	// partition never written); without it any sequence is accepted.
	strictFirst bool
	// A paused leader: requests to a broker in paused are neither
	// written nor answered until abandoned; metadata names broker 1 the
	// leader until moveAfter fresh lookups, then moveTo.
	paused    map[int32]bool
	stuck     map[int32][]*fakePending
	moveAfter int
	moveTo    int32
	fresh     int
	abandoned []int32
}

type fakeSeq struct {
	pid     int64
	epoch   int16
	next    int32
	written []int32 // base sequences of the last 5 batches written
}

func newFake(parts int) *fakeCluster {
	return &fakeCluster{parts: parts, fail: map[int32][]kafka.Error{}, lose: map[int32]int{},
		sent: map[int32][][]byte{}, keys: map[int32][]string{}, seqs: map[int32]*fakeSeq{}}
}

type fakePending struct {
	res  *produceAPI.Response
	err  error
	done chan struct{}
}

func (p *fakePending) ready() <-chan struct{} { return p.done }

func (p *fakePending) wait(ctx context.Context) (protocol.Message, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.res, nil
}

// release delivers the held answers.
func (f *fakeCluster) release() {
	for _, p := range f.held {
		close(p.done)
	}
	f.held, f.hold = nil, false
}

func (f *fakeCluster) metadata(_ context.Context, topic string, fresh bool) (*metadataAPI.ResponseTopic, error) {
	t := &metadataAPI.ResponseTopic{Name: topic}
	leader := int32(1)
	if fresh {
		f.fresh++
	}
	if f.moveAfter > 0 && f.fresh >= f.moveAfter {
		leader = f.moveTo
	}
	for p := range f.parts {
		t.Partitions = append(t.Partitions, metadataAPI.ResponsePartition{PartitionIndex: int32(p), LeaderID: leader})
	}
	return t, nil
}

func (f *fakeCluster) initProducerID(_ context.Context, pid int64, epoch int16) (int64, int16, error) {
	if pid >= 0 {
		f.inits = append(f.inits, "bump")
		return pid, epoch + 1, nil
	}
	f.inits = append(f.inits, "new")
	f.pids++
	return 1000 + f.pids, 0, nil
}

func (f *fakeCluster) stale() {}
func (f *fakeCluster) abandon(id int32) {
	f.abandoned = append(f.abandoned, id)
	for _, p := range f.stuck[id] {
		p.err = &net.OpError{Op: "abandon", Net: "tcp", Err: errLeaderMoved}
		close(p.done)
	}
	delete(f.stuck, id)
}
func (f *fakeCluster) close() {}

func (f *fakeCluster) produce(_ context.Context, leader int32, req *rawproduce.Request) (pending, error) {
	f.reqs++
	if f.paused[leader] {
		fp := &fakePending{done: make(chan struct{})}
		if f.stuck == nil {
			f.stuck = map[int32][]*fakePending{}
		}
		f.stuck[leader] = append(f.stuck[leader], fp)
		return fp, nil
	}
	res := &produceAPI.Response{}
	lost := false
	for _, t := range req.Topics {
		rt := produceAPI.ResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			b, _ := io.ReadAll(p.RecordSet.Reader)
			f.sent[p.Partition] = append(f.sent[p.Partition], b)
			rp := produceAPI.ResponsePartition{Partition: p.Partition}
			if codes := f.fail[p.Partition]; len(codes) > 0 {
				rp.ErrorCode, f.fail[p.Partition] = int16(codes[0]), codes[1:]
			} else {
				rp.ErrorCode = int16(f.write(p.Partition, b))
				if f.lose[p.Partition] > 0 {
					f.lose[p.Partition]--
					lost = true
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		res.Topics = append(res.Topics, rt)
	}
	fp := &fakePending{res: res, done: make(chan struct{})}
	if lost {
		fp.res, fp.err = nil, &net.OpError{Op: "read", Net: "tcp", Err: io.ErrUnexpectedEOF}
	}
	if f.hold {
		f.held = append(f.held, fp)
	} else {
		close(fp.done)
	}
	return fp, nil
}

// write applies the sequence rules to batch b (size-prefixed) of partition p.
func (f *fakeCluster) write(p int32, b []byte) kafka.Error {
	pid, epoch := batchProducer(b)
	seq, n := batchSequence(b), batchCount(b)
	if pid >= 0 {
		st := f.seqs[p]
		switch {
		case st == nil || st.pid != pid:
			// No state of this producer on the partition: any sequence is
			// accepted (Kafka 2.5 to 4.4, ProducerAppendInfo.checkSequence;
			// KAFKA-15591 is why: two batches in flight to a new partition
			// can be written out of order).
			if f.strictFirst && seq != 0 {
				return kafka.OutOfOrderSequenceNumber
			}
			st = &fakeSeq{pid: pid, epoch: epoch}
			f.seqs[p] = st
		case epoch > st.epoch:
			// A new epoch of a producer the partition has state of: from 0.
			if seq != 0 {
				return kafka.OutOfOrderSequenceNumber
			}
			st.epoch, st.written = epoch, nil
		case epoch < st.epoch:
			return kafka.InvalidProducerEpoch
		case slices.Contains(st.written, seq):
			return 0 // a duplicate: answered as written, not stored
		case seq != st.next:
			return kafka.OutOfOrderSequenceNumber
		}
		st.next = nextSequence(seq, n)
		st.written = append(st.written, seq)
		if len(st.written) > 5 {
			st.written = st.written[1:]
		}
	}
	var rs protocol.RecordSet
	if _, err := rs.ReadFrom(bytes.NewReader(b)); err != nil {
		panic(err)
	}
	for {
		r, err := rs.Records.ReadRecord()
		if err != nil {
			break
		}
		k, _ := protocol.ReadAll(r.Key)
		f.keys[p] = append(f.keys[p], string(k))
	}
	return 0
}

func fakeProducer(f *fakeCluster) *Producer {
	cfg := DefaultConfig()
	cfg.MaxAttempts, cfg.DeliveryTimeout = 3, 0
	return newProducer(cfg, &kafka.Hash{}, zap.NewNop(), f)
}

func roundOf(n int) []kafka.Message {
	return roundFrom(0, n)
}

// roundFrom returns records keyed from, from+1, ... (the key is the record's number).
func roundFrom(from, n int) []kafka.Message {
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Topic: "t", Key: []byte(fmt.Sprint(from + i)), Value: []byte(`{}`)}
	}
	return msgs
}

// checkLog fails unless each partition's log holds the records of
// rounds (their keys), each exactly once, in order.
func checkLog(t *testing.T, f *fakeCluster, rounds ...[]kafka.Message) {
	t.Helper()
	want := map[int32][]string{}
	balancer := &kafka.Hash{}
	ids := make([]int, f.parts)
	for i := range ids {
		ids[i] = i
	}
	for _, r := range rounds {
		for _, m := range r {
			p := int32(balancer.Balance(m, ids...))
			want[p] = append(want[p], string(m.Key))
		}
	}
	for p := range int32(f.parts) {
		if !slices.Equal(f.keys[p], want[p]) {
			t.Errorf("partition %d log: %v, want %v", p, f.keys[p], want[p])
		}
	}
}

// A retriable error on one partition resends that partition's batch only,
// as the same bytes, until acknowledged; the others are sent once.
func TestProducerRetriesOnlyFailedPartitions(t *testing.T) {
	f := newFake(3)
	f.fail[1] = []kafka.Error{kafka.NotLeaderForPartition, kafka.RequestTimedOut}
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
			f := newFake(3)
			f.fail[2] = c.codes
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
		f := newFake(3)
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
