package consumer

import (
	"errors"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// Header names the publisher sets (router.Header*); repeated here so that a
// consumer does not import the publisher's packages.
const (
	HeaderEventID    = "event_id"
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

	ConversationID int64  // the key
	EventID        uint64 // outbox id: the dedupe key
	EventType      string
	MessageID      int64
	SeqNo          int64
	SenderID       int64
	ReceiverID     int64
	CreatedAt      string // the outbox row's created_at as the publisher rendered it
	BinlogPos      string // "file:pos" of the row event
	TxnEnd         string // "file:pos" after the transaction's commit
	GTID           string // empty without GTIDs

	Replayed bool   // re-published by "cdc-outbox replay"
	ReplayID string // the replay run, when Replayed
	Backfill bool   // published by the backfill (snapshot) source

	// Late is set by the Consumer on a record handed over after a later
	// seq_no of its conversation: a replay or resend filling a gap that was
	// reported before.
	Late bool

	Payload []byte // the payload column, JSON
}

// Decode turns a Kafka message into a Record. A message without a decimal
// key, event_id or seq_no header gives a *RecordError (ErrInvalidRecord);
// the other numeric headers are optional but must be decimal when present.
func Decode(m kafka.Message) (Record, error) {
	r := Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Time: m.Time, Payload: m.Value}
	fail := func(h string, err error) (Record, error) {
		return Record{}, &RecordError{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Header: h, Err: err}
	}
	var err error
	if r.ConversationID, err = strconv.ParseInt(string(m.Key), 10, 64); err != nil {
		return fail("(key)", errors.New("the key is not a decimal conversation_id"))
	}
	var haveID, haveSeq bool
	for _, h := range m.Headers {
		v := string(h.Value)
		switch h.Key {
		case HeaderEventID:
			if r.EventID, err = strconv.ParseUint(v, 10, 64); err != nil {
				return fail(h.Key, err)
			}
			haveID = true
		case HeaderSeqNo:
			if r.SeqNo, err = strconv.ParseInt(v, 10, 64); err != nil {
				return fail(h.Key, err)
			}
			haveSeq = true
		case HeaderMessageID:
			if r.MessageID, err = strconv.ParseInt(v, 10, 64); err != nil {
				return fail(h.Key, err)
			}
		case HeaderSenderID:
			if r.SenderID, err = strconv.ParseInt(v, 10, 64); err != nil {
				return fail(h.Key, err)
			}
		case HeaderReceiverID:
			if r.ReceiverID, err = strconv.ParseInt(v, 10, 64); err != nil {
				return fail(h.Key, err)
			}
		case HeaderEventType:
			r.EventType = v
		case HeaderCreatedAt:
			r.CreatedAt = v
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
	}
	if !haveID {
		return fail(HeaderEventID, errors.New("missing"))
	}
	if !haveSeq {
		return fail(HeaderSeqNo, errors.New("missing"))
	}
	return r, nil
}
