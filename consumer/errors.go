package consumer

import (
	"errors"
	"fmt"
)

// ErrInvalidRecord matches a *RecordError: a record that does not fit the
// Layout (a header missing or malformed): another producer's, or the
// layout is not the publisher's.
var ErrInvalidRecord = errors.New("not a cdc-outbox record")

// RecordError is a record Decode refused, with its coordinates.
type RecordError struct {
	Topic     string
	Partition int
	Offset    int64
	Header    string // the missing or malformed header; "(key)" for the record key
	Err       error
	Layout    Layout // the layout the record was decoded by
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("%s/%d@%d: header %q: %v (layout %s; set Config.Layout to the publisher's mapping, and Options.OnInvalid to dead-letter other producers' records)",
		e.Topic, e.Partition, e.Offset, e.Header, e.Err, e.Layout)
}

// Is makes errors.Is(err, ErrInvalidRecord) true.
func (e *RecordError) Is(target error) bool { return target == ErrInvalidRecord }

// Unwrap returns the parse error.
func (e *RecordError) Unwrap() error { return e.Err }

// HandlerError is returned by Run when the handler failed on a record
// Config.HandlerAttempts times. The record was not committed: the next
// Run of the group gets it again.
type HandlerError struct {
	Topic     string
	Partition int
	Offset    int64
	EventID   string
	Attempts  int
	Err       error
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("handler failed %d times on %s/%d@%d (event id %s): %v", e.Attempts, e.Topic, e.Partition, e.Offset, e.EventID, e.Err)
}

// Unwrap returns the handler's last error.
func (e *HandlerError) Unwrap() error { return e.Err }

// StoreError is returned by Run when the dedupe Store failed
// Config.HandlerAttempts times (Op is "seen" or "mark").
type StoreError struct {
	Op      string
	EventID string
	Err     error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("dedupe store %s event id %s: %v", e.Op, e.EventID, e.Err)
}

// Unwrap returns the store's last error.
func (e *StoreError) Unwrap() error { return e.Err }

// GapError is returned by Run when Options.OnGap returned an error.
type GapError struct {
	Gap Gap
	Err error
}

func (e *GapError) Error() string { return fmt.Sprintf("%s: %v", e.Gap, e.Err) }

// Unwrap returns OnGap's error.
func (e *GapError) Unwrap() error { return e.Err }
