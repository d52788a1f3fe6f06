package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/createtopics"
	"go.uber.org/zap"
)

// Mirror keeps the copy of checkpoints in a compacted Kafka topic, one
// record per checkpoint key (the latest wins; a tombstone deletes it). It
// implements checkpoint.Mirror. Kafka already holds the events durably; the
// copy makes a lost Redis key recoverable without loss.
type Mirror struct {
	cfg   Config
	topic string
	prod  *Producer
}

// NewMirror returns a Mirror on topic for a validated Config. Call Ensure
// once before use, and Close when done.
func NewMirror(cfg Config, topic string, log *zap.Logger) *Mirror {
	c := cfg
	c.Compression = "none"
	// Not idempotent: under compaction, an idempotent producer's batches
	// whose records were all cleaned are kept as empty batches (for the
	// producer state), which kafka-go's reader cannot read (it panics:
	// "markRead: negative count"). A copy written twice is harmless.
	c.Idempotent = false
	return &Mirror{cfg: cfg, topic: topic, prod: NewProducer(c, &kafka.Murmur2Balancer{}, log.Named("mirror"))}
}

// Topic returns the mirror's topic.
func (m *Mirror) Topic() string { return m.topic }

// mirrorConfigs make the topic compacted and keep its uncompacted part
// small, so that reading it at start stays quick: segments roll every
// 10 minutes or 1 MiB and are compacted soon after.
var mirrorConfigs = []createtopics.RequestConfig{
	{Name: "cleanup.policy", Value: "compact"},
	{Name: "segment.ms", Value: "600000"},
	{Name: "segment.bytes", Value: "1048576"},
	{Name: "min.cleanable.dirty.ratio", Value: "0.1"},
}

// Ensure creates the topic (one partition, the cluster's default
// replication factor, cleanup.policy compact) when it does not exist. An
// error names the fix: create the topic by hand, grant the CREATE
// operation, or set checkpoint.mirror-topic to "".
func (m *Mirror) Ensure(ctx context.Context) (created bool, err error) {
	// A controller moving (paused, killed: CreateTopics times out or
	// names NOT_CONTROLLER) is retried for startupRetryFor, longer than
	// Kafka takes to elect another.
	deadline := time.Now().Add(startupRetryFor)
	for {
		created, retry, err := m.ensure(ctx)
		if !retry || time.Now().After(deadline) || ctx.Err() != nil {
			return created, err
		}
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// ensure is one try of Ensure; retry reports a failure a later try may
// not have.
func (m *Mirror) ensure(ctx context.Context) (created, retry bool, err error) {
	cl := newCluster(m.cfg.Brokers, m.cfg.DialTimeout, false, nil)
	cl.sec = NewSecurity(m.cfg)
	defer cl.close()
	_, err = clusterPartitions(ctx, cl, m.cfg.Brokers, m.topic)
	if err == nil {
		return false, false, nil
	}
	if !errors.Is(err, kafka.UnknownTopicOrPartition) {
		return false, !errors.Is(err, ErrSecurity) && retriable(err), err
	}
	if err := createMirrorTopic(ctx, cl, m.topic, false); err != nil {
		return false, retriable(err), mirrorCreateError(m.topic, err)
	}
	return true, false, nil
}

// Save writes value as key's copy and waits until all in-sync replicas
// have it.
func (m *Mirror) Save(ctx context.Context, key string, value []byte) error {
	return m.prod.WriteMessages(ctx, kafka.Message{Topic: m.topic, Key: []byte(key), Value: value})
}

// Delete writes key's tombstone (a record without a value).
func (m *Mirror) Delete(ctx context.Context, key string) error {
	return m.prod.WriteMessages(ctx, kafka.Message{Topic: m.topic, Key: []byte(key)})
}

// Close closes the producer's connections.
func (m *Mirror) Close() error { return m.prod.Close() }

// Load reads the topic from its start and returns key's newest value;
// found is false when there is none, or the newest is a tombstone. A
// missing topic holds none.
func (m *Mirror) Load(ctx context.Context, key string) (value []byte, found bool, err error) {
	return LatestByKey(ctx, m.cfg, m.topic, []byte(key))
}

// LatestByKey reads every partition of topic from its first offset to its
// end at the time of the call and returns the value of key's newest
// record (a compacted topic's current value); found is false when there
// is none or it is a tombstone.
func LatestByKey(ctx context.Context, cfg Config, topic string, key []byte) ([]byte, bool, error) {
	type res struct {
		v     []byte
		found bool
	}
	// A leader moving, dead or paused (its reads time out) is retried
	// with fresh metadata for startupRetryFor, longer than Kafka takes to
	// fence it (broker.session.timeout.ms).
	deadline := time.Now().Add(startupRetryFor)
	for {
		r, err := retryLeader(ctx, func() (res, error) {
			v, found, err := latestByKey(ctx, cfg, topic, key)
			return res{v, found}, err
		})
		if err == nil || errors.Is(err, ErrMirror) || errors.Is(err, ErrSecurity) || !retriable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return r.v, r.found, err
		}
		select {
		case <-ctx.Done():
			return nil, false, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func latestByKey(ctx context.Context, cfg Config, topic string, key []byte) (value []byte, found bool, err error) {
	sec := NewSecurity(cfg)
	cl := newCluster(cfg.Brokers, cfg.dialTimeout(), false, nil)
	cl.sec = sec
	defer cl.close()
	meta, err := clusterPartitions(ctx, cl, cfg.Brokers, topic)
	if errors.Is(err, kafka.UnknownTopicOrPartition) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	for _, p := range meta.Partitions {
		addr, ok := cl.brokers[p.LeaderID]
		if !ok {
			return nil, false, fmt.Errorf("sink: read %s/%d: %w", topic, p.PartitionIndex, kafka.LeaderNotAvailable)
		}
		type hit struct {
			v  []byte
			ok bool
		}
		r, err := whileLeader(ctx, cl, topic, p.PartitionIndex, p.LeaderID, func(ctx context.Context) (hit, error) {
			v, ok, err := latestInPartition(ctx, sec, cfg.dialTimeout(), addr, topic, int(p.PartitionIndex), key)
			return hit{v, ok}, err
		})
		v, ok := r.v, r.ok
		if err != nil {
			return nil, false, fmt.Errorf("sink: read %s/%d (leader %s): %w", topic, p.PartitionIndex, addr, err)
		}
		if ok {
			value, found = v, v != nil
		}
	}
	return value, found, nil
}

// latestInPartition scans one partition; seen reports a record of key
// (value nil: a tombstone), the dial and handshake bounded by dial.
func latestInPartition(ctx context.Context, sec *Security, dial time.Duration, leader, topic string, partition int, key []byte) (value []byte, seen bool, err error) {
	defer func() {
		if r := recover(); r != nil { // kafka-go's reader on a batch it cannot read
			value, seen, err = nil, false, fmt.Errorf("%w: reading %s/%d: %v: delete the mirror topic (it is recreated and refilled at the next checkpoint write) or set checkpoint.mirror-topic to a new name", ErrMirror, topic, partition, r)
		}
	}()
	conn, err := dialPartition(ctx, sec, dial, leader, topic, partition)
	if err != nil {
		return nil, false, err
	}
	defer conn.Close()
	// A paused leader accepts the connection and never answers: bounded
	// (and ended at once when ctx is: dialPartition).
	_ = conn.SetDeadline(time.Now().Add(startupReadTimeout))
	first, last, err := conn.ReadOffsets()
	if err != nil || last <= first {
		return nil, false, err
	}
	if _, err := conn.Seek(first, kafka.SeekAbsolute); err != nil {
		return nil, false, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(30 * time.Second)
	}
	_ = conn.SetReadDeadline(dl)
	for next := first; next < last; {
		batch := conn.ReadBatch(1, 16<<20)
		for {
			msg, err := batch.ReadMessage()
			if err != nil {
				batch.Close()
				if !errors.Is(err, io.EOF) {
					return nil, false, err
				}
				break
			}
			next = msg.Offset + 1
			if bytes.Equal(msg.Key, key) {
				value, seen = msg.Value, true
			}
			if next >= last {
				batch.Close()
				return value, seen, nil
			}
		}
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
	}
	return value, seen, nil
}
