package mapping

import (
	"strings"
	"testing"
)

// The encodings against what Kafka Connect's JsonConverter (Jackson 2.21)
// and Debezium wrote in testdata/debezium/mysql.default.*.jsonl.
func TestAppendJacksonString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"1001", `"1001"`},
		{`a"b\c/d` + "\n", `"a\"b\\c/d\n"`},
		{"héllo 日本語 🎉", `"héllo 日本語 \uD83C\uDF89"`},
		{"\x00\x1f\b\f\r\t\x7f", `"\u0000\u001F\b\f\r\t` + "\x7f" + `"`},
		{"a\xffb", "\"a\uFFFDb\""},
	} {
		if got := string(AppendJacksonString(nil, []byte(c.in))); got != c.want {
			t.Errorf("%q: %s, want %s", c.in, got, c.want)
		}
	}
}

func TestCompactJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"items": ["a", "b"], "total": 12.5, "orderId": 1001}`, `{"items":["a","b"],"total":12.5,"orderId":1001}`},
		{`{"esc": "a\" b\\", "s": " x , y : "}`, `{"esc":"a\" b\\","s":" x , y : "}`},
		{`""`, `""`},
	} {
		if got := string(CompactJSON([]byte(c.in))); got != c.want {
			t.Errorf("%s: %s, want %s", c.in, got, c.want)
		}
	}
}

func TestEncode(t *testing.T) {
	cols := []Column{{"id", "varchar", false, false}, {"aggregatetype", "varchar", false, false}, {"aggregateid", "varchar", false, false},
		{"payload", "json", false, true}}
	const json = `{"paid": true}`
	for _, c := range []struct {
		format         string
		tombstone      bool
		payload        string // "<null>" for NULL
		wantKey, wantV string // "<null>" for a tombstone
	}{
		{FormatString, false, json, `1001`, `{"paid":true}`},
		{FormatString, false, "<null>", `1001`, "<null>"},
		{FormatJSONPlain, false, json, `"1001"`, `"{\"paid\":true}"`},
		{FormatJSONPlain, false, "<null>", `"1001"`, `null`},
		{FormatJSONPlain, true, "<null>", `"1001"`, "<null>"},
		{FormatJSONSchemas, false, json, `{"schema":{"type":"string","optional":false},"payload":"1001"}`,
			`{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"paid\":true}"}`},
		{FormatJSONSchemas, false, "<null>", `{"schema":{"type":"string","optional":false},"payload":"1001"}`,
			`{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}`},
		{FormatJSONSchemas, true, "<null>", `{"schema":{"type":"string","optional":false},"payload":"1001"}`, "<null>"},
	} {
		m, err := Compile(Config{Preset: PresetDebezium, Format: c.format, TombstoneOnEmptyPayload: c.tombstone}, "", "s.t", cols)
		if err != nil {
			t.Fatal(err)
		}
		var p []byte
		if c.payload != "<null>" {
			p = []byte(c.payload)
		}
		show := func(b []byte) string {
			if b == nil {
				return "<null>"
			}
			return string(b)
		}
		if k, v := show(m.EncodeKey([]byte("1001"))), show(m.EncodeValue(p)); k != c.wantKey || v != c.wantV {
			t.Errorf("%s tombstone %v %s: key %s value %s, want %s %s", c.format, c.tombstone, c.payload, k, v, c.wantKey, c.wantV)
		}
	}
}

// An integer key is a JSON number with the Connect type Debezium's MySQL
// connector gives its column (testdata/debezium/mysql.intkey.*.jsonl: INT).
func TestEncodeIntegerKey(t *testing.T) {
	for _, c := range []struct {
		dataType string
		unsigned bool
		format   string
		want     string
	}{
		{"int", false, FormatJSONSchemas, `{"schema":{"type":"int32","optional":false},"payload":42}`},
		{"int", true, FormatJSONSchemas, `{"schema":{"type":"int64","optional":false},"payload":42}`},
		{"bigint", false, FormatJSONSchemas, `{"schema":{"type":"int64","optional":false},"payload":42}`},
		{"smallint", false, FormatJSONSchemas, `{"schema":{"type":"int16","optional":false},"payload":42}`},
		{"bigint", false, FormatJSONPlain, `42`},
		{"bigint", false, FormatString, `42`},
	} {
		cols := []Column{{"id", "varchar", false, false}, {"aggregatetype", "varchar", false, false}, {"aggregateid", c.dataType, c.unsigned, false},
			{"payload", "json", false, true}}
		m, err := Compile(Config{Preset: PresetDebezium, Format: c.format}, "", "s.t", cols)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(m.EncodeKey([]byte("42"))); got != c.want {
			t.Errorf("%s unsigned %v %s: %s, want %s", c.dataType, c.unsigned, c.format, got, c.want)
		}
	}
}

// Validate names the field of each bad format setting.
func TestValidateFormat(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Format: "avro"}, `m.format: "avro": want one of raw, string, json-schemas, json-plain`},
		{Config{TombstoneOnEmptyPayload: true}, "m.tombstone-on-empty-payload: needs format string, json-schemas or json-plain"},
		{Config{Format: FormatJSONPlain, Envelope: EnvelopeCloudEvents, CloudEvents: CloudEvents{Source: "/x"}}, "m.format: \"json-plain\" with envelope cloudevents"},
		{Config{Format: FormatJSONPlain, Key: []string{"a", "b"}}, "m.key: format json-plain takes one key column"},
	} {
		err := c.cfg.Validate("m")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := (&Config{Preset: PresetDebezium, Format: FormatJSONSchemas, TombstoneOnEmptyPayload: true}).Validate("m"); err != nil {
		t.Error(err)
	}
}
