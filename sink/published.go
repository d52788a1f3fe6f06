package sink

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/segmentio/kafka-go"
)

// HeaderTxnEnd is the record header holding the binlog position after the
// record's transaction (router.HeaderTxnEnd; repeated here so that sink
// does not import router).
const HeaderTxnEnd = "binlog_txn_end"

// Published returns, for each partition of topic holding records, the
// binlog_txn_end header of its newest record: evidence that a publisher
// already wrote to the topic, and how far. A missing topic gives none.
func Published(ctx context.Context, brokers []string, topic string) ([]string, error) {
	conn, err := kafka.DialContext(ctx, "tcp", brokers[0])
	if err != nil {
		return nil, fmt.Errorf("sink: connect to %s: %w", brokers[0], err)
	}
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	if errors.Is(err, kafka.UnknownTopicOrPartition) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sink: partitions of %s: %w", topic, err)
	}
	var out []string
	for _, p := range parts {
		pos, err := newest(ctx, brokers[0], topic, p.ID)
		if err != nil {
			return nil, fmt.Errorf("sink: newest record of %s/%d: %w", topic, p.ID, err)
		}
		if pos != "" {
			out = append(out, pos)
		}
	}
	return out, nil
}

func newest(ctx context.Context, broker, topic string, partition int) (string, error) {
	conn, err := kafka.DialLeader(ctx, "tcp", broker, topic, partition)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	first, last, err := conn.ReadOffsets()
	if err != nil || last <= first {
		return "", err
	}
	if _, err := conn.Seek(last-1, kafka.SeekAbsolute); err != nil {
		return "", err
	}
	batch := conn.ReadBatch(1, 64<<20)
	defer batch.Close()
	pos := ""
	for {
		m, err := batch.ReadMessage()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return pos, nil
			}
			return pos, err
		}
		for _, h := range m.Headers {
			if h.Key == HeaderTxnEnd {
				pos = string(h.Value)
			}
		}
		if m.Offset >= last-1 {
			return pos, nil
		}
	}
}
