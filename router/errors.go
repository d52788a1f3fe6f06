package router

import (
	"errors"
	"fmt"
)

// ErrTopic reports a record whose routed topic may not take it (see
// CheckTopic): every *TopicError matches it.
var ErrTopic = errors.New("router: invalid topic")

// Why a routed topic may not take a record (TopicError.Err matches one).
var (
	// ErrTopicName: Kafka's topic name rules refuse the name.
	ErrTopicName = errors.New("not a valid Kafka topic name")
	// ErrInternalTopic: the name starts with "__", Kafka's own topics
	// (__consumer_offsets, __transaction_state, ...).
	ErrInternalTopic = errors.New(`a Kafka-internal topic name (starts with "__")`)
	// ErrEmptyPlaceholder: a placeholder's value is the empty string; the
	// name may be valid ("im."), but it is no one's topic.
	ErrEmptyPlaceholder = errors.New("empty value in the topic template")
	// ErrNullTopic: the value a topic name is made of is NULL.
	ErrNullTopic = errors.New("NULL value for the topic")
	// ErrReservedTopic: the name is a topic the publisher writes itself,
	// kafka.dead-letter-topic or checkpoint.mirror-topic.
	ErrReservedTopic = errors.New("a topic of the publisher's own")
)

// TopicError is a routed topic that may not take the record, decided by
// CheckTopic. It matches ErrTopic and its Err with errors.Is.
type TopicError struct {
	Topic string // the routed name ("" when a NULL left none)
	By    string // what gave the name: "event_type", the mapped column(s); "" for a configured name
	Err   error  // why: ErrTopicName (wrapping Kafka's rule), ErrInternalTopic, ErrEmptyPlaceholder, ErrNullTopic or ErrReservedTopic
	Fix   string // what the operator does
}

func (e *TopicError) Error() string {
	from := "configured"
	if e.By != "" {
		from = "from " + e.By
	}
	return fmt.Sprintf("%v %q (%s): %v: %s", ErrTopic, e.Topic, from, e.Err, e.Fix)
}

// Is reports whether target is ErrTopic.
func (e *TopicError) Is(target error) bool { return target == ErrTopic }

// Unwrap returns the reason.
func (e *TopicError) Unwrap() error { return e.Err }
