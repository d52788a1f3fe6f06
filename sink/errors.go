package sink

import (
	"errors"
	"fmt"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// ErrRecordTooLarge reports a record larger than kafka.batch-bytes (or than
// the broker's message.max.bytes / the topic's max.message.bytes). Raise
// those limits together, or shrink the payload.
var ErrRecordTooLarge = errors.New("sink: record too large")

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
