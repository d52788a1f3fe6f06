package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"
)

// Fetch versions a PartitionReader asks for: v4 (isolation_level and the
// aborted transactions, KIP-98) to v11, kafka-go's highest.
const (
	fetchMinVersion = 4
	fetchMaxVersion = 11
)

// PartitionReader reads one partition from its leader as a Kafka consumer
// does (Fetch v4+), with isolation.level read_committed applied in full:
// the broker returns nothing past the last stable offset, and the reader
// drops what kafka-go's own Reader passes on (segmentio/kafka-go#1332):
// the control records (COMMIT/ABORT transaction markers, KIP-98) at every
// isolation level, and under read_committed the records of aborted
// transactions, by the answer's aborted-transactions list (committedRecords).
// It is a Reader of that one partition, its leader looked up when unknown.
// The connections are made with Config's Brokers, TLS, SASL and
// DialTimeout, as the publisher's. Not safe for concurrent use: one per
// partition.
type PartitionReader struct {
	topic     string
	partition int32
	r         *Reader
	leader    int32 // -1: to be looked up (at the start, after a failure)
}

// NewPartitionReader returns a reader of topic's partition; readCommitted
// selects isolation.level read_committed (else read_uncommitted).
func NewPartitionReader(cfg Config, topic string, partition int, readCommitted bool) *PartitionReader {
	return &PartitionReader{topic: topic, partition: int32(partition), r: NewReader(cfg, readCommitted), leader: -1}
}

// Fetched is one Fetch answer as a consumer sees it.
type Fetched struct {
	// Records are the records at or after the asked offset, in offset
	// order, without control records nor (read_committed) records of
	// aborted transactions. Their Key, Value and Headers are copies.
	Records []kafka.Message
	// Next is the offset to fetch next: after the last batch of the
	// answer, the records left out included; the asked offset when the
	// answer held none (nothing new within the wait).
	Next int64
	// HighWatermark and LastStable are the partition's high watermark and
	// last stable offset (KIP-98: the first offset of a transaction still
	// open); LogStart its first offset.
	HighWatermark, LastStable, LogStart int64
}

// Fetch asks the leader for the records from offset on: at most maxBytes
// (KIP-74: at least the first batch, however large), waiting up to
// maxWait for one. Errors: kafka.OffsetOutOfRange when offset is below
// the log start or past the end (the caller asks Offsets and decides);
// others (a leader moving, a broker unreachable, a *SecurityError) drop
// the connection, and the next call asks fresh metadata.
func (r *PartitionReader) Fetch(ctx context.Context, offset int64, maxBytes int, maxWait time.Duration) (Fetched, error) {
	if err := r.lookup(ctx); err != nil {
		return Fetched{}, err
	}
	res, err := r.r.Fetch(ctx, r.leader, []Position{{Topic: r.topic, Partition: r.partition, Offset: offset}}, maxBytes, maxBytes, maxWait)
	if err != nil {
		r.leader = -1
		return Fetched{}, fmt.Errorf("%s/%d: %w", r.topic, r.partition, err)
	}
	if err := res[0].Err; err != nil {
		if !errors.Is(err, kafka.OffsetOutOfRange) {
			r.forget() // NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...: ask the leader again
		}
		return Fetched{}, err
	}
	return res[0].Fetched, nil
}

// fetchedPartition returns the partition's part of a Fetch answer, or
// the answer's error for it (a kafka.Error).
func fetchedPartition(fr *fetchAPI.Response, topic string, partition int32) (*fetchAPI.ResponsePartition, error) {
	if fr.ErrorCode != 0 {
		return nil, kafka.Error(fr.ErrorCode)
	}
	for i := range fr.Topics {
		for j := range fr.Topics[i].Partitions {
			if p := &fr.Topics[i].Partitions[j]; fr.Topics[i].Topic == topic && p.Partition == partition {
				if p.ErrorCode != 0 {
					return nil, kafka.Error(p.ErrorCode)
				}
				return p, nil
			}
		}
	}
	return nil, errors.New("no partition in the Fetch answer")
}

// Offsets returns the partition's first offset (log start) and its end:
// the last stable offset under read_committed, else the high watermark
// (ListOffsets with the reader's isolation level, KIP-98).
func (r *PartitionReader) Offsets(ctx context.Context) (first, end int64, err error) {
	if err := r.lookup(ctx); err != nil {
		return 0, 0, err
	}
	if first, end, err = r.r.Offsets(ctx, r.leader, r.topic, r.partition); err != nil {
		r.forget()
	}
	return first, end, err
}

// lookup finds the partition's leader unless known.
func (r *PartitionReader) lookup(ctx context.Context) error {
	if r.leader >= 0 {
		return nil
	}
	leaders, err := r.r.Leaders(ctx, r.topic)
	if err != nil {
		return err
	}
	if l, ok := leaders[r.partition]; ok && l >= 0 {
		r.leader = l
		return nil
	}
	return fmt.Errorf("%s/%d: %w", r.topic, r.partition, kafka.LeaderNotAvailable)
}

// forget drops the leader's connection and the leader: the next call
// looks it up again.
func (r *PartitionReader) forget() {
	r.r.drop()
	r.leader = -1
}

// Close closes the reader's connections.
func (r *PartitionReader) Close() { r.r.Close() }

// committedRecords calls keep with each record of a Fetch answer's
// partition rp at or after offset, in offset order, that a consumer is
// given: not a control record (a transaction marker: its batch has the
// control attribute, KIP-98), and under readCommitted not of an aborted
// transaction. It returns the offset to fetch next: after the last record
// of the answer's batches, skipped ones included (offset when none).
//
// The aborted transactions are applied as the Java consumer applies them
// (CompletedFetch, KIP-98 "Consumer changes"): rp.AbortedTransactions lists
// (producer id, first offset) of each aborted transaction overlapping the
// answer; walking the batches in offset order, a producer is "aborting" once
// a batch at or past one of its first offsets is reached, its
// transactional batches are dropped while it is, and its ABORT marker
// ends that. The list covers the answer only: a transaction that began in
// an earlier answer is listed again in each answer it overlaps.
func committedRecords(rp *fetchAPI.ResponsePartition, offset int64, readCommitted bool, keep func(*protocol.Record) error) (int64, error) {
	var pending []fetchAPI.ResponseTransaction // not reached yet, by first offset
	if readCommitted {
		pending = slices.Clone(rp.AbortedTransactions)
		slices.SortFunc(pending, func(a, b fetchAPI.ResponseTransaction) int { return int(a.FirstOffset - b.FirstOffset) })
	}
	aborting := map[int64]bool{}
	reach := func(base int64) {
		for len(pending) > 0 && pending[0].FirstOffset <= base {
			aborting[pending[0].ProducerID] = true
			pending = pending[1:]
		}
	}
	stream, _ := rp.RecordSet.Records.(*protocol.RecordStream)
	if stream == nil {
		// A v0/v1 message set, or none: no transactions (KIP-98 needs v2).
		return eachRecord(rp.RecordSet.Records, offset, offset, keep)
	}
	next := offset
	for _, rr := range stream.Records {
		var err error
		switch b := rr.(type) {
		case *protocol.ControlBatch:
			reach(b.BaseOffset)
			for {
				cr, err := b.ReadControlRecord()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						return next, err
					}
					break
				}
				next = max(next, cr.Offset+1)
				if cr.Type == 0 { // ABORT (1 is COMMIT)
					delete(aborting, b.ProducerID)
				}
			}
		case *protocol.RecordBatch:
			reach(b.BaseOffset)
			if readCommitted && b.Attributes.Transactional() && aborting[b.ProducerID] {
				next, err = eachRecord(b, offset, next, nil)
			} else {
				next, err = eachRecord(b, offset, next, keep)
			}
		default:
			next, err = eachRecord(rr, offset, next, keep)
		}
		if err != nil {
			return next, err
		}
	}
	if next == offset && len(stream.Records) > 0 {
		next = offset + 1
	}
	return next, nil
}

// eachRecord reads rr to its end, calling keep (when not nil) with each
// record at or after offset; it returns next moved past every record read.
func eachRecord(rr protocol.RecordReader, offset, next int64, keep func(*protocol.Record) error) (int64, error) {
	if rr == nil {
		return next, nil
	}
	for {
		rec, err := rr.ReadRecord()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return next, nil
			}
			return next, err
		}
		next = max(next, rec.Offset+1)
		if keep != nil && rec.Offset >= offset {
			err = keep(rec)
		}
		if rec.Key != nil {
			rec.Key.Close()
		}
		if rec.Value != nil {
			rec.Value.Close()
		}
		if err != nil {
			return next, err
		}
	}
}
