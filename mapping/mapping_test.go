package mapping

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var imCols = []Column{{"id", "bigint", true, false}, {"event_type", "varchar", false, false}, {"conversation_id", "bigint", false, false},
	{"message_id", "bigint", false, false}, {"seq_no", "bigint", false, false}, {"sender_id", "bigint", false, false},
	{"receiver_id", "bigint", false, false}, {"payload", "longtext", false, false}, {"status", "varchar", false, false},
	{"created_at", "datetime", false, false}}

var debeziumCols = []Column{{"id", "char", false, false}, {"aggregatetype", "varchar", false, false}, {"aggregateid", "varchar", false, false},
	{"type", "varchar", false, false}, {"payload", "json", false, true}, {"traceparent", "varchar", false, true}}

var genericCols = []Column{{"id", "bigint", false, false}, {"aggregate_type", "varchar", false, false}, {"aggregate_id", "varchar", false, false},
	{"payload", "text", false, false}, {"create_time", "datetime", false, false}, {"status", "varchar", false, false}}

func headerNames(m *Mapping) []string {
	var s []string
	for _, h := range m.Headers {
		s = append(s, h.Name+"="+m.Cols[h.Slot])
	}
	return s
}

func TestCompilePresets(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     Config
		cols    []Column
		im      bool
		key     string
		topic   string
		headers []string
	}{
		{"im default", Config{}, imCols, true, "conversation_id", "im.{event_type}",
			[]string{"event_type=event_type", "message_id=message_id", "seq_no=seq_no", "sender_id=sender_id", "receiver_id=receiver_id", "created_at=created_at"}},
		{"im with a header", Config{Headers: map[string]string{"status": "status", "created_at": ""}}, imCols, false, "conversation_id", "im.{event_type}",
			[]string{"event_type=event_type", "message_id=message_id", "seq_no=seq_no", "sender_id=sender_id", "receiver_id=receiver_id", "status=status"}},
		{"debezium", Config{Preset: PresetDebezium}, debeziumCols, false, "aggregateid", "outbox.event.{aggregatetype}", []string{"id=id"}},
		{"generic", Config{Preset: PresetGeneric}, genericCols, false, "aggregate_id", "outbox.{aggregate_type}", []string{"aggregate_type=aggregate_type", "create_time=create_time"}},
	} {
		m, err := Compile(c.cfg, "im.{event_type}", "im.t", c.cols)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if m.IM != c.im || m.Cols[m.Key[0]] != c.key || !reflect.DeepEqual(headerNames(m), c.headers) {
			t.Errorf("%s: IM %v key %s headers %v", c.name, m.IM, m.Cols[m.Key[0]], headerNames(m))
		}
		var cols []string
		for _, p := range m.Topic.Parts {
			if p.Column != "" {
				cols = append(cols, "{"+m.Cols[p.Slot]+"}")
			} else {
				cols = append(cols, p.Lit)
			}
		}
		if got := strings.Join(cols, ""); got != c.topic {
			t.Errorf("%s: topic %s, want %s", c.name, got, c.topic)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		cols []Column
		want []string // substrings of the error
	}{
		{"missing column", Config{Preset: PresetDebezium, Headers: map[string]string{"type": "type"}}, debeziumCols[:3], []string{"table im.t, column type (header type): the table has no such column", "add the column"}},
		{"json format blob payload", Config{Preset: PresetDebezium, Format: FormatJSONPlain}, []Column{{"id", "varchar", false, false}, {"aggregatetype", "varchar", false, false},
			{"aggregateid", "varchar", false, false}, {"payload", "blob", false, true}}, []string{"column payload (payload): format json-plain takes a JSON or string payload"}},
		{"json key", Config{Preset: PresetDebezium, Key: []string{"payload"}}, debeziumCols, []string{"column payload (key): type json is not supported for the key", "map the key to a column of type integer"}},
		{"nullable template", Config{Preset: PresetDebezium, Topic: "t.{traceparent}"}, debeziumCols, []string{"column traceparent (topic template): the column can be NULL", "NOT NULL"}},
		{"time ordering", Config{Preset: PresetGeneric, Order: "create_time"}, genericCols, []string{"type datetime is not supported for the order"}},
	} {
		_, err := Compile(c.cfg, "im.events", "im.t", c.cols)
		if !errors.Is(err, ErrMapping) {
			t.Fatalf("%s: err %v, want ErrMapping", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nlacks %q", c.name, err, w)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, ""},
		{Config{Preset: "kafka"}, "m.preset: \"kafka\": want one of debezium, generic, im"},
		{Config{Topic: "a.{b", TopicColumn: "x"}, "m.topic-column: set either"},
		{Config{Topic: "a.{b"}, "m.topic: \"a.{b\": { without a closing }"},
		{Config{Envelope: EnvelopeCloudEvents}, "m.cloudevents.source: required"},
		{Config{InvalidTrace: "fail"}, "m.invalid-trace"},
	} {
		err := c.cfg.Validate("m")
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

func TestTemplate(t *testing.T) {
	tp, err := ParseTemplate("outbox.event.{AggregateType}.v1")
	if err != nil {
		t.Fatal(err)
	}
	tp.Parts[1].Slot = 0
	b, ok := tp.Append(nil, [][]byte{[]byte("Order")})
	if !ok || string(b) != "outbox.event.Order.v1" || tp.Probe() != "outbox.event.x.v1" {
		t.Errorf("%q %v %q", b, ok, tp.Probe())
	}
	if _, ok := tp.Append(nil, [][]byte{nil}); ok {
		t.Error("NULL rendered")
	}
	for _, bad := range []string{"", "a}", "{}", "{a", "{a b}"} {
		if _, err := ParseTemplate(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestTraceContext(t *testing.T) {
	for _, c := range []struct {
		v  string
		ok bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"garbage", false},
	} {
		if got := ValidTraceParent([]byte(c.v)); got != c.ok {
			t.Errorf("traceparent %q: %v", c.v, got)
		}
	}
	for _, c := range []struct {
		v  string
		ok bool
	}{{"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", true}, {"a=1,,b=2", true}, {"=1", false}, {"A=1", false}, {"a=", false}, {"a=b=c", false}} {
		if got := ValidTraceState([]byte(c.v)); got != c.ok {
			t.Errorf("tracestate %q: %v", c.v, got)
		}
	}
}

// TestPublishedHeaders: where each preset's records (and a mapping with
// overrides) carry the event id, the ordering column and the event type,
// as package consumer reads them.
func TestPublishedHeaders(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want Published
	}{
		{"im", Config{}, Published{EventID: "event_id", Order: "seq_no", Type: "event_type"}},
		{"debezium", Config{Preset: PresetDebezium}, Published{EventID: "id"}}, // Debezium's default: no type header
		{"debezium with its type header", Config{Preset: PresetDebezium, Headers: map[string]string{"type": "type"}}, Published{EventID: "id", Type: "type"}},
		{"generic", Config{Preset: PresetGeneric}, Published{EventID: "event_id", Type: "aggregate_type"}},
		{"generic with an order column published as a header", Config{Preset: PresetGeneric, Order: "Version", Headers: map[string]string{"v": "version"}},
			Published{EventID: "event_id", Order: "v", Type: "aggregate_type"}},
		{"an order column no header carries", Config{Preset: PresetGeneric, Order: "version"}, Published{EventID: "event_id", Type: "aggregate_type"}},
		{"im without its seq_no header", Config{Headers: map[string]string{"seq_no": ""}}, Published{EventID: "event_id", Type: "event_type"}},
		{"debezium without its id header", Config{Preset: PresetDebezium, Headers: map[string]string{"id": ""}}, Published{EventID: "event_id"}},
	} {
		if got := PublishedHeaders(c.cfg); got != c.want {
			t.Errorf("%s: PublishedHeaders = %+v, want %+v", c.name, got, c.want)
		}
	}
}
