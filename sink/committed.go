package sink

import (
	"context"
	"errors"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"
	listAPI "github.com/segmentio/kafka-go/protocol/listoffsets"
)

// HeaderTxnPartial is the header exactly-once delivery adds to a record
// whose binlog transaction is not complete in the record's Kafka
// transaction (a transaction larger than a round, or a fragment of one
// larger than source.buffer-bytes): its binlog_txn_end is not a position
// every record before which was committed, so the start decision does not
// resume from it (CommittedHeads, pipeline.Decide).
const HeaderTxnPartial = "binlog_txn_partial"

// markPartial sets HeaderTxnPartial on the records of a round (msgs, each
// owned by pending transaction owner[i]) whose transaction is not among
// the first n complete ones, or is a fragment (its end, ends[i], differs
// from its own end, owns[i]). Exactly-once only.
func markPartial(msgs []kafka.Message, owner []int, ends, owns []binlog.Position, n int) {
	for i := range msgs {
		o := owner[i]
		if o >= n || ends[o] != owns[o] {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: HeaderTxnPartial, Value: []byte("true")})
		}
	}
}

// CommittedHeads returns, for each partition of topic holding committed
// records, the headers of its newest committed record (read as a consumer
// with isolation.level=read_committed: below the last stable offset,
// skipping transaction markers and the records of aborted transactions),
// from the partition's leader. A missing topic gives an empty map. In
// exactly-once mode call SettleTransactions first, so that no transaction
// of this publisher is still being completed.
func CommittedHeads(ctx context.Context, cfg Config, topic string) (map[int]map[string]string, error) {
	return retryLeader(ctx, func() (map[int]map[string]string, error) { return committedHeads(ctx, cfg, topic) })
}

func committedHeads(ctx context.Context, cfg Config, topic string) (map[int]map[string]string, error) {
	return partitionHeads(ctx, cfg, topic, "newest committed record", func(ctx context.Context, sec *Security, addr string, partition int32, dial time.Duration) (map[string]string, error) {
		bc, err := dialBroker(ctx, addr, dial, sec)
		if err != nil {
			return nil, err
		}
		defer bc.close()
		return newestCommitted(ctx, bc, topic, partition, cfg.WriteTimeout)
	})
}

// newestCommitted reads the headers of partition's newest committed
// record (nil: none), looking back from the last stable offset in windows
// growing 8 times, 64 offsets first.
func newestCommitted(ctx context.Context, bc *brokerConn, topic string, partition int32, timeout time.Duration) (map[string]string, error) {
	first, err := listOffset(ctx, bc, topic, partition, -2, 1, timeout, withinWrite)
	if err != nil {
		return nil, err
	}
	lso, err := listOffset(ctx, bc, topic, partition, -1, 1, timeout, withinWrite)
	if err != nil {
		return nil, err
	}
	for window := int64(64); ; window *= 8 {
		from := max(first, lso-window)
		if from >= lso {
			return nil, nil
		}
		h, err := lastCommitted(ctx, bc, topic, partition, from, lso, timeout)
		if err != nil || h != nil || from == first {
			return h, err
		}
	}
}

// listOffset returns the partition's earliest (at -2) or last offset (at
// -1: with isolation level 1, read_committed, the last stable offset;
// with 0 the high watermark; KIP-98), the answer awaited for timeout, the
// value of the setting within.
func listOffset(ctx context.Context, bc *brokerConn, topic string, partition int32, at int64, isolation int8, timeout time.Duration, within string) (int64, error) {
	res, err := bc.roundTrip(ctx, &listAPI.Request{ReplicaID: -1, IsolationLevel: isolation,
		Topics: []listAPI.RequestTopic{{Topic: topic, Partitions: []listAPI.RequestPartition{{Partition: partition, CurrentLeaderEpoch: -1, Timestamp: at}}}}}, timeout, within)
	if err != nil {
		return 0, err
	}
	for _, t := range res.(*listAPI.Response).Topics {
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if p.ErrorCode != 0 {
				return 0, kafka.Error(p.ErrorCode)
			}
			return p.Offset, nil
		}
	}
	return 0, errors.New("no offset in the ListOffsets answer")
}

// lastCommitted fetches [from, lso) with isolation level read_committed
// and returns the headers of the last record that is neither a marker nor
// of an aborted transaction (committedRecords), nil when none. It fetches
// again from after the last batch read until lso is reached.
func lastCommitted(ctx context.Context, bc *brokerConn, topic string, partition int32, from, lso int64, timeout time.Duration) (map[string]string, error) {
	var h map[string]string
	for offset := from; offset < lso; {
		res, err := bc.roundTrip(ctx, &fetchAPI.Request{ReplicaID: -1, MaxWaitTime: 100, MinBytes: 1, MaxBytes: 64 << 20, IsolationLevel: 1,
			SessionEpoch: -1, Topics: []fetchAPI.RequestTopic{{Topic: topic, Partitions: []fetchAPI.RequestPartition{{Partition: partition,
				CurrentLeaderEpoch: -1, FetchOffset: offset, LogStartOffset: -1, PartitionMaxBytes: 64 << 20}}}}}, timeout, withinWrite)
		if err != nil {
			return nil, err
		}
		rp, err := fetchedPartition(res.(*fetchAPI.Response), topic, partition)
		if err != nil {
			return nil, err
		}
		next, err := committedRecords(rp, offset, true, func(r *protocol.Record) error {
			if r.Offset < lso {
				h = make(map[string]string, len(r.Headers))
				for _, x := range r.Headers {
					h[x.Key] = string(x.Value)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if next <= offset {
			return h, nil
		}
		offset = next
	}
	return h, nil
}
