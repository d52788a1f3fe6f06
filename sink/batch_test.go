package sink

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

func batchMessages() []kafka.Message {
	t0 := time.UnixMilli(1_790_000_000_123)
	msgs := []kafka.Message{
		{Key: []byte("42"), Value: []byte(`{"a":1}`), Time: t0,
			Headers: []kafka.Header{{Key: "event_id", Value: []byte("7")}, {Key: "nil", Value: nil}, {Key: "empty", Value: []byte{}}}},
		{Key: nil, Value: []byte("no key"), Time: t0.Add(-5 * time.Millisecond)},
		{Key: []byte{}, Value: nil, Time: t0.Add(time.Hour)},
		{Key: []byte("k"), Value: []byte(strings.Repeat("v", 20_000)), Time: t0.Add(3 * time.Millisecond)},
	}
	for i := range 300 { // offset deltas and sizes beyond one varint byte
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{byte(i)}, i), Time: t0.Add(time.Duration(i) * time.Millisecond),
			Headers: []kafka.Header{{Key: "seq_no", Value: []byte(fmt.Sprint(i))}}})
	}
	return msgs
}

// kafkaGoBatch is kafka-go's own encoding of the records, as its Writer
// sends them.
func kafkaGoBatch(t *testing.T, msgs []kafka.Message, attrs protocol.Attributes) []byte {
	t.Helper()
	recs := make([]protocol.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = protocol.Record{Time: m.Time, Key: nilBytes(m.Key), Value: nilBytes(m.Value)}
		for _, h := range m.Headers {
			recs[i].Headers = append(recs[i].Headers, protocol.Header{Key: h.Key, Value: h.Value})
		}
	}
	var buf bytes.Buffer
	rs := protocol.RecordSet{Version: 2, Attributes: attrs, Records: protocol.NewRecordReader(recs...)}
	if _, err := rs.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func nilBytes(b []byte) protocol.Bytes {
	if b == nil {
		return nil
	}
	return protocol.NewBytes(b)
}

func TestAppendBatchMatchesKafkaGo(t *testing.T) {
	msgs := batchMessages()
	idx := make([]int32, len(msgs))
	for i := range idx {
		idx[i] = int32(i)
	}
	for _, name := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(name, func(t *testing.T) {
			codec, err := compression(name)
			if err != nil {
				t.Fatal(err)
			}
			var attrs protocol.Attributes
			if codec != nil {
				attrs = protocol.Attributes(codec.Code())
			}
			prefix := []byte("earlier")
			got, err := appendBatch(append([]byte(nil), prefix...), msgs, idx, 0, codec)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(got, prefix) {
				t.Fatal("appendBatch overwrote what dst held")
			}
			got = got[len(prefix):]
			if want := kafkaGoBatch(t, msgs, attrs); !bytes.Equal(got, want) {
				// Compressors may frame the same input differently;
				// then the decoded records must still agree.
				if codec == nil {
					t.Fatalf("batch differs from kafka-go's encoding:\n got %x\nwant %x", got[:80], want[:80])
				}
			}
			checkDecoded(t, got, msgs)
		})
	}
}

// checkDecoded reads the batch back with kafka-go's decoder.
func checkDecoded(t *testing.T, batch []byte, msgs []kafka.Message) {
	t.Helper()
	var rs protocol.RecordSet
	if _, err := rs.ReadFrom(bytes.NewReader(batch)); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		r, err := rs.Records.ReadRecord()
		if err == io.EOF {
			if i != len(msgs) {
				t.Fatalf("decoded %d records, want %d", i, len(msgs))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		m := &msgs[i]
		key, _ := protocol.ReadAll(r.Key)
		val, _ := protocol.ReadAll(r.Value)
		if r.Offset != int64(i) || !r.Time.Equal(m.Time) || (r.Key == nil) != (m.Key == nil) || !bytes.Equal(key, m.Key) ||
			(r.Value == nil) != (m.Value == nil) || !bytes.Equal(val, m.Value) || len(r.Headers) != len(m.Headers) {
			t.Fatalf("record %d: got offset %d time %v key %q value %d bytes, %d headers; want %v %q %d bytes, %d headers",
				i, r.Offset, r.Time, key, len(val), len(r.Headers), m.Time, m.Key, len(m.Value), len(m.Headers))
		}
		for j, h := range r.Headers {
			if h.Key != m.Headers[j].Key || !bytes.Equal(h.Value, m.Headers[j].Value) || (h.Value == nil) != (m.Headers[j].Value == nil) {
				t.Fatalf("record %d header %d: got %q=%q, want %q=%q", i, j, h.Key, h.Value, m.Headers[j].Key, m.Headers[j].Value)
			}
		}
	}
}

// TestAppendBatchSubset encodes a partition's records picked out of a
// round, with records without a time stamped now.
func TestAppendBatchSubset(t *testing.T) {
	msgs := batchMessages()
	now := time.UnixMilli(1_800_000_000_000)
	var idx []int32
	var want []kafka.Message
	for i := 3; i < len(msgs); i += 7 {
		idx = append(idx, int32(i))
		m := msgs[i]
		if i%2 == 1 {
			msgs[i].Time, m.Time = time.Time{}, now
		}
		want = append(want, m)
	}
	got, err := appendBatch(nil, msgs, idx, now.UnixMilli(), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDecoded(t, got, want)
}

func BenchmarkAppendBatch(b *testing.B) {
	msgs := make([]kafka.Message, 300)
	idx := make([]int32, len(msgs))
	for i := range msgs {
		idx[i] = int32(i)
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprint(i * 7919)), Value: bytes.Repeat([]byte("x"), 500),
			Headers: []kafka.Header{{Key: "event_id", Value: []byte("123456")}, {Key: "event_type", Value: []byte("message.created")},
				{Key: "seq_no", Value: []byte("42")}, {Key: "binlog_pos", Value: []byte("mariadb-bin.000001:123456")}}}
	}
	var buf []byte
	b.SetBytes(int64(len(msgs)) * 600)
	for b.Loop() {
		buf, _ = appendBatch(buf[:0], msgs, idx, 1_800_000_000_000, nil)
	}
}

// TestBatchCapBounds: batchCap is an upper bound of the encoded batch, so
// that Begin encodes each batch without growing its buffer: records with
// and without keys, values and headers, long and empty ones.
func TestBatchCapBounds(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 70_000)
	for _, c := range []struct {
		name string
		msgs []kafka.Message
	}{
		{"one empty record", []kafka.Message{{}}},
		{"keys and values", []kafka.Message{{Key: []byte("1"), Value: []byte("{}")}, {Key: []byte("22"), Value: long}}},
		{"headers", []kafka.Message{{Key: []byte("k"), Value: []byte("v"), Headers: []kafka.Header{{Key: "event_id", Value: []byte("abc")}, {Key: "h", Value: long}}}}},
		{"old and new timestamps", []kafka.Message{{Time: time.Unix(1, 0)}, {Time: time.Unix(1_800_000_000, 0), Value: long}}},
	} {
		idx := make([]int32, len(c.msgs))
		for i := range idx {
			idx[i] = int32(i)
		}
		want := batchCap(c.msgs, idx)
		got, err := appendBatch(make([]byte, 0, want), c.msgs, idx, time.Now().UnixMilli(), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) > want || cap(got) != want {
			t.Errorf("%s: encoded %d bytes (capacity %d), batchCap %d: the buffer grew", c.name, len(got), cap(got), want)
		}
	}
}
