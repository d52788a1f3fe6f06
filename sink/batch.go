package sink

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// Offsets into a record batch (Kafka protocol guide, "Record Batch"; the
// v2 format of KIP-98), counted from its baseOffset field.
const (
	batchLengthAt   = 8
	batchCRCAt      = 17
	batchAttrsAt    = 21
	batchLastDelta  = 23
	batchFirstTS    = 27
	batchMaxTS      = 35
	batchCountAt    = 57
	batchHeaderSize = 61
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendBatch appends msgs[i] for each i of idx, in that order, as one
// record batch (magic 2, no producer id, CreateTime timestamps: a record's
// Time, or now when it has none; ms since the epoch), preceded by the
// batch's size as an int32: the RECORDS field of a Produce request v3 or
// later. Keys and values that are nil are encoded as null. With a codec
// the records are compressed and the batch's attributes name it.
//
// It is kafka-go's protocol.RecordSet encoding (TestAppendBatchMatchesKafkaGo
// checks they agree byte for byte) without its per-record interfaces and
// page buffer: the bytes are built once, so that a round can be encoded
// while the previous one is in flight, and resent as they are.
// batchCap is an upper bound of the bytes appendBatch appends for the
// records idx of msgs without compression: the capacity to encode them
// into without growing the buffer (growing it made a live publisher's
// rounds allocate about twice their size).
func batchCap(msgs []kafka.Message, idx []int32) int {
	n := 4 + batchHeaderSize
	for _, i := range idx {
		m := &msgs[i]
		n += 5 + 1 + 10 + 5 + 2*binary.MaxVarintLen32 + len(m.Key) + len(m.Value) + binary.MaxVarintLen32
		for _, h := range m.Headers {
			n += 2*binary.MaxVarintLen32 + len(h.Key) + len(h.Value)
		}
	}
	return n
}

func appendBatch(dst []byte, msgs []kafka.Message, idx []int32, now int64, codec compress.Codec) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, 4+batchHeaderSize)...)
	b := dst[start+4:]
	binary.BigEndian.PutUint64(b[0:], 0)                   // base offset
	binary.BigEndian.PutUint32(b[12:], 0xffffffff)         // partition leader epoch: -1
	b[16] = 2                                              // magic
	binary.BigEndian.PutUint64(b[43:], 0xffffffffffffffff) // producer id: -1
	binary.BigEndian.PutUint16(b[51:], 0xffff)             // producer epoch: -1
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)         // base sequence: -1
	var attrs uint16
	if codec != nil {
		attrs = uint16(codec.Code()) & 7
	}
	binary.BigEndian.PutUint16(b[batchAttrsAt:], attrs)

	first, maxTS := now, int64(0)
	if t := msgs[idx[0]].Time; !t.IsZero() {
		first = t.UnixMilli()
	}
	body := len(dst)
	for n, i := range idx {
		m := &msgs[i]
		ts := now
		if !m.Time.IsZero() {
			ts = m.Time.UnixMilli()
		}
		maxTS = max(maxTS, ts)
		size := 1 + varintLen(ts-first) + varintLen(int64(n)) +
			bytesLen(m.Key) + bytesLen(m.Value) + varintLen(int64(len(m.Headers)))
		for _, h := range m.Headers {
			size += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
		}
		dst = binary.AppendVarint(dst, int64(size))
		dst = append(dst, 0) // record attributes
		dst = binary.AppendVarint(dst, ts-first)
		dst = binary.AppendVarint(dst, int64(n))
		dst = appendBytes(dst, m.Key)
		dst = appendBytes(dst, m.Value)
		dst = binary.AppendVarint(dst, int64(len(m.Headers)))
		for _, h := range m.Headers {
			dst = binary.AppendVarint(dst, int64(len(h.Key)))
			dst = append(dst, h.Key...)
			dst = appendBytes(dst, h.Value)
		}
	}
	if codec != nil {
		raw := append([]byte(nil), dst[body:]...)
		dst = dst[:body]
		w := codec.NewWriter((*appender)(&dst))
		if _, err := w.Write(raw); err != nil {
			return dst[:start], err
		}
		if err := w.Close(); err != nil {
			return dst[:start], err
		}
	}
	b = dst[start+4:]
	binary.BigEndian.PutUint32(b[batchLastDelta:], uint32(len(idx)-1))
	binary.BigEndian.PutUint64(b[batchFirstTS:], uint64(first))
	binary.BigEndian.PutUint64(b[batchMaxTS:], uint64(maxTS))
	binary.BigEndian.PutUint32(b[batchCountAt:], uint32(len(idx)))
	binary.BigEndian.PutUint32(b[batchLengthAt:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttrsAt:], castagnoli))
	binary.BigEndian.PutUint32(dst[start:], uint32(len(b)))
	return dst, nil
}

// appender is an io.Writer appending to a byte slice.
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// bytesLen is the encoded size of b as varint-prefixed nullable bytes.
func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// Offsets of the idempotence fields of a record batch (KIP-98), counted
// from its baseOffset field.
const (
	batchProducerID    = 43
	batchProducerEpoch = 51
	batchBaseSequence  = 53
)

// stampBatch sets the producer id, producer epoch and base sequence of a
// batch appendBatch encoded (raw starting at its int32 size prefix) and
// updates its CRC, which covers them. A record's sequence is baseSequence
// plus its offset delta; the broker accepts a producer's batch of a
// partition only with the sequence after the last one it wrote (KIP-98).
func stampBatch(raw []byte, pid int64, epoch int16, seq int32) {
	b := raw[4:]
	binary.BigEndian.PutUint64(b[batchProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[batchProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[batchBaseSequence:], uint32(seq))
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttrsAt:], castagnoli))
}

// batchSequence returns the base sequence of a stamped batch.
func batchSequence(raw []byte) int32 {
	return int32(binary.BigEndian.Uint32(raw[4+batchBaseSequence:]))
}

// batchProducer returns the producer id and epoch of a stamped batch.
func batchProducer(raw []byte) (int64, int16) {
	return int64(binary.BigEndian.Uint64(raw[4+batchProducerID:])), int16(binary.BigEndian.Uint16(raw[4+batchProducerEpoch:]))
}

// batchCount returns the record count of a batch.
func batchCount(raw []byte) int32 { return int32(binary.BigEndian.Uint32(raw[4+batchCountAt:])) }

// nextSequence is seq advanced by n records; sequences wrap from
// MaxInt32 to 0 (KIP-98).
func nextSequence(seq, n int32) int32 {
	return int32((int64(seq) + int64(n)) % (1 << 31))
}

// spares keeps the record batch buffers of acknowledged rounds for the
// next rounds (a trickle's rounds are small and many: a fresh buffer per
// batch was a fifth of the bytes the publisher allocated), by size class:
// powers of two from 1 KiB to 64 KiB, at most spareDepth of each (about
// 2 MiB in all). Larger batches (a backlog's) are left to the collector.
type spares [spareClasses][][]byte

const (
	spareMin     = 10 // 1 KiB
	spareClasses = 7  // up to 64 KiB
	spareDepth   = 16
)

// spareClass returns the class of a buffer of at least n bytes and its
// capacity, or -1 when n is above the largest class.
func spareClass(n int) (int, int) {
	for k := 0; k < spareClasses; k++ {
		if size := 1 << (spareMin + k); n <= size {
			return k, size
		}
	}
	return -1, n
}

// take returns an empty buffer of capacity at least n.
func (s *spares) take(n int) []byte {
	k, size := spareClass(n)
	if k < 0 {
		return make([]byte, 0, n)
	}
	if l := len(s[k]); l > 0 {
		b := s[k][l-1]
		s[k][l-1] = nil
		s[k] = s[k][:l-1]
		return b[:0]
	}
	return make([]byte, 0, size)
}

// recycle keeps the buffers of r's batches, which must all be
// acknowledged (none is sent or stamped again), and drops them from r.
func (s *spares) recycle(r *Round) {
	for _, b := range r.batches {
		if !b.done || b.raw == nil {
			continue
		}
		if k, size := spareClass(cap(b.raw)); k >= 0 && cap(b.raw) == size && len(s[k]) < spareDepth {
			s[k] = append(s[k], b.raw)
		}
		b.raw = nil
	}
}
