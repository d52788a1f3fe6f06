package router

import (
	"fmt"
	"strings"
)

// Reserved names the topics the publisher writes itself: no outbox row's
// record may go to them (a normal record in the dead-letter topic would
// pass for a dead letter; one in the mirror topic for a checkpoint copy).
type Reserved struct {
	DeadLetter string // kafka.dead-letter-topic ("" for none)
	Mirror     string // checkpoint.mirror-topic ("" for none)
}

// Key returns the configuration key naming t when t is reserved
// ("kafka.dead-letter-topic", "checkpoint.mirror-topic"), else "".
func (r Reserved) Key(t string) string {
	switch {
	case t == "":
		return ""
	case t == r.DeadLetter:
		return "kafka.dead-letter-topic"
	case t == r.Mirror:
		return "checkpoint.mirror-topic"
	}
	return ""
}

// Routed is what routing found out about one record's topic: the facts
// CheckTopic decides on.
type Routed struct {
	// Topic is the routed name ("" when a NULL left none).
	Topic string
	// By names what gave the name, for the messages and the fix:
	// "event_type" (router.topic's placeholder), the mapped column(s)
	// ("aggregatetype"; "region, aggregatetype"), or "" for a configured
	// name (router.topic or a mapping's topic without placeholders).
	By string
	// Empty is the placeholder (or topic column) whose value was the
	// empty string, "" for none.
	Empty string
	// Null is the column whose value was NULL, "" for none.
	Null string
}

// CheckTopic is the one decision on a routed topic, made for every record
// on every path (run, backfill, replay, dead-letter republish, their dry
// runs): nil when the record may be written to f.Topic, else a
// *TopicError whose Err is the first that applies of
//
//	fact                                                   Err
//	a NULL value (f.Null)                                  ErrNullTopic
//	an empty placeholder value (f.Empty)                   ErrEmptyPlaceholder
//	a name Kafka's rules refuse (length, characters, . ..) ErrTopicName
//	a name starting with "__" (Kafka's internal topics)    ErrInternalTopic
//	kafka.dead-letter-topic or checkpoint.mirror-topic     ErrReservedTopic
//
// (the table of docs/poison.md, "invalid_topic"). A record refused here is
// a poison record (sink.ReasonInvalidTopic) under kafka.on-poison.
func CheckTopic(f Routed, res Reserved) error {
	var why error
	key := ""
	switch {
	case f.Null != "":
		why = fmt.Errorf("%w: column %s", ErrNullTopic, f.Null)
	case f.Empty != "":
		why = fmt.Errorf("%w: %s is empty", ErrEmptyPlaceholder, f.Empty)
	default:
		if why = ValidTopic(f.Topic); why == nil {
			if key = res.Key(f.Topic); key == "" {
				return nil
			}
			why = fmt.Errorf("%w: it is %s", ErrReservedTopic, key)
		}
	}
	fix := "change the configured topic (router.topic, or the mapping's topic)"
	if f.By != "" {
		fix = "correct the row's " + f.By + " (and the writer), or change the topic template"
	}
	switch {
	case f.Null != "":
		fix = "give the row's " + f.Null + " a value (the column should be NOT NULL)"
	case f.Empty != "":
		fix = fmt.Sprintf("give the row's %s a value (a CHECK (%s <> '') on the outbox table keeps writers from leaving it empty)", f.Empty, f.Empty)
	case key != "":
		fix += ", or choose another " + key
	}
	return &TopicError{Topic: f.Topic, By: f.By, Err: why, Fix: fix}
}

// ValidTopic reports why no record may be written to the topic named t,
// or nil: Kafka's topic name rules (kafka.common.internals.Topic: 1 to 249
// characters of [a-zA-Z0-9._-], not "." or ".."; ErrTopicName) and
// Kafka's internal names (starting with "__", ErrInternalTopic). It is
// also the check of every configured topic name.
func ValidTopic(t string) error {
	if t == "" || len(t) > 249 {
		return fmt.Errorf("%w: length %d: want 1 to 249 characters", ErrTopicName, len(t))
	}
	if t == "." || t == ".." {
		return fmt.Errorf(`%w: "." and ".." are not allowed`, ErrTopicName)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: character %q at %d: only [a-zA-Z0-9._-] are allowed", ErrTopicName, c, i)
		}
	}
	if strings.HasPrefix(t, "__") {
		return ErrInternalTopic
	}
	return nil
}
