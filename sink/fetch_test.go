package sink

import (
	"slices"
	"testing"

	"github.com/segmentio/kafka-go/protocol"
	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"
)

// TestCommittedRecords is the read_committed rule (KIP-98) on one Fetch
// answer: which offsets a consumer is given, and where it fetches next.
// Batches are written "pP:OFFSETS" (data of producer P, transactional),
// "nP:OFFSETS" (data, not transactional), "cP@O" (COMMIT marker of P at O),
// "aP@O" (ABORT marker).
func TestCommittedRecords(t *testing.T) {
	type batch struct {
		kind    byte // p, n, c, a
		pid     int64
		offsets []int64
	}
	data := func(pid int64, offs ...int64) batch { return batch{'p', pid, offs} }
	plain := func(offs ...int64) batch { return batch{'n', -1, offs} }
	commit := func(pid, off int64) batch { return batch{'c', pid, []int64{off}} }
	abort := func(pid, off int64) batch { return batch{'a', pid, []int64{off}} }
	txn := func(pid, first int64) fetchAPI.ResponseTransaction {
		return fetchAPI.ResponseTransaction{ProducerID: pid, FirstOffset: first}
	}
	for _, c := range []struct {
		name      string
		from      int64
		committed bool
		batches   []batch
		aborted   []fetchAPI.ResponseTransaction
		want      []int64
		next      int64
	}{
		{"markers never reach the consumer", 0, true,
			[]batch{data(1, 0, 1), commit(1, 2), data(1, 3), commit(1, 4)}, nil, []int64{0, 1, 3}, 5},
		{"markers skipped under read_uncommitted too", 0, false,
			[]batch{data(1, 0, 1), abort(1, 2), data(1, 3), commit(1, 4)}, nil, []int64{0, 1, 3}, 5},
		{"read_uncommitted keeps aborted records", 0, false,
			[]batch{data(1, 0, 1), abort(1, 2)}, []fetchAPI.ResponseTransaction{txn(1, 0)}, []int64{0, 1}, 3},
		{"an aborted transaction between two committed ones of one producer (brod#659)", 1, true,
			[]batch{data(1, 1), commit(1, 2), data(1, 3), abort(1, 4), data(1, 5), commit(1, 6)},
			[]fetchAPI.ResponseTransaction{txn(1, 3)}, []int64{1, 5}, 7},
		{"interleaved producers: only the aborting one's batches go", 0, true,
			[]batch{data(1, 0), data(2, 1), data(1, 2), data(2, 3), abort(1, 4), commit(2, 5)},
			[]fetchAPI.ResponseTransaction{txn(1, 0)}, []int64{1, 3}, 6},
		{"a transaction begun before the fetch offset, listed again", 10, true,
			[]batch{data(1, 10, 11), abort(1, 12), data(1, 13)},
			[]fetchAPI.ResponseTransaction{txn(1, 7)}, []int64{13}, 14},
		{"records below the fetch offset in the first batch are left out", 11, true,
			[]batch{data(1, 10, 11, 12), commit(1, 13)}, nil, []int64{11, 12}, 14},
		{"an answer of only aborted records and the marker moves next past them", 20, true,
			[]batch{data(3, 20, 21), abort(3, 22)}, []fetchAPI.ResponseTransaction{txn(3, 20)}, nil, 23},
		{"non-transactional records of an aborting producer id are kept", 0, true,
			[]batch{data(1, 0), plain(1), abort(1, 2)}, []fetchAPI.ResponseTransaction{txn(1, 0)}, []int64{1}, 3},
		{"aborted list out of first-offset order", 0, true,
			[]batch{data(1, 0), abort(1, 1), data(1, 2), commit(1, 3), data(1, 4), abort(1, 5)},
			[]fetchAPI.ResponseTransaction{txn(1, 4), txn(1, 0)}, []int64{2}, 6},
		{"empty answer", 30, true, nil, nil, nil, 30},
		{"only records below the offset (a compacted batch tail): one step on", 12, true,
			[]batch{data(1, 10, 11)}, nil, nil, 13},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rrs []protocol.RecordReader
			for _, b := range c.batches {
				var recs []protocol.Record
				for _, o := range b.offsets {
					recs = append(recs, protocol.Record{Offset: o, Key: protocol.NewBytes([]byte("k")), Value: protocol.NewBytes([]byte("v"))})
				}
				switch b.kind {
				case 'p', 'n':
					attrs := protocol.Attributes(0)
					if b.kind == 'p' {
						attrs = protocol.Transactional
					}
					rrs = append(rrs, &protocol.RecordBatch{Attributes: attrs, BaseOffset: b.offsets[0], ProducerID: b.pid, Records: protocol.NewRecordReader(recs...)})
				default:
					typ := int16(1)
					if b.kind == 'a' {
						typ = 0
					}
					cb := protocol.NewControlBatch(protocol.ControlRecord{Offset: b.offsets[0], Type: typ})
					cb.Attributes, cb.BaseOffset, cb.ProducerID = protocol.Transactional|protocol.Control, b.offsets[0], b.pid
					rrs = append(rrs, cb)
				}
			}
			rp := &fetchAPI.ResponsePartition{AbortedTransactions: c.aborted, RecordSet: protocol.RecordSet{Records: &protocol.RecordStream{Records: rrs}}}
			var got []int64
			next, err := committedRecords(rp, c.from, c.committed, func(r *protocol.Record) error {
				got = append(got, r.Offset)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) || next != c.next {
				t.Errorf("got offsets %v next %d, want %v next %d", got, next, c.want, c.next)
			}
		})
	}
}
