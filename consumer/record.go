package consumer

import (
	"errors"
	"strconv"
	"time"

	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/segmentio/kafka-go"
)

// Header names the publisher sets on every record (router.Header*), and
// those of the im layout's typed fields; repeated here so that a consumer
// does not import the publisher's packages. The event id, sequence number
// and event type headers of each layout come from package mapping
// (Layout).
const (
	HeaderEventID    = mapping.HeaderEventID
	HeaderEventType  = "event_type"
	HeaderMessageID  = "message_id"
	HeaderSeqNo      = "seq_no"
	HeaderSenderID   = "sender_id"
	HeaderReceiverID = "receiver_id"
	HeaderCreatedAt  = "created_at"
	HeaderBinlogPos  = "binlog_pos"
	HeaderTxnEnd     = "binlog_txn_end"
	HeaderGTID       = "gtid"
	HeaderReplayed   = "replayed"
	HeaderReplayID   = "replay_id"
	HeaderBackfill   = "backfill"
)

// Record is one outbox event as the publisher sent it.
type Record struct {
	Topic     string
	Partition int
	Offset    int64
	Time      time.Time // the record's Kafka timestamp

	EventID   string // the dedupe key: the layout's event id header, as sent ("42", a UUID)
	Key       string // the ordering key: the record key, or the layout's key header
	EventType string // the layout's event type header; empty without one
	SeqNo     int64  // the layout's sequence number; 0 without one

	// The im layout's fields (zero in other layouts; Headers has them all).
	ConversationID int64 // the key, a decimal conversation_id
	MessageID      int64
	SenderID       int64
	ReceiverID     int64
	CreatedAt      string // the outbox row's created_at as the publisher rendered it

	BinlogPos string // "file:pos" of the row event
	TxnEnd    string // "file:pos" after the transaction's commit
	GTID      string // empty without GTIDs

	Replayed bool   // re-published by "cdc-outbox replay"
	ReplayID string // the replay run, when Replayed
	Backfill bool   // published by the backfill (snapshot) source

	// Late is set by the Consumer on a record handed over after a later
	// seq_no of its conversation: a replay or resend filling a gap that was
	// reported before. Never set without a sequence number.
	Late bool

	Headers []kafka.Header // every header, as sent
	Payload []byte         // the record value (the payload column)
}

// Decode turns a Kafka message into a Record by layout l (its empty fields
// take the preset's values, Layout.WithDefaults). A message without the
// event id header, without the key (or key header), or without a decimal
// sequence number when l has one, gives a *RecordError (ErrInvalidRecord);
// so does, in the im layout, a key that is not a decimal conversation_id
// or an im numeric header that is not decimal.
func (l Layout) Decode(m kafka.Message) (Record, error) {
	if l.EventID == "" {
		l = l.WithDefaults()
	}
	im := l.Preset == mapping.PresetIM
	r := Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Time: m.Time, Payload: m.Value, Headers: m.Headers}
	fail := func(h string, err error) (Record, error) {
		return Record{}, &RecordError{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Header: h, Err: err, Layout: l}
	}
	var err error
	var haveID, haveSeq, haveKey bool
	if l.Key == "" {
		r.Key, haveKey = string(m.Key), m.Key != nil
	}
	num := func(v string, dst *int64) error {
		*dst, err = strconv.ParseInt(v, 10, 64)
		return err
	}
	for _, h := range m.Headers {
		if h.Key == "" {
			continue
		}
		v := string(h.Value)
		// One header may take several roles (the key and the event type).
		if h.Key == l.EventID {
			r.EventID, haveID = v, len(v) > 0
		}
		if h.Key == l.SeqNo && l.HasSeqNo() {
			if err := num(v, &r.SeqNo); err != nil {
				return fail(h.Key, err)
			}
			haveSeq = true
		}
		if h.Key == l.Key {
			r.Key, haveKey = v, true
		}
		if h.Key == l.EventType {
			r.EventType = v
		}
		switch h.Key {
		case HeaderBinlogPos:
			r.BinlogPos = v
		case HeaderTxnEnd:
			r.TxnEnd = v
		case HeaderGTID:
			r.GTID = v
		case HeaderReplayed:
			r.Replayed = v == "true"
		case HeaderReplayID:
			r.ReplayID = v
		case HeaderBackfill:
			r.Backfill = v == "true"
		}
		if !im {
			continue
		}
		var dst *int64
		switch h.Key {
		case HeaderMessageID:
			dst = &r.MessageID
		case HeaderSenderID:
			dst = &r.SenderID
		case HeaderReceiverID:
			dst = &r.ReceiverID
		case HeaderCreatedAt:
			r.CreatedAt = v
		}
		if dst != nil {
			if err := num(v, dst); err != nil {
				return fail(h.Key, err)
			}
		}
	}
	if !haveKey {
		if l.Key != "" {
			return fail(l.Key, errors.New("missing (the ordering key)"))
		}
		return fail("(key)", errors.New("the record has no key"))
	}
	if im && l.Key == "" {
		if r.ConversationID, err = strconv.ParseInt(r.Key, 10, 64); err != nil {
			return fail("(key)", errors.New("the key is not a decimal conversation_id"))
		}
	}
	if !haveID {
		return fail(l.EventID, errors.New("missing or empty (the event id)"))
	}
	if l.HasSeqNo() && !haveSeq {
		return fail(l.SeqNo, errors.New("missing (the sequence number)"))
	}
	return r, nil
}
