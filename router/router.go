package router

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/segmentio/kafka-go"
)

// Header names set on every record.
const (
	HeaderEventID    = mapping.HeaderEventID
	HeaderEventType  = "event_type"
	HeaderMessageID  = "message_id"
	HeaderSeqNo      = "seq_no"
	HeaderSenderID   = "sender_id"
	HeaderReceiverID = "receiver_id"
	HeaderCreatedAt  = "created_at"
	HeaderBinlogPos  = "binlog_pos"     // "file:pos" of the row event
	HeaderGTID       = "gtid"           // the transaction's GTID, when known
	HeaderTxnEnd     = "binlog_txn_end" // "file:pos" after the transaction's commit: a resumable position
)

// Headers added by "cdc-outbox replay" to re-published records, on top of
// all the headers above (same event_id, so consumers dedupe).
const (
	HeaderReplayed = "replayed"  // "true"
	HeaderReplayID = "replay_id" // identifies one replay run (a random UUID)
)

const placeholder = "{event_type}"

// Config configures routing.
type Config struct {
	// Topic is a fixed topic name or a template containing {event_type}.
	Topic string `yaml:"topic" env:"TOPIC" doc:"The topic of every record (a preset or a mapping without a topic of its own): a name, or a template with {event_type}." rule:"required; a valid topic name, {event_type} the only placeholder; not the dead-letter or mirror topic"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{Topic: "im.events"} }

// Validate checks the topic template.
func (c *Config) Validate() error {
	if c.Topic == "" {
		return errors.New("router.topic: required: a topic name or a template such as im.{event_type}")
	}
	probe := strings.ReplaceAll(c.Topic, placeholder, "x")
	if i := strings.IndexAny(probe, "{}"); i >= 0 {
		return fmt.Errorf("router.topic: %q: %q at %d is not part of a known placeholder: the only placeholder is %s (e.g. im.%s)",
			c.Topic, probe[i], i, placeholder, placeholder)
	}
	if err := ValidTopic(probe); err != nil {
		return fmt.Errorf("router.topic: %q: %v", c.Topic, err)
	}
	return nil
}

// Router turns events into Kafka records. It is safe for concurrent use.
type Router struct {
	topic    string
	template bool
	reserved Reserved
	fixed    error // CheckTopic's verdict on a fixed router.topic
}

// New returns a Router for a validated Config; no record is routed to the
// reserved topics (kafka.dead-letter-topic, checkpoint.mirror-topic).
func New(cfg Config, reserved Reserved) *Router {
	r := &Router{topic: cfg.Topic, template: strings.Contains(cfg.Topic, placeholder), reserved: reserved}
	if !r.template {
		r.fixed = CheckTopic(Routed{Topic: cfg.Topic}, reserved)
	}
	return r
}

// Topic returns the topic of an event type. A topic no record may go to
// (CheckTopic) gives a *TopicError (matching ErrTopic) together with the
// name.
func (r *Router) Topic(eventType string) (string, error) {
	if !r.template {
		return r.topic, r.fixed
	}
	t := strings.ReplaceAll(r.topic, placeholder, eventType)
	f := Routed{Topic: t, By: HeaderEventType}
	if eventType == "" {
		// "im." is a valid name, but not the topic of any event type.
		f.Empty = HeaderEventType
	}
	return t, CheckTopic(f, r.reserved)
}

// Route returns the record for e. end is the position after e's transaction.
//
// When e's topic may not take the record (CheckTopic: an invalid or
// Kafka-internal name, an empty placeholder value, a reserved topic),
// Route returns a *TopicError (matching ErrTopic) together with the
// complete record, its Topic set to that name, so that a dead-letter
// policy can keep its key, value and headers.
func (r *Router) Route(e *binlog.Event, end binlog.Position) (kafka.Message, error) {
	if e.Table != nil && !e.Table.Mapping.IM {
		return r.routeMapped(e, end)
	}
	topic, terr := r.Topic(e.EventType)
	// One allocation for every header value and the key: the values are
	// sub-slices of buf, each capped so that appending to one cannot
	// overwrite the next. Decimal int64 values take at most 20 bytes.
	n := 5*20 + 20 + 20 + len(e.EventType) + len(e.CreatedAt) + len(e.Pos.File) + 11 + len(end.File) + 11 + len(e.Pos.GTID)
	buf := make([]byte, 0, n)
	cut := func(from int) []byte { return buf[from:len(buf):len(buf)] }
	var at int
	h := make([]kafka.Header, 0, 10)
	add := func(key string) {
		h = append(h, kafka.Header{Key: key, Value: cut(at)})
		at = len(buf)
	}
	buf = strconv.AppendUint(buf, e.ID, 10)
	add(HeaderEventID)
	buf = append(buf, e.EventType...)
	add(HeaderEventType)
	buf = strconv.AppendInt(buf, e.MessageID, 10)
	add(HeaderMessageID)
	buf = strconv.AppendInt(buf, e.SeqNo, 10)
	add(HeaderSeqNo)
	buf = strconv.AppendInt(buf, e.SenderID, 10)
	add(HeaderSenderID)
	buf = strconv.AppendInt(buf, e.ReceiverID, 10)
	add(HeaderReceiverID)
	buf = append(buf, e.CreatedAt...)
	add(HeaderCreatedAt)
	buf = appendFilePos(buf, e.Pos)
	add(HeaderBinlogPos)
	buf = appendFilePos(buf, end)
	add(HeaderTxnEnd)
	if e.Pos.GTID != "" {
		buf = append(buf, e.Pos.GTID...)
		add(HeaderGTID)
	}
	buf = e.AppendConversationKey(buf)
	m := kafka.Message{
		Topic:   topic,
		Key:     cut(at),
		Value:   e.Payload,
		Headers: h,
	}
	if e.Table != nil {
		m.WriterData = e.Table // the metrics' table label (a table of source.tables)
	}
	return m, terr
}

// appendFilePos appends p as "file:pos" (binlog.Position.FilePos).
func appendFilePos(b []byte, p binlog.Position) []byte {
	b = append(b, p.File...)
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(p.Pos), 10)
}

// Balancer returns the partitioner the sink uses: kafka-go's Murmur2Balancer,
// which matches the Java client's default partitioner for non-null keys,
// toPositive(murmur2(key)) % numPartitions
// (org.apache.kafka.clients.producer.internals.BuiltInPartitioner), so other
// producers using the same key agree on the partition.
//
// A record whose mapping has a partition column carries an
// ExplicitPartition in WriterData: it goes to that partition, modulo the
// partition count.
func Balancer() kafka.Balancer { return &balancer{} }

// Partition returns the partition of a key among numPartitions partitions,
// as Balancer assigns it.
func Partition(key []byte, numPartitions int) int {
	parts := make([]int, numPartitions)
	for i := range parts {
		parts[i] = i
	}
	return Balancer().Balance(kafka.Message{Key: key}, parts...)
}
