package router

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/segmentio/kafka-go"
)

// Header names set on every record.
const (
	HeaderEventID    = "event_id"
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
	Topic string `yaml:"topic" env:"TOPIC"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{Topic: "im.events"} }

// Validate checks the topic template.
func (c *Config) Validate() error {
	if c.Topic == "" {
		return errors.New("router.topic: required: a topic name or a template such as im.{event_type}")
	}
	probe := strings.ReplaceAll(c.Topic, placeholder, "x")
	if err := validTopic(probe); err != nil {
		return fmt.Errorf("router.topic: %q: %v", c.Topic, err)
	}
	return nil
}

// Router turns events into Kafka records. It is safe for concurrent use.
type Router struct {
	topic    string
	template bool
}

// New returns a Router for a validated Config.
func New(cfg Config) *Router {
	return &Router{topic: cfg.Topic, template: strings.Contains(cfg.Topic, placeholder)}
}

// Topic returns the topic of an event type. An invalid name gives a
// *TopicError (matching ErrTopic) together with the invalid name.
func (r *Router) Topic(eventType string) (string, error) {
	if !r.template {
		return r.topic, nil
	}
	t := strings.ReplaceAll(r.topic, placeholder, eventType)
	if err := validTopic(t); err != nil {
		return t, &TopicError{EventType: eventType, Topic: t, Err: err}
	}
	return t, nil
}

// Route returns the record for e. end is the position after e's transaction.
//
// When e's event_type gives an invalid topic, Route returns a *TopicError
// (matching ErrTopic) together with the complete record, its Topic set to
// the invalid name, so that a dead-letter policy can keep its key, value
// and headers.
func (r *Router) Route(e *binlog.Event, end binlog.Position) (kafka.Message, error) {
	topic, terr := r.Topic(e.EventType)
	h := make([]kafka.Header, 0, 10)
	h = append(h,
		kafka.Header{Key: HeaderEventID, Value: strconv.AppendUint(nil, e.ID, 10)},
		kafka.Header{Key: HeaderEventType, Value: []byte(e.EventType)},
		kafka.Header{Key: HeaderMessageID, Value: strconv.AppendInt(nil, e.MessageID, 10)},
		kafka.Header{Key: HeaderSeqNo, Value: strconv.AppendInt(nil, e.SeqNo, 10)},
		kafka.Header{Key: HeaderSenderID, Value: strconv.AppendInt(nil, e.SenderID, 10)},
		kafka.Header{Key: HeaderReceiverID, Value: strconv.AppendInt(nil, e.ReceiverID, 10)},
		kafka.Header{Key: HeaderCreatedAt, Value: []byte(e.CreatedAt)},
		kafka.Header{Key: HeaderBinlogPos, Value: []byte(e.Pos.FilePos())},
		kafka.Header{Key: HeaderTxnEnd, Value: []byte(end.FilePos())},
	)
	if e.Pos.GTID != "" {
		h = append(h, kafka.Header{Key: HeaderGTID, Value: []byte(e.Pos.GTID)})
	}
	return kafka.Message{
		Topic:   topic,
		Key:     strconv.AppendInt(nil, e.ConversationID, 10),
		Value:   e.Payload,
		Headers: h,
	}, terr
}

// ValidTopic reports why Kafka would reject the topic name t, or nil.
func ValidTopic(t string) error { return validTopic(t) }

// validTopic applies Kafka's topic name rules (kafka.common.internals.Topic):
// 1-249 characters of [a-zA-Z0-9._-], not "." or "..".
func validTopic(t string) error {
	if t == "" || len(t) > 249 {
		return fmt.Errorf("length %d: want 1 to 249 characters", len(t))
	}
	if t == "." || t == ".." {
		return errors.New(`"." and ".." are not allowed`)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("character %q at %d: only [a-zA-Z0-9._-] are allowed", c, i)
		}
	}
	return nil
}

// Balancer returns the partitioner the sink uses: kafka-go's Murmur2Balancer,
// which matches the Java client's default partitioner for non-null keys,
// toPositive(murmur2(key)) % numPartitions
// (org.apache.kafka.clients.producer.internals.BuiltInPartitioner), so other
// producers using the same key agree on the partition.
func Balancer() kafka.Balancer { return &kafka.Murmur2Balancer{} }

// Partition returns the partition of a key among numPartitions partitions,
// as Balancer assigns it.
func Partition(key []byte, numPartitions int) int {
	parts := make([]int, numPartitions)
	for i := range parts {
		parts[i] = i
	}
	return Balancer().Balance(kafka.Message{Key: key}, parts...)
}
