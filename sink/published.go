package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"
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
// headers of its newest record (the last value of a repeated key). A
// missing topic gives an empty map. The connections use cfg's TLS and
// SASL settings.
func NewestHeaders(ctx context.Context, cfg Config, topic string) (map[int]map[string]string, error) {
	parts, err := Partitions(ctx, cfg, topic)
	if errors.Is(err, kafka.UnknownTopicOrPartition) {
		return map[int]map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[int]map[string]string, len(parts))
	for _, p := range parts {
		h, err := newest(ctx, cfg, topic, p)
		if err != nil {
			return nil, fmt.Errorf("sink: newest record of %s/%d: %w", topic, p, err)
		}
		if h != nil {
			out[p] = h
		}
	}
	return out, nil
}

// Partitions returns the partition ids of topic, in order, from a metadata
// request that never creates the topic (unlike kafka-go's
// Conn.ReadPartitions, whose old metadata version makes a broker with
// auto.create.topics.enable create it). A missing topic gives an error
// matching kafka.UnknownTopicOrPartition. The connection uses cfg's TLS
// and SASL settings; a failure no retry fixes wraps a *SecurityError.
func Partitions(ctx context.Context, cfg Config, topic string) ([]int, error) {
	tr := NewTransport(cfg)
	defer tr.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		err = NewSecurity(cfg).explain(ctx, cfg.Brokers[0], cfg.SASL, err)
		return nil, &MetadataError{Topic: topic, Brokers: cfg.Brokers, Err: err}
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("sink: topic %s: %w", topic, t.Error)
		}
		ids := make([]int, len(t.Partitions))
		for i, p := range t.Partitions {
			ids[i] = p.ID
		}
		sort.Ints(ids)
		return ids, nil
	}
	return nil, fmt.Errorf("sink: topic %s: %w", topic, kafka.UnknownTopicOrPartition)
}

// newest returns the headers of the partition's newest record, nil when
// it holds none.
func newest(ctx context.Context, cfg Config, topic string, partition int) (map[string]string, error) {
	conn, err := DialLeader(ctx, cfg, topic, partition)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
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
