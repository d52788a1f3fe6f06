package check

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/sink"
)

func TestCheckReport(t *testing.T) {
	var b bytes.Buffer
	r := NewReport(&b)
	r.ok("redis", "up")
	r.fail("topic", "t does not exist: create it")
	r.Summary()
	want := "OK    redis        up\nFAIL  topic        t does not exist: create it\nresult: FAILED (1 of 2 checks failed)\n"
	if b.String() != want || r.failed != 1 {
		t.Errorf("got:\n%s", b.String())
	}
}

// A routed topic Kafka would refuse: FAIL under kafka.on-poison: fail (run
// stops at the row), WARN naming the dead-letter topic under dead-letter.
func TestInvalidTopic(t *testing.T) {
	for _, c := range []struct {
		policy, want string
	}{
		{sink.PolicyFail, `FAIL  topic        "a b" (router.topic) is not a valid Kafka topic name (bad): run stops at the first such row not yet published (kafka.on-poison: fail); fix the rows' values or the mapping's topic, or set kafka.on-poison: dead-letter` + "\n"},
		{sink.PolicyDeadLetter, `WARN  topic        "a b" (router.topic) is not a valid Kafka topic name (bad): the rows routed to it are dead-lettered to dlq (kafka.on-poison: dead-letter); fix their values or the mapping's topic` + "\n"},
	} {
		var b bytes.Buffer
		invalidTopic(sink.Config{OnPoison: c.policy, DeadLetterTopic: "dlq"}, "a b", "router.topic", errors.New("bad"), NewReport(&b))
		if b.String() != c.want {
			t.Errorf("%s: got\n%s", c.policy, b.String())
		}
	}
}

// A routed topic's origin names the setting and, for a mapping, the table.
func TestRoutedOrigin(t *testing.T) {
	m, err := mapping.RouterTopic("im.{event_type}")
	if err != nil {
		t.Fatal(err)
	}
	if got := (routed{table: "im.t", setting: "router.topic", m: m}).origin(); got != "router.topic" {
		t.Errorf("router.topic: %q", got)
	}
	if got := (routed{table: "im.t", setting: "source.tables[1]", m: m}).origin(); got != "source.tables[1] topic template im.{event_type} of table im.t" {
		t.Errorf("source.tables[1]: %q", got)
	}
}
