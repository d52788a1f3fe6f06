package router

import (
	"errors"
	"fmt"
)

// ErrTopic reports an event whose event_type yields an invalid topic name.
var ErrTopic = errors.New("router: invalid topic")

// TopicError is an invalid topic name made from an event type. It matches
// ErrTopic with errors.Is.
type TopicError struct {
	EventType string // the event's event_type
	Topic     string // the topic name the template gave
	Err       error  // why Kafka would reject the name
}

func (e *TopicError) Error() string {
	return fmt.Sprintf("%v: event_type %q gives topic %q: %v", ErrTopic, e.EventType, e.Topic, e.Err)
}

// Is reports whether target is ErrTopic.
func (e *TopicError) Is(target error) bool { return target == ErrTopic }

// Unwrap returns the reason the name is invalid.
func (e *TopicError) Unwrap() error { return e.Err }
