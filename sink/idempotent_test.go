package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		head bool
		want outcome
	}{
		{fmt.Errorf("t/0: %w", kafka.DuplicateSequenceNumber), true, outAcked},
		{kafka.DuplicateSequenceNumber, false, outAcked},
		{kafka.OutOfOrderSequenceNumber, false, outRetryNow},
		{kafka.OutOfOrderSequenceNumber, true, outReset},
		{kafka.UnknownProducerId, true, outReset},
		{kafka.UnknownProducerId, false, outReset},
		{kafka.InvalidProducerEpoch, true, outReset},
		{kafka.NotLeaderForPartition, true, outRetry},
		{kafka.RequestTimedOut, false, outRetry},
		{errNoAnswer, true, outRetry},
		{kafka.MessageSizeTooLarge, true, outFail},
		{kafka.ProducerFenced, true, outFail},
		{context.Canceled, true, outFail},
		{fmt.Errorf("t/0: %w", errHeld), false, outRetryNow},
		{errHeld, true, outRetryNow},
	} {
		if got := classify(c.err, c.head); got != c.want {
			t.Errorf("classify(%v, head %v) = %d, want %d", c.err, c.head, got, c.want)
		}
	}
}

// Each partition's batches carry the producer id and epoch and base
// sequences that follow on from the previous batch's records.
func TestProducerSequences(t *testing.T) {
	f := newFake(3)
	p := fakeProducer(f)
	var rounds [][]kafka.Message
	for i := range 4 {
		r := roundFrom(i*20, 20)
		rounds = append(rounds, r)
		if err := p.WriteMessages(context.Background(), r...); err != nil {
			t.Fatal(err)
		}
	}
	for part, batches := range f.sent {
		next := int32(0)
		for _, b := range batches {
			pid, epoch := batchProducer(b)
			if pid != 1001 || epoch != 0 {
				t.Errorf("partition %d: producer %d epoch %d, want 1001 epoch 0", part, pid, epoch)
			}
			if seq := batchSequence(b); seq != next {
				t.Errorf("partition %d: base sequence %d, want %d", part, seq, next)
			}
			next += batchCount(b)
		}
	}
	if len(f.inits) != 1 {
		t.Errorf("InitProducerId %v, want one", f.inits)
	}
	checkLog(t, f, rounds...)
}

func TestNextSequenceWraps(t *testing.T) {
	if got := nextSequence(1<<31-2, 5); got != 3 {
		t.Errorf("nextSequence(MaxInt32-1, 5) = %d, want 3", got)
	}
}

// begin begins n rounds of 10 records each, numbered on from the keys before.
func begin(t *testing.T, p *Producer, n int) ([]*Round, [][]kafka.Message) {
	t.Helper()
	var rs []*Round
	var msgs [][]kafka.Message
	for i := range n {
		m := roundFrom(i*10, 10)
		r, err := p.Begin(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		rs, msgs = append(rs, r), append(msgs, m)
	}
	return rs, msgs
}

func waitAll(t *testing.T, p *Producer, rs []*Round) {
	t.Helper()
	for i, r := range rs {
		if err := p.Wait(context.Background(), r); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
}

func TestOvertake(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		earlier int
		acked   time.Time
		want    bool
	}{
		{0, time.Time{}, true},               // nothing before it: the partition's head
		{0, now.Add(-time.Hour), true},       // the head, state maybe expired: alone anyway
		{1, time.Time{}, false},              // never acknowledged: the broker may write it at any sequence
		{4, time.Time{}, false},              //
		{1, now.Add(-time.Second), true},     // the broker holds the state: refuses a gap
		{4, now.Add(-stateTrust + 1), true},  //
		{1, now.Add(-stateTrust), false},     // acknowledged too long ago: the state may be gone
		{2, now.Add(-24 * time.Hour), false}, //
	} {
		if got := overtake(c.earlier, c.acked, now); got != c.want {
			t.Errorf("overtake(%d, %v ago) = %v, want %v", c.earlier, now.Sub(c.acked), got, c.want)
		}
	}
}

// Five rounds go out before any answer (once each partition has a batch
// acknowledged); a sixth is refused until the oldest is waited for; the
// answers are applied in order.
func TestProducerPipelinesRounds(t *testing.T) {
	f := newFake(3)
	p := fakeProducer(f)
	first := roundFrom(1000, 30)
	if err := p.WriteMessages(context.Background(), first...); err != nil {
		t.Fatal(err)
	}
	f.hold = true
	reqs := f.reqs
	rs, msgs := begin(t, p, MaxInFlight)
	if f.reqs-reqs != MaxInFlight {
		t.Fatalf("%d requests sent before any answer, want %d", f.reqs-reqs, MaxInFlight)
	}
	if _, err := p.Begin(context.Background(), roundOf(1)); err == nil {
		t.Fatal("a sixth round was begun with five in flight")
	}
	if err := p.Wait(context.Background(), rs[1]); err == nil {
		t.Fatal("Wait out of order accepted")
	}
	f.release()
	waitAll(t, p, rs)
	checkLog(t, f, append([][]kafka.Message{first}, msgs...)...)
}

// The CI failure (replay into a new 6-partition topic: 6 records counted
// as published, missing from the log): the first batch of a partition
// fails with NOT_LEADER_OR_FOLLOWER while later rounds are begun. Kafka
// 4.1 writes a producer it has no state of at any sequence, so a later
// batch sent then would be written ahead of the first, whose resend is
// then refused (OUT_OF_ORDER_SEQUENCE_NUMBER: reset) and which the later
// acknowledgement made look written. The later batches of a partition
// without acknowledged state wait for its first one; every record is in
// the log once, in order, and the pipelining resumes after the first.
func TestProducerNewPartitionRetryInFlight(t *testing.T) {
	for _, strict := range []bool{false, true} {
		for _, codes := range [][]kafka.Error{
			{kafka.NotLeaderForPartition},
			{kafka.NotLeaderForPartition, kafka.OutOfOrderSequenceNumber},
			{kafka.NotLeaderForPartition, kafka.UnknownProducerId},
			{kafka.LeaderNotAvailable, kafka.NotLeaderForPartition},
		} {
			t.Run(fmt.Sprintf("strict=%v/%v", strict, codes), func(t *testing.T) {
				f := newFake(3)
				f.strictFirst = strict
				f.hold = true
				f.fail[1] = codes
				p := fakeProducer(f)
				p.cfg.MaxAttempts = 4
				rs, msgs := begin(t, p, MaxInFlight)
				if f.reqs != 1 {
					t.Errorf("%d requests before the first answer, want 1 (the first batch of each partition alone)", f.reqs)
				}
				f.release()
				if err := p.Wait(context.Background(), rs[0]); err != nil {
					t.Fatal(err)
				}
				// The first round landed: the held batches of the failed
				// partition went out with it (those of the others too,
				// unless a reset made their state unknown again).
				reset := len(f.inits) > 1
				for i, r := range rs[1:] {
					for _, b := range r.batches {
						if b.held && (b.partition == 1 || !reset) {
							t.Errorf("round %d: the batch of partition %d still held after the first round landed", i+1, b.partition)
						}
					}
				}
				waitAll(t, p, rs[1:])
				checkLog(t, f, msgs...)
			})
		}
	}
}

// A retriable failure of a partition's batch with later rounds in flight:
// the broker refuses the later batches of that partition (sequence gap),
// the Producer resends them all in order; each record is stored once.
func TestProducerRetryWithRoundsInFlight(t *testing.T) {
	for _, code := range []kafka.Error{kafka.NotLeaderForPartition, kafka.NotEnoughReplicas, kafka.RequestTimedOut} {
		t.Run(code.Error(), func(t *testing.T) {
			f := newFake(3)
			p := fakeProducer(f)
			first := roundFrom(1000, 30)
			if err := p.WriteMessages(context.Background(), first...); err != nil {
				t.Fatal(err)
			}
			f.hold = true
			f.fail[1] = []kafka.Error{code}
			rs, msgs := begin(t, p, MaxInFlight)
			f.release()
			waitAll(t, p, rs)
			checkLog(t, f, append([][]kafka.Message{first}, msgs...)...)
		})
	}
}

// A batch written whose answer was lost is resent with its sequence: the
// broker keeps one copy; later rounds in flight keep their order.
func TestProducerLostAnswerNoDuplicate(t *testing.T) {
	f := newFake(3)
	f.hold = true
	f.lose[0] = 1
	f.lose[2] = 2
	p := fakeProducer(f)
	rs, msgs := begin(t, p, 4)
	f.release()
	waitAll(t, p, rs)
	checkLog(t, f, msgs...)
	if len(f.sent[0]) <= 4 || len(f.sent[2]) <= 4 {
		t.Errorf("sends %d, %d: want the lost ones resent", len(f.sent[0]), len(f.sent[2]))
	}
}

// DUPLICATE_SEQUENCE_NUMBER is success: the batch is not resent.
func TestProducerDuplicateSequenceIsSuccess(t *testing.T) {
	f := newFake(3)
	f.fail[0] = []kafka.Error{kafka.DuplicateSequenceNumber}
	p := fakeProducer(f)
	if err := p.WriteMessages(context.Background(), roundOf(30)...); err != nil {
		t.Fatal(err)
	}
	if len(f.sent[0]) != 1 {
		t.Errorf("partition 0 sent %d times, want 1", len(f.sent[0]))
	}
	if err := p.WriteMessages(context.Background(), roundFrom(30, 30)...); err != nil {
		t.Fatal(err)
	}
	if seq := batchSequence(f.sent[0][1]); seq == 0 {
		t.Error("the sequence did not advance past the duplicate batch")
	}
}

// UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_EPOCH (batch not written):
// a new epoch (KIP-360 bump), the batches renumbered from 0, written once.
func TestProducerResetEpoch(t *testing.T) {
	for _, code := range []kafka.Error{kafka.UnknownProducerId, kafka.InvalidProducerEpoch} {
		t.Run(code.Error(), func(t *testing.T) {
			f := newFake(3)
			p := fakeProducer(f)
			first := roundFrom(1000, 30)
			if err := p.WriteMessages(context.Background(), first...); err != nil {
				t.Fatal(err)
			}
			f.hold = true
			f.fail[1] = []kafka.Error{code}
			rs, msgs := begin(t, p, 3)
			f.release()
			waitAll(t, p, rs)
			if len(f.inits) != 2 || f.inits[1] != "bump" {
				t.Errorf("InitProducerId %v, want new then bump", f.inits)
			}
			last := f.sent[1][len(f.sent[1])-1]
			if _, epoch := batchProducer(last); epoch != 1 {
				t.Errorf("epoch after the reset %d, want 1", epoch)
			}
			checkLog(t, f, append([][]kafka.Message{first}, msgs...)...)
		})
	}
}

// UNKNOWN_PRODUCER_ID while a batch's outcome is unknown: no renumbering
// (it could duplicate); the Producer fails this round and every later one.
func TestProducerResetUnsafeBreaks(t *testing.T) {
	f := newFake(3)
	f.hold = true
	f.lose[0] = 1
	f.fail[1] = []kafka.Error{kafka.UnknownProducerId}
	p := fakeProducer(f)
	p.cfg.MaxAttempts = 1
	rs, _ := begin(t, p, 2)
	f.release()
	err := p.Wait(context.Background(), rs[0])
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) {
		t.Fatalf("err = %v, want WriteErrors", err)
	}
	if err := p.Wait(context.Background(), rs[1]); err == nil {
		t.Fatal("a later round succeeded after the Producer broke")
	}
	if _, err := p.Begin(context.Background(), roundOf(3)); err == nil {
		t.Fatal("Begin after the Producer broke")
	}
}

// OUT_OF_ORDER_SEQUENCE_NUMBER for a batch sent with every earlier one
// acknowledged (the broker lost the state) resets like UNKNOWN_PRODUCER_ID.
func TestProducerOutOfOrderAtHeadResets(t *testing.T) {
	f := newFake(3)
	p := fakeProducer(f)
	if err := p.WriteMessages(context.Background(), roundOf(30)...); err != nil {
		t.Fatal(err)
	}
	f.fail[2] = []kafka.Error{kafka.OutOfOrderSequenceNumber}
	if err := p.WriteMessages(context.Background(), roundFrom(100, 30)...); err != nil {
		t.Fatal(err)
	}
	if len(f.inits) != 2 {
		t.Errorf("InitProducerId %v, want a reset", f.inits)
	}
	checkLog(t, f, roundOf(30), roundFrom(100, 30))
}

// A batch failing for good (MESSAGE_TOO_LARGE) with later rounds in
// flight: the later batches of its partition fail too (never written out
// of order), the other partitions' are written, and the partition's
// sequence goes back so that its records can be sent again.
func TestProducerFinalFailureRewinds(t *testing.T) {
	f := newFake(3)
	f.hold = true
	f.fail[1] = []kafka.Error{kafka.MessageSizeTooLarge}
	p := fakeProducer(f)
	rs, msgs := begin(t, p, 3)
	f.release()
	for i, r := range rs {
		err := p.Wait(context.Background(), r)
		var werrs kafka.WriteErrors
		if !errors.As(err, &werrs) {
			t.Fatalf("round %d: err = %v, want WriteErrors", i, err)
		}
		want := kafka.MessageSizeTooLarge
		for j, e := range werrs {
			part := (&kafka.Hash{}).Balance(msgs[i][j], 0, 1, 2)
			if (part == 1) != (e != nil) || part == 1 && i == 0 && !errors.Is(e, want) || part == 1 && i > 0 && !errors.Is(e, errEarlierFailed) {
				t.Errorf("round %d record %d (partition %d): %v", i, j, part, e)
			}
		}
	}
	// Sent again, the partition's records go out with the sequence of the failed batch.
	var again []kafka.Message
	for _, m := range msgs {
		for _, r := range m {
			if (&kafka.Hash{}).Balance(r, 0, 1, 2) == 1 {
				again = append(again, r)
			}
		}
	}
	if err := p.WriteMessages(context.Background(), again...); err != nil {
		t.Fatal(err)
	}
	if len(f.keys[1]) != len(again) {
		t.Errorf("partition 1 holds %d records, want %d", len(f.keys[1]), len(again))
	}
}

// keyedTo returns n records (keys from from on) that the fake's hash
// partitioner puts on partition part of 3.
func keyedTo(part, from, n int) []kafka.Message {
	var msgs []kafka.Message
	for i := from; len(msgs) < n; i++ {
		m := roundFrom(i, 1)[0]
		if (&kafka.Hash{}).Balance(m, 0, 1, 2) == part {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// A batch whose first attempt may have been written (answer lost) and
// whose later attempts were refused (NOT_LEADER_OR_FOLLOWER) until it was
// given up: its sequence must not be taken again under the same epoch (a
// later batch of the same size would be answered as a duplicate and lost);
// the Producer breaks instead.
func TestProducerMaybeWrittenGivenUpBreaks(t *testing.T) {
	f := newFake(3)
	p := fakeProducer(f)
	if err := p.WriteMessages(context.Background(), keyedTo(1, 0, 3)...); err != nil {
		t.Fatal(err)
	}
	f.hold = true
	f.lose[1] = 1 // the first attempt is written, its answer lost
	r, err := p.Begin(context.Background(), keyedTo(1, 100, 3))
	if err != nil {
		t.Fatal(err)
	}
	f.fail[1] = []kafka.Error{kafka.NotLeaderForPartition, kafka.NotLeaderForPartition} // the resends refused
	f.release()
	err = p.Wait(context.Background(), r)
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) {
		t.Fatalf("err = %v, want WriteErrors", err)
	}
	b := keyedTo(1, 1000, 3)
	if err := p.WriteMessages(context.Background(), b...); err == nil {
		got := f.keys[1]
		if !slices.Contains(got, string(b[0].Key)) {
			t.Fatalf("the next batch was acknowledged but is not in the log %v (its sequence collided with the given-up one)", got)
		}
		t.Fatal("the Producer went on after giving up a batch that may have been written")
	}
}

// A paused leader accepts requests and never answers. While a request is
// unanswered the Producer checks the leadership every leaderCheck; once
// the metadata names another leader (Kafka fenced the paused one) it
// abandons the old connection and sends the rounds in flight to the new
// leader, without giving up and without duplicates.
func TestProducerFollowsPausedLeader(t *testing.T) {
	f := newFake(3)
	f.paused = map[int32]bool{1: true}
	f.moveAfter, f.moveTo = 2, 2
	p := fakeProducer(f)
	rs, msgs := begin(t, p, 3)
	// Without following the leader, the wait would last until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, r := range rs {
		if err := p.Wait(ctx, r); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	if !slices.Equal(f.abandoned, []int32{1}) {
		t.Fatalf("abandoned brokers %v, want [1]", f.abandoned)
	}
	if len(f.inits) != 1 {
		t.Errorf("InitProducerId %v, want one (no epoch bump)", f.inits)
	}
	checkLog(t, f, msgs...)
}
