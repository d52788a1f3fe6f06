package sink

import (
	"errors"
	"fmt"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// ErrRecordTooLarge reports a record larger than kafka.batch-bytes (or than
// the broker's message.max.bytes / the topic's max.message.bytes). Raise
// those limits together, or shrink the payload.
var ErrRecordTooLarge = errors.New("sink: record too large")

// PartitionCountError reports a topic whose partition count changed under
// a running Producer (Pin, or its first use of the topic): producing on
// would move keys to other partitions and break per-key order across the
// change, so the Producer refuses before sending anything with the new
// count. It matches ErrPartitionCount; IsFatal reports it.
type PartitionCountError struct {
	Topic       string
	Pinned, Now int
}

func (e *PartitionCountError) Error() string {
	return fmt.Sprintf("topic %s has %d partitions now, %d when the publisher started using it", e.Topic, e.Now, e.Pinned)
}

// Is makes a *PartitionCountError match ErrPartitionCount.
func (e *PartitionCountError) Is(target error) bool { return target == ErrPartitionCount }

// ErrPartitionCount matches every *PartitionCountError.
var ErrPartitionCount = errors.New("sink: topic partition count changed")

// MetadataError is a failed metadata request to the brokers (Partitions):
// the cluster unreachable or not answering.
type MetadataError struct {
	Topic   string
	Brokers []string
	Err     error
}

func (e *MetadataError) Error() string {
	return fmt.Sprintf("sink: metadata of %s from %v: %v", e.Topic, e.Brokers, e.Err)
}

func (e *MetadataError) Unwrap() error { return e.Err }

// WriteError is a failed produce round. EventID, Topic and Pos identify the
// first record that failed and the position of its transaction's end.
type WriteError struct {
	EventID string
	Topic   string
	Pos     binlog.Position
	Err     error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("sink: write event %s to topic %s (transaction ending at %s): %v", e.EventID, e.Topic, e.Pos, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// ErrPoison matches every *PoisonError: a record that can never be
// published as it is (see Check), stopping the publisher under the fail
// policy.
var ErrPoison = errors.New("sink: poison record")

// ErrInvalidJSON reports a payload that is not valid JSON (RFC 8259, as
// json.Valid), possible when the outbox payload column is TEXT/LONGTEXT
// rather than a checked JSON column.
var ErrInvalidJSON = errors.New("sink: payload is not valid JSON")

// PoisonError stops the publisher under kafka.on-poison: fail. Everything
// before the poison record's transaction is acknowledged (and checkpointed
// once the pipeline stops); nothing of that transaction or after it was
// acknowledged. What of its transaction was published (written, never
// acknowledged: every restart writes it again) is Published's: nothing,
// except for a transaction passed on in fragments (its fragments before
// the poison row's) and for ReasonBrokerTooLarge (found by sending: the
// records of its produce round).
type PoisonError struct {
	EventID string          // the outbox row's id
	Reason  Reason          // machine code, e.g. invalid_json
	Topic   string          // the topic the record was meant for
	Row     string          // where the row event starts, "file:pos", for tracing
	Pos     binlog.Position // the end of the record's own transaction (binlog.Txn.Own), with its GTID
	// Resume is the end of the last transaction acknowledged before it,
	// where the checkpoint lands; zero when this run acknowledged none (the
	// checkpoint then stays where the run started).
	Resume binlog.Position
	// Published is how many rows of its transaction were published before
	// it: the rows of the fragments before the poison row's, when the
	// transaction is passed on in fragments (binlog.Txn.Partial: more than
	// binlog.ChunkEvents rows or binlog.ChunkBytes of payload); FirstID
	// and LastID are the first and last of their event ids. 0: none.
	Published       int
	FirstID, LastID string
	Err             error // the cause, matching ErrRecordTooLarge, ErrInvalidJSON, router.ErrTopic or binlog.ErrDecode
}

func (e *PoisonError) Error() string {
	resume := "the position this run started from"
	if !e.Resume.IsZero() {
		resume = e.Resume.String()
	}
	skip := e.Pos.FilePos()
	if e.Pos.File == "" {
		skip = "gtid:" + e.Pos.GTIDSet
	}
	published, rest := e.published()
	return fmt.Sprintf("sink: poison record (%s): event %s for topic %s, row at %s, transaction ending at %s: %v; "+
		"the checkpoint stays at the end of the transaction before it (%s); %s. "+
		"Fix the cause (see docs/poison.md) and restart; or set kafka.on-poison: %s to dead-letter it and go on; "+
		"or skip %s: cdc-outbox checkpoint set %s",
		e.Reason, e.EventID, e.Topic, e.Row, e.Pos, e.Err, resume, published, PolicyDeadLetter, rest, skip)
}

// published says what of the poison record's transaction was published
// and what skipping the transaction leaves unpublished (docs/poison.md).
func (e *PoisonError) published() (published, skip string) {
	switch {
	case e.Reason == ReasonBrokerTooLarge:
		return "it was found only by sending it: records sent with it before the broker refused it (of its transaction, and of later ones " +
				"on other partitions) may have been published, and are again at every restart",
			"the whole transaction (its rows are then not published, except any that round wrote)"
	case e.Published > 0:
		return fmt.Sprintf("its transaction is passed on in fragments (too large to hold whole): the %d rows of its fragments before this row's "+
				"(event %s to event %s) were published, and are again at every restart; nothing of it after them", e.Published, e.FirstID, e.LastID),
			fmt.Sprintf("the rest of the transaction (its rows after those %d are then not published)", e.Published)
	}
	return "nothing of its transaction was published", "the whole transaction (none of its rows is then published)"
}

// Is reports whether target is ErrPoison.
func (e *PoisonError) Is(target error) bool { return target == ErrPoison }

// Unwrap returns the cause.
func (e *PoisonError) Unwrap() error { return e.Err }

// ErrMirror reports a checkpoint mirror topic (checkpoint.mirror-topic)
// that cannot be used: missing and not creatable. Fatal: the error names
// the fix.
var ErrMirror = errors.New("sink: checkpoint mirror topic")

// Settings that bound the waits for a broker's answer, as TimeoutError
// names them.
const (
	withinDial  = "kafka.dial-timeout"
	withinWrite = "kafka.write-timeout"
)

// ErrBrokerSilent matches every *TimeoutError.
var ErrBrokerSilent = errors.New("sink: no answer from a broker")

// TimeoutError reports a broker that accepted the connection but answered
// nothing within a bound of the configuration (a stopped or overloaded
// broker, a silent network): Within names that setting (kafka.dial-timeout
// for a connection's handshake and metadata, kafka.write-timeout for a
// produce or transaction request), Bound its value. It matches
// ErrBrokerSilent; a retry may succeed (not IsFatal).
type TimeoutError struct {
	Addr   string // the broker
	What   string // what went unanswered: "the connection's handshake", "a Metadata request", ...
	Within string // the setting
	Bound  time.Duration
	Err    error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("sink: no answer from broker %s to %s within %s (%s): the broker accepts connections but holds them (stopped, overloaded, or a silent network); check it, or raise %s if it is only slow: %v",
		e.Addr, e.What, e.Within, e.Bound, e.Within, e.Err)
}

// Is makes a *TimeoutError match ErrBrokerSilent.
func (e *TimeoutError) Is(target error) bool { return target == ErrBrokerSilent }

func (e *TimeoutError) Unwrap() error { return e.Err }
