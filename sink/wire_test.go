package sink

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
)

// produceRequest builds a request over the given record sets (fresh
// readers each call: kafka-go's encoder consumes them).
func produceRequest(txnID string, sets ...[]byte) *rawproduce.Request {
	req := &rawproduce.Request{TransactionalID: txnID, Acks: -1, Timeout: 30000}
	for i, b := range sets {
		topic := "im.events"
		if i >= 2 {
			topic = "im.receipts"
		}
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != topic {
			req.Topics = append(req.Topics, rawproduce.RequestTopic{Topic: topic})
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, rawproduce.RequestPartition{Partition: int32(5 - i), RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(b)}})
	}
	return req
}

// Every version the Producer sends encodes byte for byte as kafka-go's
// encoder does: with and without a transactional id, topics with several
// partitions, an empty record set.
func TestProduceRequestBytes(t *testing.T) {
	sets := [][]byte{bytes.Repeat([]byte{0xab}, 300), {}, []byte("a batch"), bytes.Repeat([]byte{1, 2, 3}, 5000)}
	for v := int16(produceMinVersion); v <= produceMaxVersion; v++ {
		for _, txn := range []string{"", "cdc-outbox:orders"} {
			var want bytes.Buffer
			if err := protocol.WriteRequest(&want, v, 77, clientID, produceRequest(txn, sets...)); err != nil {
				t.Fatal(err)
			}
			prefix := []byte("kept")
			got, ok := appendProduceRequest(prefix, v, 77, produceRequest(txn, sets...))
			if !ok {
				t.Fatalf("v%d: not encoded", v)
			}
			if !bytes.Equal(got[:4], prefix) || !bytes.Equal(got[4:], want.Bytes()) {
				t.Fatalf("v%d txn %q: %d bytes, kafka-go writes %d (first difference at %d)", v, txn, len(got)-4, want.Len(), firstDiff(got[4:], want.Bytes()))
			}
		}
	}
	// Not a byte slice's reader, or a version outside 3–8: left to kafka-go.
	odd := produceRequest("", []byte("x"))
	odd.Topics[0].Partitions[0].RecordSet.Reader = io.LimitReader(bytes.NewReader(nil), 0)
	if got, ok := appendProduceRequest([]byte("kept"), 8, 1, odd); ok || string(got) != "kept" {
		t.Fatalf("a reader not over bytes: %q, %v", got, ok)
	}
	if _, ok := appendProduceRequest(nil, 9, 1, produceRequest("", []byte("x"))); ok {
		t.Fatal("v9 encoded")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// responseOf is a response with every field of version v set.
func responseOf(v int16) *produceAPI.Response {
	p := func(part int32, code int16) produceAPI.ResponsePartition {
		r := produceAPI.ResponsePartition{Partition: part, ErrorCode: code, BaseOffset: 1<<40 + int64(part), LogAppendTime: 1764547200123}
		if v >= 5 {
			r.LogStartOffset = 42
		}
		if v >= 8 && code != 0 {
			r.RecordErrors = []produceAPI.ResponseError{{BatchIndex: 3, BatchIndexErrorMessage: "bad record"}, {BatchIndex: 4}}
			r.ErrorMessage = "INVALID_RECORD"
		}
		return r
	}
	return &produceAPI.Response{ThrottleTimeMs: 12, Topics: []produceAPI.ResponseTopic{
		{Topic: "im.events", Partitions: []produceAPI.ResponsePartition{p(0, 0), p(3, 45)}},
		{Topic: "im.receipts", Partitions: []produceAPI.ResponsePartition{p(1, 87)}},
		{Topic: "empty"},
	}}
}

// Every version's response written by kafka-go reads back whole, one
// after the other on the same buffered stream, the buffer reused.
func TestProduceResponseRead(t *testing.T) {
	var stream bytes.Buffer
	for v := int16(produceMinVersion); v <= produceMaxVersion; v++ {
		if err := protocol.WriteResponse(&stream, v, int32(100+v), responseOf(v)); err != nil {
			t.Fatal(err)
		}
	}
	rd := bufio.NewReader(&stream)
	var buf []byte
	for v := int16(produceMinVersion); v <= produceMaxVersion; v++ {
		corr, res, b, err := readProduceResponse(rd, v, buf)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		buf = b
		want := responseOf(v)
		want.Topics[2].Partitions = []produceAPI.ResponsePartition{}
		if corr != int32(100+v) || !reflect.DeepEqual(res, want) {
			t.Fatalf("v%d: correlation id %d, %+v\nwant %+v", v, corr, res, want)
		}
	}
	if _, _, _, err := readProduceResponse(rd, 8, buf); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("at the end of the stream: %v, want io.ErrUnexpectedEOF", err)
	}
}

// A response cut anywhere, or with a count past its end, is an error,
// never a panic or a partial result.
func TestProduceResponseMalformed(t *testing.T) {
	var full bytes.Buffer
	if err := protocol.WriteResponse(&full, 8, 9, responseOf(8)); err != nil {
		t.Fatal(err)
	}
	b := full.Bytes()
	for n := 4; n < len(b); n++ {
		cut := append([]byte(nil), b[:n]...)
		// The size claims only what is there: the fields run out.
		cut[0], cut[1], cut[2], cut[3] = 0, 0, byte((n-4)>>8), byte(n-4)
		if _, res, _, err := readProduceResponse(bytes.NewReader(cut), 8, nil); err == nil || res != nil {
			t.Fatalf("cut at %d of %d: %v, %v", n, len(b), res, err)
		}
	}
	huge := append([]byte(nil), b...)
	huge[4+4+3] = 0xff // the topic count's low byte: far more topics than bytes
	if _, _, _, err := readProduceResponse(bytes.NewReader(huge), 8, nil); !errors.Is(err, errMalformed) {
		t.Fatalf("a count past the end: %v", err)
	}
	if _, _, _, err := readProduceResponse(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), 8, nil); !errors.Is(err, errMalformed) {
		t.Fatalf("a negative size: %v", err)
	}
}

func FuzzReadProduceResponse(f *testing.F) {
	for v := int16(produceMinVersion); v <= produceMaxVersion; v++ {
		var b bytes.Buffer
		if err := protocol.WriteResponse(&b, v, 1, responseOf(v)); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes(), uint8(v))
	}
	f.Fuzz(func(t *testing.T, b []byte, v uint8) {
		ver := int16(produceMinVersion + int(v)%(produceMaxVersion-produceMinVersion+1))
		_, res, _, err := readProduceResponse(bytes.NewReader(b), ver, nil)
		if (err == nil) != (res != nil) {
			t.Fatalf("result %v with error %v", res, err)
		}
	})
}
