package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/logging"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"go.uber.org/zap"
)

// Producer is the Kafka producer of the Writer and of dead-letter
// republish. A round of records goes out as one Produce request (acks=all;
// Produce API v3 to v8, so Kafka 0.11 or later) per partition leader, each
// partition's records as one record batch (magic 2, KIP-98) that the
// Producer encodes itself (appendBatch). The connections, the API version
// negotiation and the cluster metadata are the Producer's own (cluster):
// kafka-go supplies the protocol encoding only.
//
// Idempotence (Config.Idempotent, on by default; KIP-98): the Producer
// gets a producer id and epoch (InitProducerId) and numbers each
// partition's records; the broker writes a partition's batch only when its
// base sequence follows the last one written, and answers a resent batch
// it already has as written (one copy stored). Retries then never
// duplicate or reorder, and up to MaxInFlight rounds may be in flight at
// once (Begin, Wait). See classify for the handling of each answer. A
// broker holding no state of the producer on a partition writes a batch
// at any sequence, so a partition's batch goes out ahead of an
// unacknowledged earlier one only once a batch of it was acknowledged
// under the current epoch (overtake); until then it is held, and sent
// when that one lands.
//
// A batch that fails with a retriable error (a kafka.Error whose
// Temporary() is true, a dropped connection or a timeout) is sent again,
// as the same bytes, until it was tried Config.MaxAttempts times and
// Config.DeliveryTimeout passed, with a backoff of 100 ms × attempt² up
// to 1 s; batches that succeeded are not resent. A request unanswered for
// a second makes the Producer check every second whether its partitions'
// leader moved (await), so that a paused leader costs Kafka's fencing
// time rather than the write timeout.
// A round is reported only when every batch was acknowledged or given up.
// Without idempotence a caller must wait for a round before beginning the
// next (MaxInFlight is 1), so that a failed batch is never overtaken by a
// later one.
//
// Compared with kafka.Writer it keeps the same partitioner contract and
// reports failures the same way (kafka.WriteErrors, one entry per
// record), but encodes each record once, without kafka-go's per-record
// interfaces, per-record metadata lookup and page buffer copies.
type Producer struct {
	tr       transport
	balancer kafka.Balancer
	codec    compress.Codec
	cfg      Config
	log      *zap.Logger
	warn     *logging.Limiter

	pinMu  sync.Mutex
	pinned map[string]int // partition count of each topic seen (Pin, or first use)

	// Idempotence: the producer id and epoch (-1 without), each
	// partition's sequence state, and the rounds begun and not yet waited.
	pid      int64
	epoch    int16
	haveID   bool
	broken   error // set when ordering can no longer be guaranteed: every later round fails
	seqs     map[tp]*partSeq
	inflight []*Round

	topics map[string]*topicInfo // the current round's topics
	known  map[string]*topicInfo // the last topicInfo of each topic, reused while the cluster's cached metadata is the same
	spare  spares                // record batch buffers of acknowledged rounds

	txn *txnState // exactly-once delivery (txn.go); nil: at-least-once

	obs producerObserver // told of each request and transaction; nil: none
}

// producerObserver is the part of Observer the Producer reports to.
type producerObserver interface {
	Requested(records int)
	Transacted(committed bool)
}

type tp struct {
	topic     string
	partition int32
}

// partSeq is a partition's sequence state: the next base sequence, the
// batches begun but not yet acknowledged, in sequence order, and when a
// batch of the partition was last acknowledged under the current epoch
// (zero: never; the broker may hold no state of the producer there).
type partSeq struct {
	next    int32
	unacked []*batch
	acked   time.Time
}

// Round is a round of records begun by Begin, to be passed to Wait.
type Round struct {
	msgs    []kafka.Message
	batches []*batch // in order of first record
	parts   map[tp]*batch
	reqs    []*request // the latest attempt's requests
}

// batch is a partition's records of a round.
type batch struct {
	tp
	leader   int32
	idx      []int32 // indexes into the round's records, in order
	raw      []byte  // encoded batch, with its size prefix
	seq      int32   // base sequence (-1 without idempotence)
	attempts int
	first    time.Time // the first attempt
	err      error     // the last attempt's error, nil once acknowledged
	done     bool      // acknowledged
	final    bool      // failed and not to be resent
	unknown  bool      // an attempt may have been written (no answer, or a timeout after the append) and no answer since says so
	behind   bool      // the last attempt was sent while an earlier batch of the partition was not acknowledged
	held     bool      // not sent yet: an earlier batch of its partition must be acknowledged first (overtake)
}

// answered returns the done channel of the first of r's latest requests
// still unanswered, or a closed channel when every one was answered (or
// could not be sent). Waiting on it repeatedly until it is closed waits
// for every answer without a goroutine.
func (r *Round) answered() <-chan struct{} {
	for _, q := range r.reqs {
		if q.seen || q.p == nil {
			continue
		}
		if ch := q.p.ready(); !isClosed(ch) {
			return ch
		}
	}
	return closedChan
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// request is one Produce request of a round's attempt.
type request struct {
	batches []*batch
	p       pending // nil when it could not be sent (batches' err set)
	seen    bool    // its answer was applied
}

// MaxInFlight is how many rounds may be in flight per partition with
// idempotence: the most a broker deduplicates (it keeps the metadata of
// a producer's last 5 batches per partition).
const MaxInFlight = 5

// NewProducer returns a Producer for a validated Config. balancer must be
// the partitioner every producer of these topics uses (router.Balancer()).
func NewProducer(cfg Config, balancer kafka.Balancer, log *zap.Logger) *Producer {
	cl := newCluster(cfg.Brokers, cfg.DialTimeout, cfg.AllowAutoTopicCreation, log)
	cl.sec = NewSecurity(cfg) // security.go: kafka.tls, kafka.sasl
	return newProducer(cfg, balancer, log, cl)
}

func newProducer(cfg Config, balancer kafka.Balancer, log *zap.Logger, tr transport) *Producer {
	codec, _ := compression(cfg.Compression)
	return &Producer{
		tr:       tr,
		balancer: balancer,
		codec:    codec,
		cfg:      cfg,
		log:      log,
		warn:     logging.NewLimiter(10*time.Second, 3), // a broker outage: 3 retry warnings per 10 s, with the count suppressed
		topics:   map[string]*topicInfo{},
		known:    map[string]*topicInfo{},
		pinned:   map[string]int{},
		pid:      -1,
		epoch:    -1,
		seqs:     map[tp]*partSeq{},
		txn:      newTxnState(cfg),
	}
}

// SetPace makes the Producer hold the wake-ups of its produce answers
// while the source pauses (p: the rawconn.Pace the binlog reader tells
// of its linger pauses): an answer arriving in a pause is read in the
// wake-up that ends it, not in one of its own. Only the acknowledgement
// waits, at most one pause; the records were appended when the broker
// answered. Not in exactly-once mode, whose commit, and so what a
// read_committed consumer sees, follows the answers. Call it before the
// first WriteMessages.
func (c *Producer) SetPace(p Pacer) {
	if cl, ok := c.tr.(*cluster); ok && c.txn == nil {
		cl.pace = p
	}
}

// MaxInFlight returns how many rounds may be in flight at once:
// MaxInFlight with idempotence (exactly-once: inside the one open
// transaction, txn.go), else 1.
func (c *Producer) MaxInFlight() int {
	if c.cfg.Idempotent {
		return MaxInFlight
	}
	return 1
}

// Pin records the partition count each topic had when the publisher
// started (stored with the checkpoint). WriteMessages refuses, with a
// *PartitionCountError, to produce to a topic whose count differs from
// its pinned one; a topic not pinned is pinned at its first use. Call it
// before the first WriteMessages.
func (c *Producer) Pin(counts map[string]int) {
	c.pinMu.Lock()
	defer c.pinMu.Unlock()
	for t, n := range counts {
		c.pinned[t] = n
	}
}

// Pinned returns a copy of the pinned partition counts: those given to
// Pin and those of the topics written since, at their first use. Safe
// for concurrent use.
func (c *Producer) Pinned() map[string]int {
	c.pinMu.Lock()
	defer c.pinMu.Unlock()
	return maps.Clone(c.pinned)
}

// pinnedCount returns len(Pinned()) without copying the map.
func (c *Producer) pinnedCount() int {
	c.pinMu.Lock()
	defer c.pinMu.Unlock()
	return len(c.pinned)
}

// Close closes the Producer's connections; rounds in flight are abandoned.
func (c *Producer) Close() error {
	c.closeTxn()
	c.tr.close()
	c.inflight = nil
	return nil
}

// WriteMessages produces msgs (each msg.Topic set; Partition is ignored,
// the balancer picks it from the key) and returns when every record was
// acknowledged by all in-sync replicas (nil), or after the last attempt:
// then a kafka.WriteErrors with one entry per record (nil for those
// acknowledged), or, when the metadata of a topic cannot be had (an
// unknown topic without auto-creation, no broker reachable), that error.
// No round may be in flight (Begin without Wait).
func (c *Producer) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if c.txn != nil {
		return c.writeTxn(ctx, msgs) // txn.go: a transaction of its own (the Writer's rounds: Begin, Commit)
	}
	r, err := c.Begin(ctx, msgs)
	if err != nil {
		return err
	}
	return c.Wait(ctx, r)
}

// Begin sends msgs as a round and returns without waiting for the
// answers; Wait returns its outcome. Rounds must be waited in the order
// they were begun, and at most MaxInFlight() may be in flight. msgs must
// not change until Wait returns. The errors are WriteMessages's that come
// before anything is sent (metadata, a changed partition count, an
// encoding failure, a producer id that cannot be had).
func (c *Producer) Begin(ctx context.Context, msgs []kafka.Message) (*Round, error) {
	if len(c.inflight) >= c.MaxInFlight() {
		return nil, fmt.Errorf("sink: %d rounds in flight already", len(c.inflight))
	}
	if c.broken != nil {
		return nil, c.broken
	}
	r := &Round{msgs: msgs, parts: map[tp]*batch{}}
	// A topic's metadata may be missing for a moment (auto-created,
	// leader elections, a broker restarting): retried like a produce.
	began := time.Now()
	for attempt := 1; ; attempt++ {
		err := c.assign(ctx, r)
		if err == nil {
			break
		}
		if errors.Is(err, ErrPartitionCount) || !retriable(err) || c.exhausted(attempt, began) || ctx.Err() != nil {
			return nil, err
		}
		r = &Round{msgs: msgs, parts: map[tp]*batch{}}
		clear(c.topics)
		creating := c.cfg.AllowAutoTopicCreation && errors.Is(err, kafka.UnknownTopicOrPartition) && attempt == 1
		if creating {
			// The broker creates the topic on this first request.
			c.log.Info("waiting for the broker to create the topic (kafka.allow-auto-topic-creation)", zap.String("topic", msgs[0].Topic))
		}
		c.backoff(ctx, attempt, !creating, "topic metadata unavailable; retrying", zap.String("topic", msgs[0].Topic), zap.Error(err))
	}
	clear(c.topics)
	if c.cfg.Idempotent && !c.haveID {
		if err := c.initID(ctx, false); err != nil {
			return nil, err
		}
	}
	now := time.Now().UnixMilli()
	for _, b := range r.batches {
		var err error
		if b.raw, err = appendBatch(c.spare.take(batchCap(msgs, b.idx)), msgs, b.idx, now, c.codec); err != nil {
			return nil, fmt.Errorf("encode the batch of %s/%d: %w", b.topic, b.partition, err)
		}
		if c.txn != nil {
			markTransactional(b.raw)
		}
	}
	if c.txn != nil {
		if err := c.txnAdd(ctx, r); err != nil { // txn.go: before any batch is sent
			return nil, err
		}
	}
	// Nothing fails from here on: the sequences are taken.
	send := make([]*batch, 0, len(r.batches))
	for _, b := range r.batches {
		b.seq = -1
		if c.cfg.Idempotent {
			ps := c.seqs[b.tp]
			if ps == nil {
				ps = &partSeq{}
				c.seqs[b.tp] = ps
			}
			if !overtake(len(ps.unacked), ps.acked, time.Now()) {
				b.held, b.err = true, fmt.Errorf("%s/%d: %w", b.topic, b.partition, errHeld)
			}
			b.seq = ps.next
			ps.next = nextSequence(ps.next, int32(len(b.idx)))
			ps.unacked = append(ps.unacked, b)
			stampBatch(b.raw, c.pid, c.epoch, b.seq)
		}
		if !b.held {
			send = append(send, b)
		}
	}
	c.send(ctx, r, send)
	c.inflight = append(c.inflight, r)
	return r, nil
}

// initID gets a producer id and epoch, retrying like a produce. With bump
// it asks for the next epoch of the current id (KIP-360), falling back to
// a new id when the broker refuses.
func (c *Producer) initID(ctx context.Context, bump bool) error {
	if c.txn != nil {
		return c.txnInit(ctx) // txn.go: from the transaction coordinator
	}
	pid, epoch := int64(-1), int16(-1)
	if bump && c.haveID {
		pid, epoch = c.pid, c.epoch
	}
	began := time.Now()
	for attempt := 1; ; attempt++ {
		npid, nepoch, err := c.tr.initProducerID(ctx, pid, epoch)
		if err == nil {
			c.pid, c.epoch, c.haveID = npid, nepoch, true
			c.log.Debug("producer id", zap.Int64("producer_id", npid), zap.Int16("producer_epoch", nepoch))
			return nil
		}
		if pid >= 0 {
			// No bump (an older broker, or the id expired): a new id.
			pid, epoch = -1, -1
			continue
		}
		if !retriable(err) || c.exhausted(attempt, began) || ctx.Err() != nil {
			return err
		}
		c.backoff(ctx, attempt, true, "init producer id failed; retrying", zap.Error(err))
	}
}

// Wait returns the outcome of round r (the oldest in flight) once every
// batch was acknowledged (nil) or given up (a kafka.WriteErrors with one
// entry per record, nil for those acknowledged), retrying what failed.
// On return r is no longer in flight, whatever the outcome.
func (c *Producer) Wait(ctx context.Context, r *Round) error {
	if len(c.inflight) == 0 || c.inflight[0] != r {
		return errors.New("sink: Wait out of order")
	}
	defer func() { c.inflight = c.inflight[1:] }()
	for {
		c.collect(ctx, r)
		if c.broken != nil {
			return c.fail(r, c.broken)
		}
		var again []*batch
		var sample *partData
		reset, drain, wait := false, false, false
		for _, b := range r.batches {
			if b.done || b.final {
				continue
			}
			switch classifyBatch(b.err, !b.behind, c.txn != nil) {
			case outAcked:
				c.acked(b)
				continue
			case outReset:
				reset, drain = true, true
			case outRetryNow:
			case outRetry:
				wait = true
			case outFail:
				b.final, drain = true, true
				continue
			}
			if c.exhausted(b.attempts, b.first) || ctx.Err() != nil {
				b.final, drain = true, true
				continue
			}
			if sample == nil {
				sample = &partData{tp: b.tp, err: b.err}
			}
			again = append(again, b)
		}
		if drain {
			// Act on a settled state: every later round answered.
			for _, later := range c.inflight[1:] {
				c.collect(ctx, later)
			}
			// A later batch's acknowledgement may have settled one of
			// these (acked): never send it again.
			again = slices.DeleteFunc(again, func(b *batch) bool { return b.done || b.final })
		}
		if reset {
			if err := c.reset(ctx); err != nil {
				return c.fail(r, err)
			}
		}
		if drain {
			for _, b := range r.batches {
				if b.final {
					c.giveUp(b)
				}
			}
			if c.broken != nil {
				return c.fail(r, c.broken)
			}
		}
		if len(again) == 0 {
			c.release(ctx)
			err := c.result(r)
			if err == nil && c.txn == nil {
				c.spare.recycle(r) // every batch acknowledged: nothing sends or stamps them again
			}
			return err
		}
		if wait {
			failed := len(again)
			c.backoff(ctx, again[0].attempts, true, "produce failed; retrying", zap.String("topic", sample.topic), zap.Int32("partition", sample.partition),
				zap.Int("partitions_failed", failed), zap.Error(sample.err))
		}
		// Leaders may have moved: route the failed batches again. A
		// lookup that fails (no broker answers metadata) is an attempt of
		// each batch, so that max-attempts and delivery-timeout end the
		// retries (before, only a send counted: with every broker down the
		// batch was retried at attempt 1 for ever, /readyz ready).
		if err := c.leaders(ctx, again); err != nil {
			for _, b := range again {
				b.err = err
				b.attempts++
			}
			continue
		}
		c.send(ctx, r, again)
	}
}

// partData names a failed batch in a retry warning.
type partData struct {
	tp
	err error
}

// collect applies the answers of r's requests not yet applied, waiting
// for them (a request's deadline bounds the wait).
func (c *Producer) collect(ctx context.Context, r *Round) {
	for _, q := range r.reqs {
		if q.seen || q.p == nil {
			continue
		}
		q.seen = true
		res, err := c.await(ctx, q)
		if err == nil {
			pr, ok := res.(*produceAPI.Response)
			if !ok {
				err = fmt.Errorf("unexpected produce response %T", res)
			} else {
				c.answer(r, q, pr)
				continue
			}
		}
		// No answer: the batches may or may not have been written.
		c.tr.stale()
		for _, b := range q.batches {
			b.err, b.unknown = err, true
		}
	}
}

// leaderCheck is how long a produce request may go unanswered before
// the Producer asks the cluster, every leaderCheck, whether the leader of
// its partitions moved. A paused or partitioned leader keeps its TCP
// connection open and never answers; Kafka fences it after
// broker.session.timeout.ms (9 s by default) and elects new leaders, and
// the Producer follows them then rather than at the request's deadline
// (write-timeout).
const leaderCheck = time.Second

// await waits for q's answer. While it is missing, the Producer checks
// every leaderCheck whether the leader of one of q's partitions moved
// (fresh metadata, from any live broker); then it abandons the old
// leader's connection and returns errLeaderMoved: the batches' outcome is
// unknown and they are sent again to the new leader (with idempotence
// the broker discards a copy it already has).
func (c *Producer) await(ctx context.Context, q *request) (protocol.Message, error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, leaderCheck)
		res, err := q.p.wait(wctx)
		expired := wctx.Err() != nil
		cancel()
		if err == nil || ctx.Err() != nil || !expired {
			return res, err
		}
		if leader := q.batches[0].leader; c.moved(ctx, q.batches) {
			c.tr.abandon(leader)
			return nil, fmt.Errorf("broker %d: %w", leader, errLeaderMoved)
		}
	}
}

// moved reports whether fresh metadata names another leader for one of
// bs's partitions. A metadata failure reports false (the request's own
// deadline still bounds the wait).
func (c *Producer) moved(ctx context.Context, bs []*batch) bool {
	seen := map[string]*metadataAPI.ResponseTopic{}
	for _, b := range bs {
		meta, ok := seen[b.topic]
		if !ok {
			mctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
			var err error
			meta, err = c.tr.metadata(mctx, b.topic, true)
			cancel()
			if err != nil {
				return false
			}
			seen[b.topic] = meta
		}
		if l := leaderOf(meta, b.partition); l >= 0 && l != b.leader {
			return true
		}
	}
	return false
}

// errLeaderMoved: a produce request abandoned unanswered because its
// partition's leader moved or its broker left the cluster's metadata (the
// old one paused, cut off, fenced). Its outcome is unknown; it is retried.
var errLeaderMoved = errors.New("the partition's leader moved, or its broker left the cluster, while the request was in flight")

// answer records each partition's outcome of a produce response. A
// batch's unknown stays set across a definite refusal of a later attempt
// (NOT_LEADER_OR_FOLLOWER after a timeout): the earlier attempt may still
// have been written; only an acknowledgement clears it.
func (c *Producer) answer(r *Round, q *request, res *produceAPI.Response) {
	answered := make([]bool, len(q.batches))
	for _, t := range res.Topics {
		for _, rp := range t.Partitions {
			b := r.parts[tp{t.Topic, rp.Partition}]
			i := slices.Index(q.batches, b)
			if b == nil || i < 0 {
				continue
			}
			answered[i] = true
			if rp.ErrorCode == 0 {
				b.err = nil
				c.acked(b)
				continue
			}
			ke := kafka.Error(rp.ErrorCode)
			b.err = fmt.Errorf("%s/%d: %w", b.topic, b.partition, ke)
			switch ke {
			case kafka.RequestTimedOut, kafka.NotEnoughReplicasAfterAppend:
				// Appended to the leader's log, not yet replicated.
				b.unknown = true
			case kafka.NotLeaderForPartition, kafka.LeaderNotAvailable, kafka.UnknownTopicOrPartition, kafka.FencedLeaderEpoch, kafka.KafkaStorageError:
				c.tr.stale()
			}
		}
	}
	for i, b := range q.batches {
		if !answered[i] && !b.done {
			b.err, b.unknown = fmt.Errorf("%s/%d: %w", b.topic, b.partition, errNoAnswer), true
		}
	}
}

// release sends the held batches of the rounds in flight whose partition
// may now be overtaken (overtake: a batch of it was acknowledged under the
// current epoch, so the broker refuses a batch out of sequence), in
// order, so that pipelining resumes after a partition's first batch.
func (c *Producer) release(ctx context.Context) {
	now := time.Now()
	for _, r := range c.inflight[1:] {
		var bs []*batch
		for _, b := range r.batches {
			if !b.held || b.done || b.final {
				continue
			}
			if ps := c.seqs[b.tp]; ps != nil && overtake(slices.Index(ps.unacked, b), ps.acked, now) {
				b.held = false
				bs = append(bs, b)
			}
		}
		if len(bs) > 0 {
			// Leaders may have moved since the round began (a paused
			// one abandoned); when the lookup fails they go to the
			// leaders they had and a refusal routes them again.
			_ = c.leaders(ctx, bs)
			c.send(ctx, r, bs)
		}
	}
}

// head reports whether b is its partition's oldest batch not acknowledged.
func (c *Producer) head(b *batch) bool {
	ps := c.seqs[b.tp]
	return ps == nil || len(ps.unacked) == 0 || ps.unacked[0] == b
}

// acked marks b acknowledged, with every batch of its partition before it:
// the broker writes a producer's batches of a partition only in sequence
// order once it holds the producer's state there, so those were written
// too (their answers were lost). That holds because a batch is sent ahead
// of an unacknowledged one only once the partition has that state
// (overtake); before, a broker (Kafka 2.5 to 4.4) writes a producer it
// has no state of at any sequence, and b may have overtaken them.
func (c *Producer) acked(b *batch) {
	b.done, b.err, b.unknown, b.held = true, nil, false, false
	ps := c.seqs[b.tp]
	if ps == nil {
		return
	}
	ps.acked = time.Now()
	i := slices.Index(ps.unacked, b)
	for _, e := range ps.unacked[:i+1] {
		e.done, e.err, e.unknown, e.held = true, nil, false, false
	}
	ps.unacked = slices.Delete(ps.unacked, 0, i+1)
}

// giveUp removes final batch b from its partition's sequence. When b was
// surely not written, nothing after it can have been (the broker needs
// b's sequence first): the later batches of its partition fail too and the
// partition's sequence goes back to b's. When b may have been written,
// the order of what follows can no longer be vouched for: the Producer
// breaks (every later round fails; the pipeline restarts).
func (c *Producer) giveUp(b *batch) {
	ps := c.seqs[b.tp]
	if ps == nil {
		return
	}
	i := slices.Index(ps.unacked, b)
	if i < 0 {
		return
	}
	if b.unknown || i > 0 {
		c.broken = fmt.Errorf("sink: %s/%d: a batch given up may have been written (%w); later batches can no longer be ordered after it", b.topic, b.partition, b.err)
		return
	}
	for _, e := range ps.unacked[1:] {
		e.final, e.err = true, fmt.Errorf("%s/%d: %w: %v", e.topic, e.partition, errEarlierFailed, b.err)
	}
	ps.next = b.seq
	ps.unacked = ps.unacked[:0]
}

// errEarlierFailed: a batch not sent again because an earlier batch of
// its partition failed for good.
var errEarlierFailed = errors.New("an earlier batch of the partition failed")

// reset gets the producer a new epoch (KIP-360) after the broker lost or
// refused its state (UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH, or a
// sequence gap no retry explains) and numbers the batches not yet
// acknowledged from 0 again, in order, under the new epoch. That is safe
// only if none of them may have been written: otherwise the Producer
// breaks (the pipeline restarts at the last checkpoint).
func (c *Producer) reset(ctx context.Context) error {
	for _, ps := range c.seqs {
		for _, b := range ps.unacked {
			if b.unknown {
				c.haveID = false
				c.broken = fmt.Errorf("sink: producer state lost by the broker with a batch of %s/%d of unknown outcome (%w); restarting from the checkpoint", b.topic, b.partition, b.err)
				return c.broken
			}
		}
	}
	if err := c.initID(ctx, true); err != nil {
		c.haveID = false
		c.broken = fmt.Errorf("sink: new producer epoch: %w", err)
		return c.broken
	}
	c.log.Warn("producer state reset by the broker; new producer epoch", zap.Int64("producer_id", c.pid), zap.Int16("producer_epoch", c.epoch))
	for _, ps := range c.seqs {
		// The broker may hold no state of the new epoch on the partition:
		// no batch overtakes another until one is acknowledged.
		ps.next, ps.acked = 0, time.Time{}
		for _, b := range ps.unacked {
			b.seq = ps.next
			ps.next = nextSequence(ps.next, int32(len(b.idx)))
			stampBatch(b.raw, c.pid, c.epoch, b.seq)
		}
	}
	return nil
}

// fail ends round r with err for every record not acknowledged.
func (c *Producer) fail(r *Round, err error) error {
	werrs := make(kafka.WriteErrors, len(r.msgs))
	for _, b := range r.batches {
		if b.done {
			continue
		}
		for _, i := range b.idx {
			werrs[i] = fmt.Errorf("%w (%s/%d: %v)", err, b.topic, b.partition, b.err)
		}
	}
	return werrs
}

// result is r's outcome once no batch is to be resent.
func (c *Producer) result(r *Round) error {
	werrs := make(kafka.WriteErrors, len(r.msgs))
	failed := false
	for _, b := range r.batches {
		if b.done {
			continue
		}
		failed = true
		for _, i := range b.idx {
			werrs[i] = b.err
		}
	}
	if !failed {
		return nil
	}
	return werrs
}

// exhausted reports whether a retriable failure after attempts tries, the
// first at first, is to be given up: Config.MaxAttempts tries made and
// Config.DeliveryTimeout passed.
func (c *Producer) exhausted(attempts int, first time.Time) bool {
	return attempts >= c.cfg.MaxAttempts && time.Since(first) >= c.cfg.DeliveryTimeout
}

// backoff waits backoffDelay(attempt) (or until ctx is done),
// logging msg as a warning (rate-limited) with fields when warn is set.
func (c *Producer) backoff(ctx context.Context, attempt int, warn bool, msg string, fields ...zap.Field) {
	delay := backoffDelay(attempt)
	if warn {
		if ok, suppressed := c.warn.Allow(time.Now()); ok {
			// Retries end once both max_attempts were made and
			// delivery_timeout passed since the first (exhausted): an
			// attempt past max_attempts is no error.
			c.log.Warn(msg, append(fields, zap.Int("attempt", attempt), zap.Int("max_attempts", c.cfg.MaxAttempts),
				zap.Duration("delivery_timeout", c.cfg.DeliveryTimeout), zap.Duration("backoff", delay), zap.Int("suppressed", suppressed))...)
		}
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// assign maps each record of r to its partition (and the partition's leader).
func (c *Producer) assign(ctx context.Context, r *Round) error {
	var topic string
	var t *topicInfo
	for i := range r.msgs {
		m := &r.msgs[i]
		if t == nil || m.Topic != topic {
			var err error
			if t, err = c.topic(ctx, m.Topic); err != nil {
				return err
			}
			topic = m.Topic
		}
		k := tp{m.Topic, int32(c.balancer.Balance(*m, t.ids...))}
		b := r.parts[k]
		if b == nil {
			b = &batch{tp: k, leader: leaderOf(t.meta, k.partition)}
			r.parts[k] = b
			r.batches = append(r.batches, b)
		}
		b.idx = append(b.idx, int32(i))
	}
	return nil
}

// topicInfo is a topic's metadata for the current round.
type topicInfo struct {
	meta *metadataAPI.ResponseTopic
	ids  []int // partition ids, sorted, as the balancer takes them
}

// topic returns topic's metadata, looked up once per round (c.topics),
// after checking its partition count against the pinned one (pinning it
// at its first use).
func (c *Producer) topic(ctx context.Context, topic string) (*topicInfo, error) {
	if t := c.topics[topic]; t != nil {
		return t, nil
	}
	meta, err := c.metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	if t := c.known[topic]; t != nil && t.meta == meta {
		c.topics[topic] = t // the same cached metadata: checked and sorted already
		return t, nil
	}
	t := &topicInfo{meta: meta, ids: make([]int, 0, len(meta.Partitions))}
	for _, p := range meta.Partitions {
		t.ids = append(t.ids, int(p.PartitionIndex))
	}
	slices.Sort(t.ids)
	c.pinMu.Lock()
	n, ok := c.pinned[topic]
	if !ok {
		c.pinned[topic] = len(t.ids)
	}
	c.pinMu.Unlock()
	if ok && n != len(t.ids) {
		return nil, &PartitionCountError{Topic: topic, Pinned: n, Now: len(t.ids)}
	}
	c.topics[topic] = t
	c.known[topic] = t
	return t, nil
}

// leaderOf returns the leader of partition in meta, or -1.
func leaderOf(meta *metadataAPI.ResponseTopic, partition int32) int32 {
	for _, mp := range meta.Partitions {
		if mp.PartitionIndex == partition {
			return mp.LeaderID
		}
	}
	return -1
}

// leaders looks up again the leader of each batch of bs (fresh metadata
// when an error dropped the cached one).
func (c *Producer) leaders(ctx context.Context, bs []*batch) error {
	defer clear(c.topics)
	for _, b := range bs {
		t, err := c.topic(ctx, b.topic)
		if err != nil {
			return err
		}
		b.leader = leaderOf(t.meta, b.partition)
	}
	return nil
}

// metadata returns topic's partitions (the cluster's cached view, which
// errors drop).
func (c *Producer) metadata(ctx context.Context, topic string) (*metadataAPI.ResponseTopic, error) {
	if mc, ok := c.tr.(metadataCache); ok {
		if t := mc.cached(topic); t != nil {
			return t, nil // no request: no deadline to set
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
	defer cancel()
	return c.tr.metadata(ctx, topic, false)
}

// send sends bs, batches of r, one request per leader, without waiting
// for the answers (collect applies them).
func (c *Producer) send(ctx context.Context, r *Round, bs []*batch) {
	r.reqs = slices.DeleteFunc(r.reqs, func(q *request) bool { return q.seen || q.p == nil })
	var groups [][]*batch
	for _, b := range bs {
		if b.attempts == 0 {
			b.first = time.Now()
		}
		b.attempts++
		b.held = false
		b.behind = !c.head(b)
		if b.leader < 0 {
			b.err = fmt.Errorf("%s/%d: %w", b.topic, b.partition, kafka.LeaderNotAvailable)
			c.tr.stale()
			continue
		}
		at := slices.IndexFunc(groups, func(g []*batch) bool { return g[0].leader == b.leader })
		if at < 0 {
			groups = append(groups, nil)
			at = len(groups) - 1
		}
		groups[at] = append(groups[at], b)
	}
	for _, g := range groups {
		req := &rawproduce.Request{TransactionalID: c.txnID(), Acks: int16(kafka.RequireAll), Timeout: int32(c.cfg.WriteTimeout / time.Millisecond)}
		for _, b := range g {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != b.topic {
				req.Topics = append(req.Topics, rawproduce.RequestTopic{Topic: b.topic})
			}
			t := &req.Topics[len(req.Topics)-1]
			t.Partitions = append(t.Partitions, rawproduce.RequestPartition{Partition: b.partition,
				RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(b.raw)}})
		}
		p, err := c.tr.produce(ctx, g[0].leader, req)
		if err != nil {
			// Not sent (a broker receives a request whole or not at all).
			for _, b := range g {
				b.err = err
			}
			continue
		}
		r.reqs = append(r.reqs, &request{batches: g, p: p})
		if c.obs != nil {
			n := 0
			for _, b := range g {
				n += len(b.idx)
			}
			c.obs.Requested(n)
		}
	}
}

// errNoAnswer: a produce response without the partition's result. Its
// outcome is unknown, so the batch is sent again (at-least-once).
var errNoAnswer = errors.New("no answer for the partition in the produce response")

// errHeld: a batch not sent yet, waiting for an earlier batch of its
// partition (overtake); sent at the latest when its round is waited for.
var errHeld = errors.New("held back until an earlier batch of the partition is acknowledged")

// retriable reports whether a failed batch may be sent again: a broker
// error Kafka marks retriable, a partition left unanswered, or a dropped
// connection or timeout.
func retriable(err error) bool {
	if errors.Is(err, errNoAnswer) || errors.Is(err, errLeaderMoved) {
		return true
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke.Temporary()
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded)
}
