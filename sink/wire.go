package sink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
)

// The Produce request and response of every round, encoded here rather
// than by kafka-go's reflective encoder (protocol.WriteRequest,
// ReadResponse), which cost a trickle of small rounds about as much CPU
// as the write itself (BENCHMARKS.md, "Live cost of small transactions").
// Only versions 3 to 8 (produceMinVersion–produceMaxVersion) are
// encoded: the non-flexible ones with record batches (KIP-98; flexible
// versions begin at 9, KIP-482). Layouts: Kafka protocol guide, "Produce
// API"; the request header is v1 and the response header v0 for them.

// wireBufMax is the largest request buffer a connection keeps for the
// next request; a larger one (a drain's round) is let go after its write.
const wireBufMax = 1 << 20

// errMalformed: a produce response that does not parse as its version.
var errMalformed = errors.New("malformed produce response")

// appendProduceRequest appends req as a size-prefixed Produce request of
// version v (3–8) with correlation id corr to dst. ok is false when a
// record set is not a RawRecordSet over a *bytes.Reader (the caller then
// uses kafka-go's encoder).
func appendProduceRequest(dst []byte, v int16, corr int32, req *rawproduce.Request) (_ []byte, ok bool) {
	if v < produceMinVersion || v > produceMaxVersion {
		return dst, false
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0) // size, set below
	dst = binary.BigEndian.AppendUint16(dst, uint16(protocol.Produce))
	dst = binary.BigEndian.AppendUint16(dst, uint16(v))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	dst = appendString(dst, clientID, false)
	dst = appendString(dst, req.TransactionalID, true)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Acks))
	dst = binary.BigEndian.AppendUint32(dst, uint32(req.Timeout))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(req.Topics)))
	for _, t := range req.Topics {
		dst = appendString(dst, t.Topic, false)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(t.Partitions)))
		for _, p := range t.Partitions {
			rd, isBytes := p.RecordSet.Reader.(*bytes.Reader)
			if !isBytes {
				return dst[:start], false
			}
			dst = binary.BigEndian.AppendUint32(dst, uint32(p.Partition))
			// The RECORDS field whole: its int32 length and the record
			// batch (appendBatch), copied as kafka-go's RawRecordSet does.
			n := int(rd.Size())
			at := len(dst)
			dst = append(dst, make([]byte, n)...)
			if _, err := rd.ReadAt(dst[at:], 0); err != nil && n > 0 {
				return dst[:start], false
			}
		}
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, true
}

// appendString appends s as a Kafka STRING (int16 length), or as a
// NULLABLE_STRING's null (length −1) when nullable and empty, as
// kafka-go encodes its nullable fields.
func appendString(dst []byte, s string, nullable bool) []byte {
	if nullable && s == "" {
		return binary.BigEndian.AppendUint16(dst, 0xffff)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// readProduceResponse reads one size-prefixed Produce response of version
// v (3–8) from r, using buf for its bytes (returned, grown, for the next
// one). A short read is io.ErrUnexpectedEOF, as kafka-go reports it.
func readProduceResponse(r io.Reader, v int16, buf []byte) (corr int32, res *produceAPI.Response, _ []byte, err error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	n := int(int32(binary.BigEndian.Uint32(size[:])))
	if n < 4 || n > 64<<20 {
		return 0, nil, buf, fmt.Errorf("%w: size %d", errMalformed, n)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	d := wireReader{b: buf}
	corr = d.int32()
	res = &produceAPI.Response{}
	topics := d.count(6)
	if d.bad {
		return corr, nil, buf, fmt.Errorf("%w (v%d, %d bytes)", errMalformed, v, n)
	}
	res.Topics = make([]produceAPI.ResponseTopic, topics)
	for i := range res.Topics {
		t := &res.Topics[i]
		t.Topic = d.string()
		t.Partitions = make([]produceAPI.ResponsePartition, d.count(partitionMin(v)))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition = d.int32()
			p.ErrorCode = d.int16()
			p.BaseOffset = d.int64()
			p.LogAppendTime = d.int64() // v2+
			if v >= 5 {
				p.LogStartOffset = d.int64()
			}
			if v >= 8 {
				if k := d.count(6); k > 0 {
					p.RecordErrors = make([]produceAPI.ResponseError, k)
					for e := range p.RecordErrors {
						p.RecordErrors[e].BatchIndex = d.int32()
						p.RecordErrors[e].BatchIndexErrorMessage = d.string()
					}
				}
				p.ErrorMessage = d.string()
			}
			if d.bad {
				return corr, nil, buf, fmt.Errorf("%w (v%d, %d bytes)", errMalformed, v, n)
			}
		}
	}
	res.ThrottleTimeMs = d.int32()
	if d.bad {
		return corr, nil, buf, fmt.Errorf("%w (v%d, %d bytes)", errMalformed, v, n)
	}
	return corr, res, buf, nil
}

// wireReader reads big-endian Kafka fields from b; past its end every
// read returns zero and sets bad.
type wireReader struct {
	b   []byte
	bad bool
}

func (d *wireReader) take(n int) []byte {
	if n < 0 || len(d.b) < n {
		d.bad, d.b = true, nil
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *wireReader) int16() int16 {
	if p := d.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (d *wireReader) int32() int32 {
	if p := d.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (d *wireReader) int64() int64 {
	if p := d.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

// partitionMin is the fewest bytes a partition's answer of version v takes.
func partitionMin(v int16) int {
	n := 4 + 2 + 8 + 8 // index, error code, base offset, log append time
	if v >= 5 {
		n += 8
	}
	if v >= 8 {
		n += 4 + 2 // record errors, error message
	}
	return n
}

// count reads an ARRAY's length: −1 (null) is 0; one whose elements of at
// least each bytes cannot fit in what is left is malformed (so a broken
// or hostile answer cannot make it allocate more than a few times its
// size).
func (d *wireReader) count(each int) int {
	n := int(d.int32())
	if n < 0 {
		return 0
	}
	if n > len(d.b)/each {
		d.bad, d.b = true, nil
		return 0
	}
	return n
}

// string reads a STRING or NULLABLE_STRING (null is "").
func (d *wireReader) string() string {
	n := int(d.int16())
	if n < 0 {
		return ""
	}
	return string(d.take(n))
}
