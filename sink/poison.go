package sink

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
	json "github.com/segmentio/encoding/json" // Valid is 3x encoding/json's (BenchmarkValid*)
	"github.com/segmentio/kafka-go"
)

// Reason is the machine code of a poison record, the dlq_reason header.
type Reason string

// Poison reasons.
const (
	// ReasonInvalidJSON: the payload is not valid JSON.
	ReasonInvalidJSON Reason = "invalid_json"
	// ReasonTooLarge: the record is larger than kafka.batch-bytes.
	ReasonTooLarge Reason = "too_large"
	// ReasonBrokerTooLarge: the broker rejected the record alone with
	// MESSAGE_TOO_LARGE (message.max.bytes / the topic's max.message.bytes).
	ReasonBrokerTooLarge Reason = "broker_too_large"
	// ReasonInvalidTopic: the routed topic may not take the record
	// (router.CheckTopic: an invalid or Kafka-internal name, an empty
	// placeholder value, the dead-letter or the checkpoint mirror topic).
	ReasonInvalidTopic Reason = "invalid_topic"
	// ReasonMissingTopic: the routed topic does not exist (after the
	// producer's retry budget) under kafka.missing-topic: poison.
	ReasonMissingTopic Reason = "missing_topic"
	// ReasonUndecodable: the binlog reader could not turn the row into an
	// event (binlog.Event.Err: a NULL or out-of-range value in an outbox
	// column, or a NULL in the id, key, topic or payload column of its
	// mapping); the record carries what could be decoded.
	ReasonUndecodable Reason = "undecodable"
)

// Headers added to dead-letter records, on top of all the normal headers
// (router.Header*, including the source position headers binlog_pos,
// binlog_txn_end and gtid).
const (
	HeaderDLQReason = "dlq_reason" // a Reason
	HeaderDLQError  = "dlq_error"  // human-readable cause
	HeaderDLQTopic  = "dlq_topic"  // the topic the record was meant for
	// HeaderDLQTable is the outbox table of the row ("schema.table"), set
	// for a table with a mapping or of source.tables (none for the single
	// im table): where "dead-letter republish" reads the row again.
	HeaderDLQTable = "dlq_table"
	// HeaderDLQPayloadBytes is the payload's size in bytes (decimal), set
	// when the value was left out because the record was too large; the
	// payload stays in the outbox row.
	HeaderDLQPayloadBytes = "dlq_payload_bytes"
	// HeaderRepublishedFrom marks a record re-published by
	// "cdc-outbox dead-letter republish"; its value is "dead-letter".
	HeaderRepublishedFrom = "republished_from"
)

// Poison describes why a record can never be published as it is.
type Poison struct {
	Reason Reason
	Err    error  // the cause, matching ErrInvalidJSON, ErrRecordTooLarge, router.ErrTopic or binlog.ErrDecode
	Topic  string // the topic the record was meant for (the invalid name for ReasonInvalidTopic)
	Table  string // the row's table ("schema.table"; "" for the single im table: binlog.Event.Table nil)
}

// Check classifies a routed record: m and routeErr are what Router.Route
// returned, maxBytes is kafka.batch-bytes. It returns the poison found
// (checked in this order: invalid topic, larger than maxBytes by the
// sink's size estimate, payload not valid JSON), or nil when the record
// can be sent. A route error other than router.ErrTopic is returned as is.
// A broker's MESSAGE_TOO_LARGE (ReasonBrokerTooLarge) is only found by
// sending.
func Check(m *kafka.Message, routeErr error, maxBytes int64) (*Poison, error) {
	return check(m, routeErr, maxBytes, true, m.Value)
}

// check is Check; json false skips the JSON validation (a mapping whose
// payload is not JSON: mapping.Mapping.PayloadJSON), which judges payload
// (the record's value, or the payload column's bytes when a format
// encodes the value).
func check(m *kafka.Message, routeErr error, maxBytes int64, jsonPayload bool, payload []byte) (*Poison, error) {
	if routeErr != nil {
		if !errors.Is(routeErr, router.ErrTopic) {
			return nil, routeErr
		}
		return &Poison{Reason: ReasonInvalidTopic, Err: routeErr, Topic: m.Topic}, nil
	}
	if size := estimate(m); size > maxBytes {
		return &Poison{Reason: ReasonTooLarge, Topic: m.Topic,
			Err: fmt.Errorf("%w: %d bytes > kafka.batch-bytes %d", ErrRecordTooLarge, size, maxBytes)}, nil
	}
	if jsonPayload && !json.Valid(payload) {
		return &Poison{Reason: ReasonInvalidJSON, Topic: m.Topic,
			Err: fmt.Errorf("%w (%d bytes)", ErrInvalidJSON, len(payload))}, nil
	}
	return nil, nil
}

// CheckEvent is Check for an event and its routed record, as the Writer
// applies it (and "dead-letter republish" should): an event the reader
// could not decode (e.Err) is poison whatever its record
// (ReasonUndecodable); otherwise Check decides (without the JSON
// validation for a mapping whose payload-format is raw). The topic was
// decided by the router (router.CheckTopic, routeErr).
func CheckEvent(e *binlog.Event, m *kafka.Message, routeErr error, maxBytes int64) (*Poison, error) {
	var p *Poison
	var err error
	if e.Err != nil {
		p = &Poison{Reason: ReasonUndecodable, Err: e.Err, Topic: m.Topic}
	} else {
		// Without the JSON validation when the event's mapping says its
		// payload is not JSON (payload-format: raw).
		// A mapping that encodes the value (mapping.Config.Format) takes a
		// NULL payload as a record: a tombstone or the converter's null.
		jsonPayload := e.Table == nil || e.Table.Mapping.PayloadJSON && !(e.Payload == nil && e.Table.Mapping.NullPayload)
		// A value a Connect converter's format encodes (a JSON string, a
		// struct, StringConverter's Struct{...}) is not the payload: the
		// payload column is what must be JSON.
		payload := m.Value
		if e.Table != nil && e.Table.Mapping.Encoded() {
			payload = e.Payload
		}
		p, err = check(m, routeErr, maxBytes, jsonPayload, payload)
	}
	if p != nil && e.Table != nil {
		p.Table = e.Table.String()
	}
	return p, err
}

// DeadLetter returns the dead-letter record for m, poisoned by p, for topic:
// the same key (conversation_id, so that a conversation's dead letters
// stay ordered in one partition), all of m's headers plus dlq_reason,
// dlq_error and dlq_topic. The value is m's, except for too-large records
// and whenever the dead-letter record would exceed maxBytes: then it is
// empty and dlq_payload_bytes gives the payload's size.
func DeadLetter(m *kafka.Message, p *Poison, topic string, maxBytes int64) kafka.Message {
	h := make([]kafka.Header, 0, len(m.Headers)+4)
	h = append(h, m.Headers...)
	h = append(h,
		kafka.Header{Key: HeaderDLQReason, Value: []byte(p.Reason)},
		kafka.Header{Key: HeaderDLQError, Value: []byte(p.Err.Error())},
		kafka.Header{Key: HeaderDLQTopic, Value: []byte(p.Topic)},
	)
	table := p.Table
	if t, ok := m.WriterData.(interface{ OutboxTable() string }); ok && table == "" {
		table = t.OutboxTable() // a record the broker rejected (its Poison knows no event)
	}
	if table != "" {
		h = append(h, kafka.Header{Key: HeaderDLQTable, Value: []byte(table)})
	}
	out := kafka.Message{Topic: topic, Key: m.Key, Value: m.Value, Headers: h}
	if p.Reason == ReasonTooLarge || p.Reason == ReasonBrokerTooLarge || estimate(&out) > maxBytes {
		out = withoutValue(out, len(m.Value))
	}
	return out
}

// withoutValue drops m's value and records its size in dlq_payload_bytes.
func withoutValue(m kafka.Message, size int) kafka.Message {
	m.Value = nil
	m.Headers = append(m.Headers[:len(m.Headers):len(m.Headers)],
		kafka.Header{Key: HeaderDLQPayloadBytes, Value: strconv.AppendInt(nil, int64(size), 10)})
	return m
}
