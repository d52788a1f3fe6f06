package router

import (
	"strconv"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/segmentio/kafka-go"
)

// Headers of the W3C trace context (https://www.w3.org/TR/trace-context/
// §3) and of CloudEvents' Kafka protocol binding in binary mode
// (https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/bindings/kafka-protocol-binding.md §3.2).
const (
	HeaderTraceParent   = "traceparent"
	HeaderTraceState    = "tracestate"
	HeaderCESpecVersion = "ce_specversion"
	HeaderCEID          = "ce_id"
	HeaderCESource      = "ce_source"
	HeaderCEType        = "ce_type"
	HeaderCETime        = "ce_time"
	HeaderContentType   = "content-type"
)

// ExplicitPartition travels in kafka.Message.WriterData for a record whose
// mapping names a partition column; Balancer then puts the record in
// partition P mod partition count instead of hashing its key. Table is the
// row's table (the metrics' table label, OutboxTable).
//
// Every other record of a table set or a mapped table carries its
// *binlog.Table in WriterData (no allocation): the sink's observer labels
// the record's metrics with its OutboxTable.
type ExplicitPartition struct {
	P     int64
	Table *binlog.Table
}

// OutboxTable returns the row's table, "schema.table".
func (p ExplicitPartition) OutboxTable() string { return p.Table.OutboxTable() }

// mappedTopic is the topic of e, a row of a table whose mapping is not
// the plain im preset (its topic column, template or fixed name), with
// CheckTopic's verdict on it.
func (r *Router) mappedTopic(e *binlog.Event) (string, error) {
	m := e.Table.Mapping
	v := e.Vals
	f := Routed{By: m.TopicBy}
	if m.TopicColumn >= 0 {
		switch c := v[m.TopicColumn]; {
		case c == nil:
			f.Null = m.TopicBy
		case len(c) == 0:
			f.Empty = m.TopicBy
		case m.TopicRegex != nil: // Debezium's route.topic.regex/replacement
			f.Topic = m.TopicRegex.Apply(string(c))
		default:
			f.Topic = string(c)
		}
	} else if name, fixed := m.Topic.Fixed(); fixed {
		f.Topic = name
	} else {
		b, null, empty := m.Topic.Render(make([]byte, 0, 64), v)
		f.Topic, f.Null, f.Empty = string(b), null, empty
	}
	return f.Topic, CheckTopic(f, r.reserved)
}

// EventTopic is the topic Route gives e (its mapping's, else router.topic
// by its event type), with CheckTopic's verdict on it (a *TopicError).
func (r *Router) EventTopic(e *binlog.Event) (string, error) {
	if e.Table != nil && !e.Table.Mapping.IM {
		return r.mappedTopic(e)
	}
	return r.Topic(e.EventType)
}

// routeMapped is Route for a table whose mapping is not the plain im
// preset: everything comes from e.Vals by the mapping's slots.
func (r *Router) routeMapped(e *binlog.Event, end binlog.Position) (kafka.Message, error) {
	m := e.Table.Mapping
	v := e.Vals
	topic, terr := r.mappedTopic(e)

	n := 2*11 + len(e.Pos.File) + len(end.File) + len(e.Pos.GTID) + 64
	buf := make([]byte, 0, n)
	cut := func(from int) []byte { return buf[from:len(buf):len(buf)] }
	h := make([]kafka.Header, 0, len(m.Headers)+10)
	add := func(key string, val []byte) {
		if val != nil {
			h = append(h, kafka.Header{Key: key, Value: val})
		}
	}
	add(HeaderEventID, v[m.ID])
	for _, hd := range m.Headers {
		add(hd.Name, v[hd.Slot])
	}
	if m.TraceParent >= 0 {
		if tp := v[m.TraceParent]; tp != nil && (m.InvalidTrace == mapping.TracePass || mapping.ValidTraceParent(tp)) {
			add(HeaderTraceParent, tp)
		}
	}
	if m.TraceState >= 0 {
		if ts := v[m.TraceState]; ts != nil && (m.InvalidTrace == mapping.TracePass || mapping.ValidTraceState(ts)) {
			add(HeaderTraceState, ts)
		}
	}
	if m.CloudEvents {
		add(HeaderCESpecVersion, specVersion)
		add(HeaderCEID, v[m.ID])
		src, _ := m.CESource.Append(nil, v)
		add(HeaderCESource, src)
		if m.CEType >= 0 {
			add(HeaderCEType, v[m.CEType])
		}
		if m.CETime >= 0 && v[m.CETime] != nil {
			add(HeaderCETime, rfc3339(v[m.CETime]))
		}
		add(HeaderContentType, []byte(m.ContentType))
	}
	at := len(buf)
	buf = appendFilePos(buf, e.Pos)
	add(HeaderBinlogPos, cut(at))
	at = len(buf)
	buf = appendFilePos(buf, end)
	add(HeaderTxnEnd, cut(at))
	if e.Pos.GTID != "" {
		at = len(buf)
		buf = append(buf, e.Pos.GTID...)
		add(HeaderGTID, cut(at))
	}
	var key []byte
	if len(m.Key) == 1 {
		key = v[m.Key[0]]
	} else {
		at = len(buf)
		for i, k := range m.Key {
			if i > 0 {
				buf = append(buf, ':')
			}
			buf = append(buf, v[k]...)
		}
		key = cut(at)
	}
	value := e.Payload
	if m.Encoded() { // a Connect converter's bytes (mapping.Config.Format)
		key, value = m.EncodeKey(key), m.EncodeRow(value, v)
	}
	msg := kafka.Message{Topic: topic, Key: key, Value: value, Headers: h, WriterData: e.Table}
	if m.Timestamp >= 0 && v[m.Timestamp] != nil {
		if t, err := time.Parse(time.DateTime, string(v[m.Timestamp])); err == nil {
			msg.Time = t
		}
	}
	if m.Partition >= 0 && v[m.Partition] != nil {
		if p, err := strconv.ParseInt(string(v[m.Partition]), 10, 64); err == nil && p >= 0 {
			msg.WriterData = ExplicitPartition{P: p, Table: e.Table}
		}
	}
	return msg, terr
}

var specVersion = []byte("1.0")

// rfc3339 turns "YYYY-MM-DD hh:mm:ss[.ffffff]" (UTC) into RFC 3339,
// "YYYY-MM-DDThh:mm:ss[.ffffff]Z", as CloudEvents' time attribute wants.
func rfc3339(v []byte) []byte {
	out := make([]byte, 0, len(v)+1)
	out = append(out, v...)
	if len(out) > 10 && out[10] == ' ' {
		out[10] = 'T'
	}
	return append(out, 'Z')
}

// balancer is Balancer: murmur2 of the key, or an ExplicitPartition.
type balancer struct{ hash kafka.Murmur2Balancer }

func (b *balancer) Balance(msg kafka.Message, partitions ...int) int {
	if p, ok := msg.WriterData.(ExplicitPartition); ok && len(partitions) > 0 {
		return partitions[int(p.P%int64(len(partitions)))]
	}
	return b.hash.Balance(msg, partitions...)
}
