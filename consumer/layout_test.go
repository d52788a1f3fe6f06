package consumer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/segmentio/kafka-go"
)

func hdrs(kv ...string) []kafka.Header {
	var h []kafka.Header
	for i := 0; i < len(kv); i += 2 {
		h = append(h, kafka.Header{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return h
}

// TestLayoutDecode: what each layout takes from a record as the publisher
// writes it for the mapping (router.Route and routeMapped), and what it
// refuses (the header named in the *RecordError).
func TestLayoutDecode(t *testing.T) {
	imRec := kafka.Message{Key: []byte("7"), Headers: hdrs("event_id", "101", "event_type", "message.created", "message_id", "5",
		"seq_no", "3", "sender_id", "1", "receiver_id", "2", "created_at", "2026-12-01 09:00:00", "binlog_pos", "b.1:4", "binlog_txn_end", "b.1:9")}
	// The debezium preset with the type header its mapping adds
	// (headers: {type: type}; Debezium's table.fields.additional.placement
	// type:header:type): key aggregateid, headers event_id and id (the id
	// column), type, the binlog positions.
	dbzRec := kafka.Message{Key: []byte("order-17"), Headers: hdrs("event_id", "5f0c…-uuid", "id", "5f0c…-uuid", "type", "OrderCreated", "binlog_pos", "b.1:4")}
	dbzOnlyID := kafka.Message{Key: []byte("order-17"), Headers: hdrs("id", "5f0c…-uuid", "type", "OrderCreated")} // Debezium's own records
	genRec := kafka.Message{Key: []byte("acct-1"), Headers: hdrs("event_id", "88", "aggregate_type", "account", "create_time", "2026-12-01 09:00:00", "v", "12")}
	for _, c := range []struct {
		name    string
		layout  Layout
		m       kafka.Message
		want    Record // EventID, Key, EventType, SeqNo, ConversationID, MessageID checked
		badHead string // the header of the *RecordError, when refused
	}{
		{"im", Layout{}, imRec, Record{EventID: "101", Key: "7", EventType: "message.created", SeqNo: 3, ConversationID: 7, MessageID: 5}, ""},
		{"im: key not decimal", Layout{}, kafka.Message{Key: []byte("x"), Headers: imRec.Headers}, Record{}, "(key)"},
		{"im: no seq_no", Layout{}, kafka.Message{Key: []byte("7"), Headers: hdrs("event_id", "101")}, Record{}, "seq_no"},
		{"im: a debezium record is refused", Layout{}, dbzRec, Record{}, "(key)"},
		{"debezium", Layout{Preset: mapping.PresetDebezium, EventType: "type"}, dbzRec, Record{EventID: "5f0c…-uuid", Key: "order-17", EventType: "OrderCreated"}, ""},
		{"debezium: Debezium's own record (id header only)", Layout{Preset: mapping.PresetDebezium, EventType: "type"}, dbzOnlyID,
			Record{EventID: "5f0c…-uuid", Key: "order-17", EventType: "OrderCreated"}, ""},
		{"debezium: no id", Layout{Preset: mapping.PresetDebezium}, kafka.Message{Key: []byte("k"), Headers: hdrs("type", "x")}, Record{}, "id"},
		{"debezium: no key", Layout{Preset: mapping.PresetDebezium}, kafka.Message{Headers: dbzRec.Headers}, Record{}, "(key)"},
		{"generic", Layout{Preset: mapping.PresetGeneric}, genRec, Record{EventID: "88", Key: "acct-1", EventType: "account"}, ""},
		{"generic with a sequence header (LayoutOf the publisher's mapping)",
			LayoutOf(mapping.Config{Preset: mapping.PresetGeneric, Order: "version", Headers: map[string]string{"v": "version"}}),
			genRec, Record{EventID: "88", Key: "acct-1", EventType: "account", SeqNo: 12}, ""},
		{"explicit: key and sequence from headers", Layout{Preset: mapping.PresetGeneric, Key: "aggregate_type", SeqNo: "v"}, genRec,
			Record{EventID: "88", Key: "account", EventType: "account", SeqNo: 12}, ""},
		{"explicit: sequence header not decimal", Layout{Preset: mapping.PresetGeneric, SeqNo: "create_time"}, genRec, Record{}, "create_time"},
		{"explicit: key header missing", Layout{Preset: mapping.PresetGeneric, Key: "tenant"}, genRec, Record{}, "tenant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.layout.WithDefaults().Decode(c.m)
			if c.badHead != "" {
				var re *RecordError
				if !errors.As(err, &re) || re.Header != c.badHead || !errors.Is(err, ErrInvalidRecord) {
					t.Fatalf("want a RecordError on header %q, got %v", c.badHead, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			type fields struct {
				id, key, typ   string
				seq, conv, msg int64
			}
			w := c.want
			if g, want := (fields{got.EventID, got.Key, got.EventType, got.SeqNo, got.ConversationID, got.MessageID}),
				(fields{w.EventID, w.Key, w.EventType, w.SeqNo, w.ConversationID, w.MessageID}); g != want {
				t.Fatalf("got %+v, want %+v", g, c.want)
			}
		})
	}
}

// Without a sequence number (the debezium layout), records are handled in
// offset order, duplicates by event id skipped, and nothing is a gap or
// late, whatever the order of the keys.
func TestLayoutWithoutSeqNo(t *testing.T) {
	var got []string
	c, err := New(Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g", Layout: Layout{Preset: mapping.PresetDebezium}},
		HandlerFunc(func(_ context.Context, r *Record) error {
			if r.Late {
				t.Errorf("%s: late", r.EventID)
			}
			got = append(got, r.Key+"/"+r.EventID)
			return nil
		}), Options{OnGap: func(_ context.Context, g Gap) error { t.Errorf("gap %s", g); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.Layout.HasSeqNo() {
		t.Fatal("the debezium layout has a sequence number")
	}
	p := c.newPartition("t", 0)
	for i, kv := range [][2]string{{"a", "u1"}, {"b", "u2"}, {"a", "u3"}, {"a", "u1"}, {"b", "u4"}} {
		m := kafka.Message{Topic: "t", Offset: int64(i), Key: []byte(kv[0]), Headers: hdrs("id", kv[1], "type", "T")}
		if err := p.process(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"a/u1", "b/u2", "a/u3", "b/u4"}; !slices.Equal(got, want) {
		t.Fatalf("handled %v, want %v", got, want)
	}
}

func TestLayoutValidate(t *testing.T) {
	cfg := Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g", Layout: Layout{Preset: "debezum"}}.WithDefaults()
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "consumer.layout.preset") || !strings.Contains(err.Error(), "debezium, generic, im") {
		t.Fatalf("want an error naming consumer.layout.preset and the presets, got %v", err)
	}
}
