package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"go.uber.org/zap"
)

// Producer is the Kafka producer of the Writer and of dead-letter
// republish. WriteMessages sends its records as one Produce request
// (acks=all; Produce API v3 to v8, so Kafka 0.11 or later) per partition
// leader, each partition's records as one record batch (magic 2, KIP-98)
// that the Producer encodes itself (appendBatch). kafka-go's Transport
// owns the connections, the API version negotiation and the cluster
// metadata that routes a request to the leader.
//
// A partition's batch that fails with a retriable error (a kafka.Error
// whose Temporary() is true, a dropped connection or a timeout) is sent
// again, as the same bytes, up to Config.MaxAttempts times in all, with a
// backoff of 100 ms × attempt² up to 2 s; batches that succeeded are not
// resent. WriteMessages returns only when every batch was acknowledged or
// given up, so a caller that waits for it before the next call never has
// two batches of a partition in flight, and a failed batch is never
// overtaken by a later one.
//
// Compared with kafka.Writer it keeps the same partitioner contract and
// reports failures the same way (kafka.WriteErrors, one entry per
// record), but encodes each record once, without kafka-go's per-record
// interfaces, per-record metadata lookup and page buffer copies (bench:
// kafka-go's Writer was ~45 % of the publisher's CPU in a drain; CPU per
// 10,000 events drained went from 0.075 to 0.030 s).
type Producer struct {
	tr        *kafka.Transport
	rt        kafka.RoundTripper // tr; a fake in tests
	bootstrap net.Addr
	balancer  kafka.Balancer
	codec     compress.Codec
	cfg       Config
	log       *zap.Logger
	warn      *logging.Limiter

	pinMu  sync.Mutex
	pinned map[string]int // partition count of each topic seen (Pin, or first use)

	buf    []byte                // encoded batches of the current round
	parts  map[tp]*partData      // the current round's partitions
	topics map[string]*topicInfo // the current round's topics
	order  []*partData           // in order of first record
	free   []*partData
}

type tp struct {
	topic     string
	partition int32
}

type partData struct {
	tp
	leader int32
	idx    []int32 // indexes into the round's records, in order
	raw    []byte  // encoded batch (into Producer.buf)
	err    error   // the last attempt's error, nil once acknowledged
	done   bool    // acknowledged
	final  bool    // failed with an error that is not retriable: not resent
}

// NewProducer returns a Producer for a validated Config. balancer must be
// the partitioner every producer of these topics uses (router.Balancer()).
func NewProducer(cfg Config, balancer kafka.Balancer, log *zap.Logger) *Producer {
	codec, _ := compression(cfg.Compression)
	tr := NewTransport(cfg) // security.go: kafka.tls, kafka.sasl
	// How stale the leader of a partition may be in kafka-go's
	// cluster view (it refreshes on this period): a moved leader
	// is a retriable NOT_LEADER_OR_FOLLOWER until then.
	tr.MetadataTTL = 2 * time.Second
	return &Producer{
		tr:        tr,
		rt:        tr,
		bootstrap: kafka.TCP(cfg.Brokers...),
		balancer:  balancer,
		codec:     codec,
		cfg:       cfg,
		log:       log,
		warn:      logging.NewLimiter(time.Second, 5),
		parts:     map[tp]*partData{},
		topics:    map[string]*topicInfo{},
		pinned:    map[string]int{},
	}
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

// Close closes the Producer's connections.
func (c *Producer) Close() error {
	c.tr.CloseIdleConnections()
	return nil
}

// WriteMessages produces msgs (each msg.Topic set; Partition is ignored,
// the balancer picks it from the key) and returns when every record was
// acknowledged by all in-sync replicas (nil), or after the last attempt:
// then a kafka.WriteErrors with one entry per record (nil for those
// acknowledged), or, when the metadata of a topic cannot be had (an
// unknown topic without auto-creation, no broker reachable), that error.
func (c *Producer) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	defer c.reset()
	// A topic's metadata may be missing for a moment (auto-created,
	// leader elections, a broker restarting): retried like a produce.
	for attempt := 1; ; attempt++ {
		err := c.assign(ctx, msgs)
		if err == nil {
			break
		}
		if errors.Is(err, ErrPartitionCount) || !retriable(err) || attempt >= c.cfg.MaxAttempts || ctx.Err() != nil {
			return err
		}
		c.reset()
		creating := c.cfg.AllowAutoTopicCreation && errors.Is(err, kafka.UnknownTopicOrPartition) && attempt == 1
		if creating {
			// The broker creates the topic on this first request.
			c.log.Info("waiting for the broker to create the topic (kafka.allow-auto-topic-creation)", zap.String("topic", msgs[0].Topic))
		}
		c.backoff(ctx, attempt, !creating, "topic metadata unavailable; retrying", zap.String("topic", msgs[0].Topic), zap.Error(err))
	}
	now := time.Now().UnixMilli()
	c.buf = c.buf[:0]
	ends := make([]int, len(c.order))
	for i, p := range c.order {
		var err error
		if c.buf, err = appendBatch(c.buf, msgs, p.idx, now, c.codec); err != nil {
			return fmt.Errorf("encode the batch of %s/%d: %w", p.topic, p.partition, err)
		}
		ends[i] = len(c.buf)
	}
	for i, p := range c.order {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		p.raw = c.buf[start:ends[i]:ends[i]]
	}

	for attempt := 1; ; attempt++ {
		c.send(ctx)
		failed, retry := 0, false
		var sample *partData
		for _, p := range c.order {
			if p.done {
				continue
			}
			failed++
			if !retriable(p.err) {
				p.final = true
			} else if !p.final {
				retry = true
				if sample == nil {
					sample = p
				}
			}
		}
		if failed == 0 {
			return nil
		}
		if !retry || attempt >= c.cfg.MaxAttempts || ctx.Err() != nil {
			break
		}
		c.backoff(ctx, attempt, true, "produce failed; retrying", zap.String("topic", sample.topic), zap.Int32("partition", sample.partition),
			zap.Int("partitions_failed", failed), zap.Error(sample.err))
		// Leaders may have moved: route the failed batches again.
		if err := c.leaders(ctx); err != nil {
			for _, p := range c.order {
				if !p.done && !p.final {
					p.err = err
				}
			}
		}
	}
	werrs := make(kafka.WriteErrors, len(msgs))
	for _, p := range c.order {
		if p.done {
			continue
		}
		for _, i := range p.idx {
			werrs[i] = p.err
		}
	}
	return werrs
}

// backoff waits 100 ms × attempt², at most 2 s (or until ctx is done),
// logging msg as a warning (rate-limited) with fields when warn is set.
func (c *Producer) backoff(ctx context.Context, attempt int, warn bool, msg string, fields ...zap.Field) {
	delay := min(time.Duration(attempt*attempt)*100*time.Millisecond, 2*time.Second)
	if warn {
		if ok, suppressed := c.warn.Allow(time.Now()); ok {
			c.log.Warn(msg, append(fields, zap.Int("attempt", attempt), zap.Int("max_attempts", c.cfg.MaxAttempts),
				zap.Duration("backoff", delay), zap.Int("suppressed", suppressed))...)
		}
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// assign maps each record to its partition (and the partition's leader).
func (c *Producer) assign(ctx context.Context, msgs []kafka.Message) error {
	var topic string
	var t *topicInfo
	for i := range msgs {
		m := &msgs[i]
		if t == nil || m.Topic != topic {
			var err error
			if t, err = c.topic(ctx, m.Topic); err != nil {
				return err
			}
			topic = m.Topic
		}
		k := tp{m.Topic, int32(c.balancer.Balance(*m, t.ids...))}
		p := c.parts[k]
		if p == nil {
			p = c.part(k)
			p.leader = leaderOf(t.meta, k.partition)
		}
		p.idx = append(p.idx, int32(i))
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

func (c *Producer) part(k tp) *partData {
	var p *partData
	if n := len(c.free); n > 0 {
		p, c.free = c.free[n-1], c.free[:n-1]
	} else {
		p = &partData{}
	}
	p.tp = k
	c.parts[k] = p
	c.order = append(c.order, p)
	return p
}

func (c *Producer) reset() {
	for _, p := range c.order {
		*p = partData{idx: p.idx[:0]}
		c.free = append(c.free, p)
	}
	clear(c.parts)
	clear(c.topics)
	c.order = c.order[:0]
}

// leaders looks up again the leader of each partition not yet
// acknowledged (fresh metadata: leaders may have moved).
func (c *Producer) leaders(ctx context.Context) error {
	clear(c.topics)
	for _, p := range c.order {
		if p.done || p.final {
			continue
		}
		t, err := c.topic(ctx, p.topic)
		if err != nil {
			return err
		}
		p.leader = leaderOf(t.meta, p.partition)
	}
	return nil
}

// metadata returns topic's partitions, from kafka-go's cached cluster view
// (the same view that routes the produce requests).
func (c *Producer) metadata(ctx context.Context, topic string) (*metadataAPI.ResponseTopic, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
	defer cancel()
	res, err := c.rt.RoundTrip(ctx, c.bootstrap, &metadataAPI.Request{TopicNames: []string{topic}, AllowAutoTopicCreation: c.cfg.AllowAutoTopicCreation})
	if err != nil {
		return nil, fmt.Errorf("metadata of topic %s: %w", topic, err)
	}
	for i := range res.(*metadataAPI.Response).Topics {
		t := &res.(*metadataAPI.Response).Topics[i]
		if t.Name != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("metadata of topic %s: %w", topic, kafka.Error(t.ErrorCode))
		}
		if len(t.Partitions) == 0 {
			return nil, fmt.Errorf("metadata of topic %s: %w", topic, kafka.LeaderNotAvailable)
		}
		return t, nil
	}
	return nil, fmt.Errorf("metadata of topic %s: %w", topic, kafka.UnknownTopicOrPartition)
}

// send sends every batch not yet acknowledged, one request per leader,
// concurrently, and records each partition's outcome.
func (c *Producer) send(ctx context.Context) {
	var groups [][]*partData
	for _, p := range c.order {
		if p.done || p.final {
			continue
		}
		if p.leader < 0 {
			p.err = fmt.Errorf("%s/%d: %w", p.topic, p.partition, kafka.LeaderNotAvailable)
			continue
		}
		at := slices.IndexFunc(groups, func(g []*partData) bool { return g[0].leader == p.leader })
		if at < 0 {
			groups = append(groups, nil)
			at = len(groups) - 1
		}
		groups[at] = append(groups[at], p)
	}
	if len(groups) == 1 {
		c.produce(ctx, groups[0])
		return
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Go(func() { c.produce(ctx, g) })
	}
	wg.Wait()
}

// produce sends one Produce request with the batches of parts, which share
// a leader, and records each partition's outcome.
func (c *Producer) produce(ctx context.Context, parts []*partData) {
	req := &rawproduce.Request{Acks: int16(kafka.RequireAll), Timeout: int32(c.cfg.WriteTimeout / time.Millisecond)}
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
			req.Topics = append(req.Topics, rawproduce.RequestTopic{Topic: p.topic})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, rawproduce.RequestPartition{Partition: p.partition,
			RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(p.raw)}})
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout+time.Second)
	defer cancel()
	res, err := c.rt.RoundTrip(ctx, c.bootstrap, req)
	if err == nil {
		r, ok := res.(*produceAPI.Response)
		if !ok {
			err = fmt.Errorf("unexpected produce response %T", res)
		} else {
			for _, p := range parts {
				p.err = fmt.Errorf("%s/%d: %w", p.topic, p.partition, errNoAnswer)
			}
			for _, t := range r.Topics {
				for _, rp := range t.Partitions {
					p := c.parts[tp{t.Topic, rp.Partition}]
					if p == nil {
						continue
					}
					if rp.ErrorCode == 0 {
						p.err, p.done = nil, true
					} else {
						p.err = kafka.Error(rp.ErrorCode)
					}
				}
			}
			return
		}
	}
	var rpe *rawproduce.Error
	if errors.As(err, &rpe) {
		// The cluster view changed under the routing (a leader moved):
		// a retriable error.
		err = fmt.Errorf("%w: %v", kafka.NotLeaderForPartition, rpe.Err)
	}
	for _, p := range parts {
		p.err = err
	}
}

// errNoAnswer: a produce response without the partition's result. Its
// outcome is unknown, so the batch is sent again (at-least-once).
var errNoAnswer = errors.New("no answer for the partition in the produce response")

// retriable reports whether a failed batch may be sent again: a broker
// error Kafka marks retriable, a partition left unanswered, or a dropped
// connection or timeout.
func retriable(err error) bool {
	if errors.Is(err, errNoAnswer) {
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
