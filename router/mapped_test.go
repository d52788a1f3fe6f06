package router

import (
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/mapping"
)

// A mapped record carries its table in WriterData (the metrics' table
// label), also with an explicit partition, which Balancer still honours;
// a record of the single im table carries none.
func TestRouteCarriesTable(t *testing.T) {
	cols := []mapping.Column{{Name: "id", DataType: "varchar"}, {Name: "aggregatetype", DataType: "varchar"}, {Name: "aggregateid", DataType: "varchar"},
		{Name: "type", DataType: "varchar"}, {Name: "payload", DataType: "json"}, {Name: "part", DataType: "int"}}
	compile := func(c mapping.Config) *binlog.Table { return compileTable(t, c, cols) }
	r := New(Config{Topic: "im.events"}, Reserved{})
	vals := func(tbl *binlog.Table) [][]byte {
		v := make([][]byte, len(tbl.Mapping.Cols))
		for s, c := range tbl.Mapping.Cols {
			v[s] = []byte(map[string]string{"id": "u1", "aggregatetype": "order", "aggregateid": "k1", "type": "T", "payload": "{}", "part": "7"}[c])
		}
		return v
	}
	tbl := compile(mapping.Config{Preset: mapping.PresetDebezium})
	m, err := r.Route(&binlog.Event{Table: tbl, Vals: vals(tbl), Payload: []byte("{}")}, binlog.Position{File: "f", Pos: 9})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := m.WriterData.(*binlog.Table); !ok || got.OutboxTable() != "shop.outbox" {
		t.Fatalf("WriterData %#v, want the table shop.outbox", m.WriterData)
	}
	tbl = compile(mapping.Config{Preset: mapping.PresetDebezium, Partition: "part"})
	m, err = r.Route(&binlog.Event{Table: tbl, Vals: vals(tbl), Payload: []byte("{}")}, binlog.Position{File: "f", Pos: 9})
	if err != nil {
		t.Fatal(err)
	}
	ep, ok := m.WriterData.(ExplicitPartition)
	if !ok || ep.P != 7 || ep.OutboxTable() != "shop.outbox" {
		t.Fatalf("WriterData %#v, want partition 7 of shop.outbox", m.WriterData)
	}
	if p := Balancer().Balance(m, 0, 1, 2, 3); p != 3 {
		t.Fatalf("partition %d, want 7 mod 4 = 3", p)
	}
	m, _ = r.Route(&binlog.Event{ID: 1, EventType: "x", Payload: []byte("{}")}, binlog.Position{File: "f", Pos: 9})
	if m.WriterData != nil {
		t.Fatalf("im record WriterData %#v, want none", m.WriterData)
	}
}

// compileTable compiles mapping c for a table shop.outbox of cols.
func compileTable(t *testing.T, c mapping.Config, cols []mapping.Column) *binlog.Table {
	t.Helper()
	ts, err := binlog.NewTableSet(binlog.Config{Schema: "shop", Table: "outbox", Mapping: c}, "im.events")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := ts.Compile("shop", "outbox", cols)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// EventTopic gives the topic Route gives: the mapping's for a mapped
// table (the debezium preset: outbox.event.{aggregatetype}), not
// router.topic, which replay counted its records by (it printed
// "topic im.events: 3" for records published to outbox.event.order).
func TestEventTopicIsRoutesTopic(t *testing.T) {
	cols := []mapping.Column{{Name: "id", DataType: "varchar"}, {Name: "aggregatetype", DataType: "varchar"}, {Name: "aggregateid", DataType: "varchar"},
		{Name: "type", DataType: "varchar"}, {Name: "payload", DataType: "json"}}
	r := New(Config{Topic: "im.{event_type}"}, Reserved{})
	tbl := compileTable(t, mapping.Config{Preset: mapping.PresetDebezium}, cols)
	vals := make([][]byte, len(tbl.Mapping.Cols))
	for s, c := range tbl.Mapping.Cols {
		vals[s] = []byte(map[string]string{"id": "u1", "aggregatetype": "order", "aggregateid": "k1", "type": "T", "payload": "{}"}[c])
	}
	for _, c := range []struct {
		name string
		e    *binlog.Event
		want string
	}{
		{"mapped", &binlog.Event{Table: tbl, Vals: vals, Payload: []byte("{}")}, "outbox.event.order"},
		{"im", &binlog.Event{ID: 1, EventType: "message.created", Payload: []byte("{}")}, "im.message.created"},
	} {
		m, err := r.Route(c.e, binlog.Position{File: "f", Pos: 9})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.EventTopic(c.e)
		if err != nil || got != c.want || got != m.Topic {
			t.Errorf("%s: EventTopic = %q, %v; Route's topic %q; want %q", c.name, got, err, m.Topic, c.want)
		}
	}
}
