package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"
)

// Reader reads many partitions as the Java consumer does: one Fetch
// request (v4+) per leader broker for every partition it leads, not one
// per partition, so that a consumer of n partitions costs the broker one
// request per round instead of n (issue 37: the broker's CPU follows its
// requests). Isolation read_committed is applied in full, as by
// PartitionReader (committedRecords). The connections are made with
// Config's Brokers, TLS, SASL and DialTimeout, as the publisher's: one for
// metadata and one to the leader of the last Fetch. Not safe for
// concurrent use: one per leader being read.
type Reader struct {
	readCommitted bool
	timeout       time.Duration // dial, and the answer's margin beyond the fetch's wait
	cl            *cluster
	bc            *brokerConn // the connection to leader; nil before the first call or after a failure
	leader        int32
}

// NewReader returns a Reader; readCommitted selects isolation.level
// read_committed (else read_uncommitted).
func NewReader(cfg Config, readCommitted bool) *Reader {
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = DefaultConfig().DialTimeout
	}
	cl := newCluster(cfg.Brokers, timeout, false, nil)
	cl.sec = NewSecurity(cfg)
	return &Reader{readCommitted: readCommitted, timeout: timeout, cl: cl}
}

// Position is a partition and the offset to read it from.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
}

// PartitionFetched is one partition's part of a Fetch answer: its
// Fetched, or Err, the partition's own error (a kafka.Error:
// kafka.OffsetOutOfRange when Offset is below the log start or past the
// end; NOT_LEADER_OR_FOLLOWER and the like when the leadership moved).
type PartitionFetched struct {
	Position
	Fetched
	Err error
}

// Leaders returns the leader's node id of each partition of topic, from
// fresh metadata (-1: the partition has none at the moment). Errors: the
// topic unknown (kafka.UnknownTopicOrPartition), no broker reachable.
func (r *Reader) Leaders(ctx context.Context, topic string) (map[int32]int32, error) {
	meta, err := r.cl.metadata(ctx, topic, true)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int32, len(meta.Partitions))
	for _, p := range meta.Partitions {
		out[p.PartitionIndex] = p.LeaderID
	}
	return out, nil
}

// Fetch asks broker leader (a node id of Leaders) in one request for the
// records of every partition of ps from its offset on, in ps's order
// (the broker fills the answer in that order: rotate ps between calls so
// that no partition starves): at most partitionMaxBytes per partition
// and maxBytes in all (KIP-74: at least the first batch, however large),
// waiting up to maxWait for one record. It returns one PartitionFetched
// per position, in ps's order, each with its records or its own error.
// An error of the whole request (the broker unreachable, a
// *SecurityError, a top-level Kafka error) drops the connection; the
// next call dials again.
func (r *Reader) Fetch(ctx context.Context, leader int32, ps []Position, maxBytes, partitionMaxBytes int, maxWait time.Duration) ([]PartitionFetched, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	iso := int8(0)
	if r.readCommitted {
		iso = 1
	}
	req := &fetchAPI.Request{ReplicaID: -1, MaxWaitTime: int32(maxWait.Milliseconds()), MinBytes: 1, MaxBytes: int32(maxBytes),
		IsolationLevel: iso, SessionEpoch: -1}
	for _, p := range ps {
		rp := fetchAPI.RequestPartition{Partition: p.Partition, CurrentLeaderEpoch: -1, FetchOffset: p.Offset, LogStartOffset: -1, PartitionMaxBytes: int32(partitionMaxBytes)}
		if n := len(req.Topics); n > 0 && req.Topics[n-1].Topic == p.Topic {
			req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, rp)
		} else {
			req.Topics = append(req.Topics, fetchAPI.RequestTopic{Topic: p.Topic, Partitions: []fetchAPI.RequestPartition{rp}})
		}
	}
	res, err := r.roundTrip(ctx, leader, ps[0].Topic, req, fetchMinVersion, fetchMaxVersion, maxWait+r.timeout)
	if err != nil {
		return nil, err
	}
	fr := res.(*fetchAPI.Response)
	if fr.ErrorCode != 0 {
		r.drop()
		return nil, fmt.Errorf("fetch from node %d: %w", leader, kafka.Error(fr.ErrorCode))
	}
	out := make([]PartitionFetched, len(ps))
	for i, p := range ps {
		out[i].Position = p
		rp, err := fetchedPartition(fr, p.Topic, p.Partition)
		if err != nil {
			out[i].Err = fmt.Errorf("fetch %s/%d: %w", p.Topic, p.Partition, err)
			continue
		}
		out[i].Fetched, out[i].Err = readFetched(rp, p, r.readCommitted)
	}
	return out, nil
}

// readFetched is the Fetched of one partition's answer rp to a fetch from
// p.Offset: the records kept (committedRecords), their Key, Value and
// Headers copied.
func readFetched(rp *fetchAPI.ResponsePartition, p Position, readCommitted bool) (Fetched, error) {
	f := Fetched{HighWatermark: rp.HighWatermark, LastStable: rp.LastStableOffset, LogStart: rp.LogStartOffset}
	var err error
	f.Next, err = committedRecords(rp, p.Offset, readCommitted, func(rec *protocol.Record) error {
		m := kafka.Message{Topic: p.Topic, Partition: int(p.Partition), Offset: rec.Offset, Time: rec.Time}
		var err error
		if m.Key, err = protocol.ReadAll(rec.Key); err != nil {
			return err
		}
		if m.Value, err = protocol.ReadAll(rec.Value); err != nil {
			return err
		}
		if len(rec.Headers) > 0 {
			m.Headers = make([]kafka.Header, len(rec.Headers))
			for i, h := range rec.Headers {
				m.Headers[i] = kafka.Header{Key: h.Key, Value: slices.Clone(h.Value)}
			}
		}
		f.Records = append(f.Records, m)
		return nil
	})
	if err != nil {
		return Fetched{}, fmt.Errorf("fetch %s/%d: %w", p.Topic, p.Partition, err)
	}
	return f, nil
}

// Offsets returns a partition's first offset (log start) and its end
// (the last stable offset under read_committed, else the high watermark;
// ListOffsets with the reader's isolation level, KIP-98), asked of broker
// leader. A failure drops the connection.
func (r *Reader) Offsets(ctx context.Context, leader int32, topic string, partition int32) (first, end int64, err error) {
	if err := r.connect(ctx, leader, topic); err != nil {
		return 0, 0, err
	}
	iso := int8(0)
	if r.readCommitted {
		iso = 1
	}
	if first, err = listOffset(ctx, r.bc, topic, partition, -2, iso, r.timeout, withinDial); err == nil {
		end, err = listOffset(ctx, r.bc, topic, partition, -1, iso, r.timeout, withinDial)
	}
	if err != nil {
		var ke kafka.Error
		if !errors.As(err, &ke) {
			r.drop()
		}
		return 0, 0, fmt.Errorf("offsets of %s/%d: %w", topic, partition, err)
	}
	return first, end, nil
}

// roundTrip sends msg to broker leader (within versions lo..hi) and
// waits up to timeout for the answer; a failure drops the connection.
func (r *Reader) roundTrip(ctx context.Context, leader int32, topic string, msg protocol.Message, lo, hi int16, timeout time.Duration) (protocol.Message, error) {
	if err := r.connect(ctx, leader, topic); err != nil {
		return nil, err
	}
	cl, err := r.bc.send(msg, lo, hi, timeout, withinDial)
	if err == nil {
		var res protocol.Message
		if res, err = cl.wait(ctx); err == nil {
			return res, nil
		}
	}
	addr := r.bc.addr
	r.drop()
	return nil, fmt.Errorf("fetch from node %d at %s: %w", leader, addr, err)
}

// connect dials broker leader unless connected to it; its address comes
// from the metadata of topic (asked again when leader is not known).
func (r *Reader) connect(ctx context.Context, leader int32, topic string) error {
	if r.bc != nil && r.leader == leader && r.bc.alive() {
		return nil
	}
	r.drop()
	addr, ok := r.cl.brokers[leader]
	if !ok {
		if _, err := r.cl.metadata(ctx, topic, true); err != nil {
			return err
		}
		if addr, ok = r.cl.brokers[leader]; !ok {
			return fmt.Errorf("node %d (leader of %s): %w", leader, topic, kafka.LeaderNotAvailable)
		}
	}
	bc, err := dialBroker(ctx, addr, r.timeout, r.cl.sec)
	if err != nil {
		return err
	}
	r.bc, r.leader = bc, leader
	return nil
}

// drop closes the leader's connection (the next call dials again).
func (r *Reader) drop() {
	if r.bc != nil {
		r.bc.close()
		r.bc = nil
	}
}

// Close closes the reader's connections.
func (r *Reader) Close() {
	r.drop()
	r.cl.close()
}
