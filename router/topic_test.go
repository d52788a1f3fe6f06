package router

import (
	"errors"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/mapping"
)

// CheckTopic's table is docs/poison.md's invalid_topic row: each fact,
// the reason, and the fix the message names.
func TestCheckTopic(t *testing.T) {
	res := Reserved{DeadLetter: "cdc-outbox.dead-letter", Mirror: "cdc-outbox.checkpoints"}
	for _, c := range []struct {
		name string
		f    Routed
		want error  // nil: the record may go there
		fix  string // in the message
	}{
		{"a valid name", Routed{Topic: "im.message.created", By: "event_type"}, nil, ""},
		{"a configured name", Routed{Topic: "im.events"}, nil, ""},
		{"Kafka's longest name", Routed{Topic: strings.Repeat("a", 249), By: "event_type"}, nil, ""},
		{"a NULL column", Routed{By: "kind", Null: "kind"}, ErrNullTopic, "give the row's kind a value"},
		{"an empty event_type", Routed{Topic: "im.", By: "event_type", Empty: "event_type"}, ErrEmptyPlaceholder, "give the row's event_type a value"},
		{"an empty mapped column", Routed{Topic: "outbox.event.", By: "aggregatetype", Empty: "aggregatetype"}, ErrEmptyPlaceholder, "CHECK (aggregatetype <> '')"},
		{"empty beats reserved", Routed{Topic: "cdc-outbox.dead-letter", By: "a, b", Empty: "b"}, ErrEmptyPlaceholder, "give the row's b a value"},
		{"a space", Routed{Topic: "im.a b", By: "event_type"}, ErrTopicName, "correct the row's event_type"},
		{"a slash", Routed{Topic: "outbox.event.a/b", By: "aggregatetype"}, ErrTopicName, "correct the row's aggregatetype"},
		{"too long", Routed{Topic: strings.Repeat("a", 250), By: "event_type"}, ErrTopicName, "correct the row's event_type"},
		{"dot", Routed{Topic: ".", By: "kind"}, ErrTopicName, "correct the row's kind"},
		{"dot dot", Routed{Topic: "..", By: "kind"}, ErrTopicName, "correct the row's kind"},
		{"no name", Routed{Topic: "", By: "kind"}, ErrTopicName, "correct the row's kind"},
		{"__consumer_offsets", Routed{Topic: "__consumer_offsets", By: "event_type"}, ErrInternalTopic, "correct the row's event_type"},
		{"__transaction_state", Routed{Topic: "__transaction_state", By: "aggregatetype"}, ErrInternalTopic, "correct the row's aggregatetype"},
		{"any __ name", Routed{Topic: "__x", By: "event_type"}, ErrInternalTopic, "correct the row's event_type"},
		{"one underscore is fine", Routed{Topic: "_x", By: "event_type"}, nil, ""},
		{"the dead-letter topic", Routed{Topic: "cdc-outbox.dead-letter", By: "event_type"}, ErrReservedTopic, "or choose another kafka.dead-letter-topic"},
		{"the mirror topic", Routed{Topic: "cdc-outbox.checkpoints", By: "aggregatetype"}, ErrReservedTopic, "or choose another checkpoint.mirror-topic"},
		{"a configured mirror topic", Routed{Topic: "cdc-outbox.checkpoints"}, ErrReservedTopic, "change the configured topic"},
	} {
		err := CheckTopic(c.f, res)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want nil", c.name, err)
			}
			continue
		}
		var te *TopicError
		if !errors.Is(err, ErrTopic) || !errors.Is(err, c.want) || !errors.As(err, &te) || te.Topic != c.f.Topic {
			t.Errorf("%s: %v, want a *TopicError for %q matching %v", c.name, err, c.f.Topic, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.fix) || c.f.By != "" && !strings.Contains(err.Error(), c.f.By) {
			t.Errorf("%s: %q does not name %q and %s", c.name, err, c.fix, c.f.By)
		}
	}
	// Nothing is reserved without names.
	if err := CheckTopic(Routed{Topic: "x"}, Reserved{}); err != nil {
		t.Errorf("no reserved topics: %v", err)
	}
}

// A valid name costs no allocation (CheckTopic runs for every record).
func TestCheckTopicAllocs(t *testing.T) {
	res := Reserved{DeadLetter: "dlq", Mirror: "cp"}
	if n := testing.AllocsPerRun(100, func() { _ = CheckTopic(Routed{Topic: "im.message.created", By: "event_type"}, res) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// Every path routes through CheckTopic: router.topic's template, a fixed
// router.topic, a mapping's template (the debezium preset), a fixed
// mapped topic and a topic column; the mapped errors name the column.
func TestRouteChecksTopic(t *testing.T) {
	res := Reserved{DeadLetter: "dlq", Mirror: "outbox.event.cp"}
	im := New(Config{Topic: "{event_type}"}, res)
	for et, want := range map[string]error{"__consumer_offsets": ErrInternalTopic, "outbox.event.cp": ErrReservedTopic, "dlq": ErrReservedTopic, "": ErrEmptyPlaceholder, "ok": nil} {
		m, err := im.Route(&binlog.Event{ID: 1, EventType: et, Payload: []byte("{}")}, binlog.Position{})
		if !errors.Is(err, want) || want != nil && m.Topic != et {
			t.Errorf("im event_type %q: %v (topic %q), want %v", et, err, m.Topic, want)
		}
	}
	if _, err := New(Config{Topic: "outbox.event.cp"}, res).Route(&binlog.Event{ID: 1}, binlog.Position{}); !errors.Is(err, ErrReservedTopic) {
		t.Errorf("fixed router.topic = mirror topic: %v", err)
	}
	cols := []mapping.Column{{Name: "id", DataType: "varchar"}, {Name: "aggregatetype", DataType: "varchar"}, {Name: "aggregateid", DataType: "varchar"},
		{Name: "type", DataType: "varchar"}, {Name: "payload", DataType: "json"}, {Name: "kind", DataType: "varchar"}}
	compile := func(c mapping.Config) *binlog.Table { return compileTable(t, c, cols) }
	route := func(tbl *binlog.Table, agg string) error {
		v := make([][]byte, len(tbl.Mapping.Cols))
		for s, c := range tbl.Mapping.Cols {
			v[s] = []byte(map[string]string{"id": "u1", "aggregatetype": agg, "aggregateid": "k1", "type": "T", "payload": "{}", "kind": agg}[c])
		}
		_, err := New(Config{Topic: "im.events"}, res).Route(&binlog.Event{Table: tbl, Vals: v, Payload: []byte("{}")}, binlog.Position{})
		return err
	}
	dbz := compile(mapping.Config{Preset: mapping.PresetDebezium})
	col := compile(mapping.Config{Preset: mapping.PresetDebezium, TopicColumn: "kind"})
	for _, c := range []struct {
		tbl  *binlog.Table
		agg  string
		want error
		col  string
	}{
		{dbz, "order", nil, ""},
		{dbz, "", ErrEmptyPlaceholder, "aggregatetype"},
		{dbz, "cp", ErrReservedTopic, "aggregatetype"},
		{dbz, "a b", ErrTopicName, "aggregatetype"},
		{col, "__consumer_offsets", ErrInternalTopic, "kind"},
		{col, "dlq", ErrReservedTopic, "kind"},
		{col, "", ErrEmptyPlaceholder, "kind"},
		{col, "orders", nil, ""},
	} {
		err := route(c.tbl, c.agg)
		if !errors.Is(err, c.want) || c.want != nil && (!strings.Contains(err.Error(), "the row's "+c.col) || strings.Contains(err.Error(), "event_type")) {
			t.Errorf("%s %q: %v, want %v naming %s (not event_type)", c.tbl.Mapping.TopicBy, c.agg, err, c.want, c.col)
		}
	}
	fixed := compile(mapping.Config{Preset: mapping.PresetDebezium, Topic: "dlq"})
	if err := route(fixed, "x"); !errors.Is(err, ErrReservedTopic) || !strings.Contains(err.Error(), "change the configured topic") {
		t.Errorf("fixed mapped topic = dead-letter topic: %v", err)
	}
}
