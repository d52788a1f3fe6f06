package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/describeconfigs"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	"golang.org/x/sync/errgroup"
)

// HeaderTxnEnd is the record header holding the binlog position after the
// record's transaction (router.HeaderTxnEnd; repeated here so that sink
// does not import router).
const HeaderTxnEnd = "binlog_txn_end"

// Published returns, for each partition of topic holding records, the
// binlog_txn_end header of its newest record: evidence that a publisher
// already wrote to the topic, and how far. A missing topic gives none.
func Published(ctx context.Context, cfg Config, topic string) ([]string, error) {
	heads, err := PublishedPartitions(ctx, cfg, topic)
	if err != nil {
		return nil, err
	}
	ids := make([]int, 0, len(heads))
	for p := range heads {
		ids = append(ids, p)
	}
	sort.Ints(ids)
	out := make([]string, len(ids))
	for i, p := range ids {
		out[i] = heads[p]
	}
	return out, nil
}

// PublishedPartitions is Published keyed by partition id: for each
// partition whose newest record carries a binlog_txn_end header, that
// header's value. A missing topic gives an empty map.
func PublishedPartitions(ctx context.Context, cfg Config, topic string) (map[int]string, error) {
	heads, err := NewestHeaders(ctx, cfg, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[int]string, len(heads))
	for p, h := range heads {
		if pos := h[HeaderTxnEnd]; pos != "" {
			out[p] = pos
		}
	}
	return out, nil
}

// NewestHeaders returns, for each partition of topic holding records, the
// headers of its newest record (the last value of a repeated key), read
// from the partition's leader. A missing topic gives an empty map. The
// connections use cfg's brokers, TLS and SASL settings.
func NewestHeaders(ctx context.Context, cfg Config, topic string) (map[int]map[string]string, error) {
	return retryLeader(ctx, func() (map[int]map[string]string, error) { return newestHeaders(ctx, cfg, topic) })
}

// retryLeader retries f while it fails because a partition's leadership
// is moving (a topic just created, a broker restarting): up to
// leaderTries times, leaderGap apart, each with fresh metadata.
func retryLeader[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for i := 0; ; i++ {
		v, err := f()
		if err == nil || i == leaderTries-1 || !(errors.Is(err, kafka.NotLeaderForPartition) || errors.Is(err, kafka.LeaderNotAvailable)) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(leaderGap):
		}
	}
}

func newestHeaders(ctx context.Context, cfg Config, topic string) (map[int]map[string]string, error) {
	return partitionHeads(ctx, cfg, topic, "newest record", func(ctx context.Context, sec *Security, addr string, partition int32, dial time.Duration) (map[string]string, error) {
		return newest(ctx, sec, addr, topic, int(partition), dial)
	})
}

// headsReader reads one partition's headers from its leader at addr, the
// dial and handshake bounded by dial; it returns soon after ctx ends.
type headsReader func(ctx context.Context, sec *Security, addr string, partition int32, dial time.Duration) (map[string]string, error)

// partitionHeads runs read on the leader of each partition of topic and
// returns the headers found by partition (a missing topic: none), each
// read retried through leader moves (headsRetrying). what names the
// record in errors.
func partitionHeads(ctx context.Context, cfg Config, topic, what string, read headsReader) (map[int]map[string]string, error) {
	cl := newCluster(cfg.Brokers, cfg.dialTimeout(), false, nil)
	cl.sec = NewSecurity(cfg)
	defer cl.close()
	meta, err := clusterPartitions(ctx, cl, cfg.Brokers, topic)
	if errors.Is(err, kafka.UnknownTopicOrPartition) {
		return map[int]map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[int]map[string]string, len(meta.Partitions))
	for _, p := range meta.Partitions {
		h, err := headsRetrying(ctx, cl, topic, p.PartitionIndex, what, read)
		if err != nil {
			return nil, err
		}
		if h != nil {
			out[int(p.PartitionIndex)] = h
		}
	}
	return out, nil
}

// startupRetryFor is how long NewestHeaders keeps asking a partition's
// leader for its newest record through retriable errors (a leader moving,
// a broker dead or paused): longer than Kafka's default fencing time
// (broker.session.timeout.ms, 9 s), after which the leadership moved.
const startupRetryFor = 20 * time.Second

// headsRetrying is read on partition's leader (cl's metadata, which a
// retry of an earlier partition may have refreshed), asking fresh
// metadata and trying again after a retriable error, for up to
// startupRetryFor.
func headsRetrying(ctx context.Context, cl *cluster, topic string, partition int32, what string, read headsReader) (map[string]string, error) {
	deadline := time.Now().Add(startupRetryFor)
	meta, err := cl.metadata(ctx, topic, false)
	if err != nil {
		return nil, fmt.Errorf("sink: %s of %s/%d: %w", what, topic, partition, err)
	}
	for {
		leader := leaderOf(meta, partition)
		addr, ok := cl.brokers[leader]
		var err error
		if !ok {
			err = fmt.Errorf("sink: %s of %s/%d: %w", what, topic, partition, kafka.LeaderNotAvailable)
		} else {
			var h map[string]string
			dial := cl.dialTimeout // kafka.dial-timeout
			sec := cl.sec          // the read must not use cl: whileLeader asks it meanwhile
			h, err = whileLeader(ctx, cl, topic, partition, leader, func(ctx context.Context) (map[string]string, error) {
				return read(ctx, sec, addr, partition, dial)
			})
			if err == nil {
				return h, nil
			}
			err = fmt.Errorf("sink: %s of %s/%d (leader %s): %w", what, topic, partition, addr, err)
		}
		if !retriable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
		if fresh, merr := cl.metadata(ctx, topic, true); merr == nil {
			meta = fresh
		}
	}
}

// whileLeader returns read's result, read being run on partition's
// leader (broker id leader) while cl's metadata, asked again every
// leaderPoll, still names that leader. When it names another (Kafka
// fenced a dead or paused broker, broker.session.timeout.ms), read's ctx
// is cancelled and, unless read completed meanwhile, the error wraps
// errLeaderMoved (retriable): a paused leader accepts connections and
// never answers, and the try on it then ends within leaderPoll of the
// move instead of at its read timeout. A metadata error leaves read
// running. read must not use cl (whileLeader asks cl meanwhile).
func whileLeader[T any](ctx context.Context, cl *cluster, topic string, partition, leader int32, read func(context.Context) (T, error)) (T, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		g    errgroup.Group
		v    T
		rerr error
	)
	done := make(chan struct{})
	g.Go(func() error {
		defer close(done)
		v, rerr = read(rctx)
		return nil
	})
	poll := time.NewTicker(leaderPoll)
	defer poll.Stop()
	for {
		select {
		case <-done:
			_ = g.Wait()
			if rerr != nil && ctx.Err() != nil {
				// Cut by the caller's cancel (a shutdown): say so, so
				// that the stop is not taken for a failure (a closed
				// connection's error does not wrap it).
				return v, fmt.Errorf("%w (%v)", ctx.Err(), rerr)
			}
			return v, rerr
		case <-poll.C:
			meta, err := cl.metadata(ctx, topic, true)
			if err != nil || leaderOf(meta, partition) == leader {
				continue
			}
			cancel()
			_ = g.Wait()
			if rerr == nil {
				return v, nil
			}
			return v, fmt.Errorf("broker %d, now broker %d: %w (%v)", leader, leaderOf(meta, partition), errLeaderMoved, rerr)
		}
	}
}

// leaderPoll is how often whileLeader asks whether the leader moved.
const leaderPoll = 250 * time.Millisecond

// startupReadTimeout bounds reading a partition's newest record (a
// paused leader accepts the connection and never answers).
const startupReadTimeout = 5 * time.Second

// Partitions returns the partition ids of topic, in order, from a metadata
// request that never creates the topic (unlike kafka-go's
// Conn.ReadPartitions, whose old metadata version makes a broker with
// auto.create.topics.enable create it), asked of each broker in turn
// until one answers (each dial and handshake bounded by 2 s). A missing
// topic gives an error matching kafka.UnknownTopicOrPartition. The
// connections use cfg's brokers, TLS and SASL settings; a failure no
// retry fixes wraps a *SecurityError.
func Partitions(ctx context.Context, cfg Config, topic string) ([]int, error) {
	cl := newCluster(cfg.Brokers, cfg.dialTimeout(), false, nil)
	cl.sec = NewSecurity(cfg)
	defer cl.close()
	meta, err := clusterPartitions(ctx, cl, cfg.Brokers, topic)
	if err != nil {
		return nil, err
	}
	ids := make([]int, len(meta.Partitions))
	for i, p := range meta.Partitions {
		ids[i] = int(p.PartitionIndex)
	}
	sort.Ints(ids)
	return ids, nil
}

func clusterPartitions(ctx context.Context, cl *cluster, brokers []string, topic string) (*metadataAPI.ResponseTopic, error) {
	meta, err := cl.metadata(ctx, topic, true)
	if err != nil {
		// A listener that wants TLS or a login it did not get may
		// accept the connection and drop the first request.
		err = cl.sec.explain(ctx, brokers[0], err)
	}
	var ke kafka.Error
	switch {
	case errors.Is(err, ErrSecurity):
		return nil, &MetadataError{Topic: topic, Brokers: brokers, Err: err}
	case errors.As(err, &ke):
		return nil, fmt.Errorf("sink: topic %s: %w", topic, ke)
	case err != nil:
		return nil, &MetadataError{Topic: topic, Brokers: brokers, Err: err}
	}
	return meta, nil
}

// newest returns the headers of the partition's newest record, read from
// its leader; nil when it holds none.
func newest(ctx context.Context, sec *Security, leader, topic string, partition int, dial time.Duration) (map[string]string, error) {
	conn, err := dialPartition(ctx, sec, dial, leader, topic, partition)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(startupReadTimeout))
	first, last, err := conn.ReadOffsets()
	if err != nil || last <= first {
		return nil, err
	}
	if _, err := conn.Seek(last-1, kafka.SeekAbsolute); err != nil {
		return nil, err
	}
	batch := conn.ReadBatch(1, 64<<20)
	defer batch.Close()
	var h map[string]string
	for {
		m, err := batch.ReadMessage()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return h, nil
			}
			return h, err
		}
		h = make(map[string]string, len(m.Headers))
		for _, x := range m.Headers {
			h[x.Key] = string(x.Value)
		}
		if m.Offset >= last-1 {
			return h, nil
		}
	}
}

// TopicMaxMessageBytes returns topic's max.message.bytes (the largest
// record batch its partitions accept; the broker's message.max.bytes
// unless the topic overrides it), read with DescribeConfigs.
func TopicMaxMessageBytes(ctx context.Context, cfg Config, topic string) (int64, error) {
	brokers := cfg.Brokers
	cl := newCluster(brokers, cfg.dialTimeout(), false, nil)
	cl.sec = NewSecurity(cfg)
	defer cl.close()
	res, err := cl.metaRoundTrip(ctx, &describeconfigs.Request{Resources: []describeconfigs.RequestResource{{
		ResourceType: 2, ResourceName: topic, ConfigNames: []string{"max.message.bytes"}}}}) // 2: TOPIC
	if err != nil {
		return 0, &MetadataError{Topic: topic, Brokers: brokers, Err: err}
	}
	for _, r := range res.(*describeconfigs.Response).Resources {
		if r.ErrorCode != 0 {
			return 0, fmt.Errorf("sink: describe configs of %s: %w: %s", topic, kafka.Error(r.ErrorCode), r.ErrorMessage)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "max.message.bytes" {
				return strconv.ParseInt(e.ConfigValue, 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("sink: describe configs of %s: no max.message.bytes", topic)
}
