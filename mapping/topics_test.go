package mapping

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// TopicOf names a row's topic as the router does; TopicSlots are the
// columns it is read from; TopicSetting names the setting in messages.
func TestTopicOf(t *testing.T) {
	dbz, err := Compile(Config{Preset: PresetDebezium}, "im.{event_type}", "shop.outbox", debeziumCols)
	if err != nil {
		t.Fatal(err)
	}
	col, err := Compile(Config{Preset: PresetDebezium, TopicColumn: "type"}, "im.{event_type}", "shop.outbox", debeziumCols)
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := Compile(Config{Preset: PresetDebezium, Topic: "orders"}, "im.{event_type}", "shop.outbox", debeziumCols)
	if err != nil {
		t.Fatal(err)
	}
	im, err := RouterTopic("im.{event_type}.{event_type}")
	if err != nil {
		t.Fatal(err)
	}
	at := func(m *Mapping, name, v string, null bool) [][]byte {
		vals := make([][]byte, len(m.Cols))
		if !null {
			vals[m.Slot(name)] = []byte(v)
		}
		return vals
	}
	for _, c := range []struct {
		name    string
		m       *Mapping
		vals    [][]byte
		topic   string
		ok      bool
		slots   []string
		setting string
	}{
		{"template", dbz, at(dbz, "aggregatetype", "order", false), "outbox.event.order", true, []string{"aggregatetype"}, "topic template outbox.event.{aggregatetype}"},
		{"template over NULL", dbz, at(dbz, "aggregatetype", "", true), "", false, []string{"aggregatetype"}, "topic template outbox.event.{aggregatetype}"},
		{"mapped template over an empty value", dbz, at(dbz, "aggregatetype", "", false), "outbox.event.", true, []string{"aggregatetype"}, "topic template outbox.event.{aggregatetype}"},
		{"topic column", col, at(col, "type", "t1", false), "t1", true, []string{"type"}, "topic-column type"},
		{"topic column NULL", col, at(col, "type", "", true), "", false, []string{"type"}, "topic-column type"},
		{"fixed", fixed, nil, "orders", true, nil, "topic orders"},
		{"router.topic template, one column twice", im, at(im, "event_type", "msg", false), "im.msg.msg", true, []string{"event_type"}, "topic template im.{event_type}.{event_type}"},
		{"router.topic: an empty event_type names none", im, at(im, "event_type", "", false), "", false, []string{"event_type"}, "topic template im.{event_type}.{event_type}"},
	} {
		topic, ok := c.m.TopicOf(c.vals)
		var slots []string
		for _, s := range c.m.TopicSlots() {
			slots = append(slots, c.m.Name(s))
		}
		if topic != c.topic && c.ok || ok != c.ok || !reflect.DeepEqual(slots, c.slots) || c.m.TopicSetting() != c.setting {
			t.Errorf("%s: TopicOf %q %v, slots %v, setting %q; want %q %v, %v, %q", c.name, topic, ok, slots, c.m.TopicSetting(), c.topic, c.ok, c.slots, c.setting)
		}
	}
}

// Problems flattens joined errors at any depth, keeping wrapped ones whole.
func TestProblems(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	wrapped := fmt.Errorf("source.mapping: %w", c)
	got := Problems(errors.Join(a, errors.Join(b, wrapped)))
	if !reflect.DeepEqual(got, []error{a, b, wrapped}) {
		t.Errorf("Problems = %v", got)
	}
	if got := Problems(a); !reflect.DeepEqual(got, []error{a}) {
		t.Errorf("Problems(a) = %v", got)
	}
}
