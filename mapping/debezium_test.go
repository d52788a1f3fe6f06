package mapping

import (
	"strings"
	"testing"
)

// corpusCols is testdata/debezium/corpus.sql's outbox table (MySQL), with
// a nullable column more (note).
var corpusCols = []Column{{"id", "varchar", false, false}, {"aggregatetype", "varchar", false, false}, {"aggregateid", "varchar", false, false},
	{"type", "varchar", false, false}, {"payload", "json", false, true}, {"region", "varchar", false, false}, {"shard", "int", false, false},
	{"note", "text", false, true}}

// row returns a row of m by column name; "<null>" is NULL.
func row(m *Mapping, vals map[string]string) [][]byte {
	out := make([][]byte, len(m.Cols))
	for name, v := range vals {
		if s := m.Slot(name); s >= 0 && v != "<null>" {
			out[s] = []byte(v)
		}
	}
	return out
}

// A corpus row in, the record's topic and value out, for Debezium's
// envelope placement (table.fields.additional.placement
// region:envelope:region): the values of
// testdata/debezium/mysql.additional.*.jsonl (Debezium 3.6.1.Final), and
// cases the corpus lacks (an integer field, a NULL field, an alias,
// route.tombstone.on.empty.payload) as Kafka Connect's Struct.toString and
// JsonConverter write them.
func TestEncodeEnvelopeFields(t *testing.T) {
	const pay = `{"items": ["a", "b"], "total": 12.5, "orderId": 1001}` // as MySQL prints it
	const jsonSchema = `{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"}`
	const region = `{"type":"string","optional":false,"field":"region"}`
	const name = "golden.im.dbz_golden_outbox.Order.Value"
	for _, c := range []struct {
		name      string
		format    string
		fields    []string
		tombstone bool
		row       map[string]string
		want      string // "<null>": a tombstone
	}{
		{"golden 0001", FormatString, []string{"region"}, false, map[string]string{"payload": pay, "region": "eu"},
			`Struct{payload={"items":["a","b"],"total":12.5,"orderId":1001},region=eu}`},
		{"golden 0001", FormatJSONPlain, []string{"region"}, false, map[string]string{"payload": pay, "region": "eu"},
			`{"payload":"{\"items\":[\"a\",\"b\"],\"total\":12.5,\"orderId\":1001}","region":"eu"}`},
		{"golden 0001", FormatJSONSchemas, []string{"region"}, false, map[string]string{"payload": pay, "region": "eu"},
			`{"schema":{"type":"struct","fields":[` + jsonSchema + `,` + region + `],"optional":false,"name":"` + name + `"},` +
				`"payload":{"payload":"{\"items\":[\"a\",\"b\"],\"total\":12.5,\"orderId\":1001}","region":"eu"}}`},
		{"golden 0004: NULL payload", FormatString, []string{"region"}, false, map[string]string{"payload": "<null>", "region": "eu"}, `Struct{region=eu}`},
		{"golden 0004: NULL payload", FormatJSONPlain, []string{"region"}, false, map[string]string{"payload": "<null>", "region": "eu"}, `{"payload":null,"region":"eu"}`},
		{"golden 0004: NULL payload", FormatJSONSchemas, []string{"region"}, false, map[string]string{"payload": "<null>", "region": "eu"},
			`{"schema":{"type":"struct","fields":[` + jsonSchema + `,` + region + `],"optional":false,"name":"` + name + `"},"payload":{"payload":null,"region":"eu"}}`},
		{"golden 0007: unicode", FormatJSONPlain, []string{"region"}, false, map[string]string{"payload": `{"ü": ["ß", "€"], "text": "🎉"}`, "region": "ap"},
			`{"payload":"{\"ü\":[\"ß\",\"€\"],\"text\":\"\uD83C\uDF89\"}","region":"ap"}`},
		{"golden 0006: a JSON string", FormatString, []string{"region"}, false, map[string]string{"payload": `""`, "region": "eu"}, `Struct{payload="",region=eu}`},
		{"an INT field, an alias, a NULL field", FormatString, []string{"shard:partitionNo", "note", "region"}, false,
			map[string]string{"payload": `{}`, "region": "eu", "shard": "-3", "note": "<null>"}, `Struct{payload={},partitionNo=-3,region=eu}`},
		{"an INT field, an alias, a NULL field", FormatJSONPlain, []string{"shard:partitionNo", "note", "region"}, false,
			map[string]string{"payload": `{}`, "region": "eu", "shard": "-3", "note": "<null>"}, `{"payload":"{}","partitionNo":-3,"note":null,"region":"eu"}`},
		{"an INT field, an alias, a NULL field", FormatJSONSchemas, []string{"shard:partitionNo", "note"}, false,
			map[string]string{"payload": `{}`, "shard": "7", "note": `a"b`},
			`{"schema":{"type":"struct","fields":[` + jsonSchema + `,{"type":"int32","optional":false,"field":"partitionNo"},{"type":"string","optional":true,"field":"note"}],"optional":false,"name":"` + name + `"},` +
				`"payload":{"payload":"{}","partitionNo":7,"note":"a\"b"}}`},
		{"all NULL", FormatString, []string{"note"}, false, map[string]string{"payload": "<null>", "note": "<null>"}, `Struct{}`},
		{"tombstone-on-empty-payload: NULL", FormatString, []string{"region"}, true, map[string]string{"payload": "<null>", "region": "eu"}, "<null>"},
		{"tombstone-on-empty-payload: NULL", FormatJSONSchemas, []string{"region"}, true, map[string]string{"payload": "<null>", "region": "eu"}, "<null>"},
		{"tombstone-on-empty-payload: not empty", FormatJSONPlain, []string{"region"}, true, map[string]string{"payload": "{}", "region": "eu"}, `{"payload":"{}","region":"eu"}`},
	} {
		cfg := Config{Preset: PresetDebezium, Format: c.format, EnvelopeFields: c.fields, TombstoneOnEmptyPayload: c.tombstone}
		if c.format == FormatJSONSchemas {
			cfg.EnvelopeSchemaName = name
		}
		if err := cfg.Validate("m"); err != nil {
			t.Fatal(err)
		}
		m, err := Compile(cfg, "", "im.dbz_golden_outbox", corpusCols)
		if err != nil {
			t.Fatal(err)
		}
		vals := row(m, c.row)
		got := "<null>"
		if v := m.EncodeRow(vals[m.Payload], vals); v != nil {
			got = string(v)
		}
		if got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.name, c.format, got, c.want)
		}
	}
}

// Debezium's isDeleteEvent: with route.tombstone.on.empty.payload a
// payload that Java's trim empties (a TEXT column of blanks) is a
// tombstone too, with or without envelope fields; without the option it
// is written as it is.
func TestEncodeBlankPayloadTombstone(t *testing.T) {
	cols := []Column{{"id", "varchar", false, false}, {"aggregatetype", "varchar", false, false}, {"aggregateid", "varchar", false, false},
		{"payload", "text", false, true}, {"region", "varchar", false, false}}
	for _, c := range []struct {
		format    string
		fields    []string
		tombstone bool
		payload   string
		want      string
	}{
		{FormatString, nil, true, " \t\r\n", "<null>"},
		{FormatJSONPlain, nil, true, "", "<null>"},
		{FormatJSONPlain, []string{"region"}, true, "  ", "<null>"},
		{FormatString, nil, false, "  ", "  "},
		{FormatJSONPlain, nil, false, "", `""`},
		{FormatString, nil, true, " x ", " x "},
	} {
		cfg := Config{Preset: PresetDebezium, PayloadFormat: "raw", Format: c.format, EnvelopeFields: c.fields, TombstoneOnEmptyPayload: c.tombstone}
		m, err := Compile(cfg, "", "s.t", cols)
		if err != nil {
			t.Fatal(err)
		}
		vals := row(m, map[string]string{"payload": c.payload, "region": "eu"})
		got := "<null>"
		if v := m.EncodeRow(vals[m.Payload], vals); v != nil {
			got = string(v)
		}
		if got != c.want {
			t.Errorf("%s %v tombstone %v %q: %q, want %q", c.format, c.fields, c.tombstone, c.payload, got, c.want)
		}
	}
}

// A row's topic under topic-column with topic-regex/topic-replacement
// (Debezium's route.by.field, route.topic.regex, route.topic.replacement:
// Kafka Connect's RegexRouter with Java's replacement syntax).
func TestTopicRegex(t *testing.T) {
	for _, c := range []struct {
		regex, repl string
		value       string
		want        string
	}{
		{DefaultTopicRegex, DefaultTopicReplacement, "Order", "outbox.event.Order"},
		{"", "orders.${routedByValue}.v1", "Order", "orders.Order.v1"},
		{`(?<kind>Ord)(?<rest>.*)`, `events.${rest}.$1`, "Order", "events.er.Ord"},
		{`(?<kind>Ord)(?<rest>.*)`, `events.${rest}.$1`, "Customer", "Customer"},  // no match: the value as it is
		{`(Ord)er`, `$12`, "Order", "Ord2"},                                       // the longest number that is a group
		{`(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)`, `$12.$1`, "abcdefghijkl", "l.a"}, // $12 is group 12
		{`(x)?(Order)`, `t.$1.$2`, "Order", "t..Order"},                           // a group that took no part: nothing
		{`a|ab`, `X`, "ab", "Xb"},                                                 // matches whole, replaceFirst finds "a"
		{`.*`, `\$\\x\.`, "v", `$\x.`},                                            // \ escapes
		{`(?i)order`, `o`, "ORDER", "o"},
		{`Order`, `o`, "Orders", "Orders"}, // whole value only
	} {
		cfg := Config{Preset: PresetDebezium, TopicColumn: "aggregatetype", TopicRegex: c.regex, TopicReplacement: c.repl}
		if err := cfg.Validate("m"); err != nil {
			t.Fatalf("%q %q: %v", c.regex, c.repl, err)
		}
		m, err := Compile(cfg, "", "shop.outbox", corpusCols)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := m.TopicOf(row(m, map[string]string{"aggregatetype": c.value})); got != c.want || !ok {
			t.Errorf("%q %q over %q: %q %v, want %q", c.regex, c.repl, c.value, got, ok, c.want)
		}
	}
	m, err := Compile(Config{Preset: PresetDebezium, TopicColumn: "aggregatetype"}, "", "shop.outbox", corpusCols)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.TopicOf(row(m, map[string]string{"aggregatetype": "Order"})); got != "Order" || m.TopicRegex != nil {
		t.Errorf("topic-column alone: %q, want the value", got)
	}
}

// Validate refuses what Debezium would fail on (at the first record, a
// Java exception) and what the settings need, naming the key.
func TestValidateDebeziumOptions(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{TopicRegex: "(.*)"}, "m.topic-regex: topic-regex and topic-replacement rename the topic-column's value"},
		{Config{TopicColumn: "t", TopicRegex: "(?=x)"}, "m.topic-regex: regex \"(?=x)\": error parsing regexp"},
		{Config{TopicColumn: "t", TopicRegex: "(?<routed_by>.*)", TopicReplacement: "x"}, `group name "routed_by": Java takes ASCII letters and digits`},
		{Config{TopicColumn: "t", TopicRegex: "(.*)"}, "no group with name {routedByValue}"},
		{Config{TopicColumn: "t", TopicReplacement: "a.$2"}, "no group 2 in the regex"},
		{Config{TopicColumn: "t", TopicReplacement: "a.$x"}, "illegal group reference $x"},
		{Config{TopicColumn: "t", TopicReplacement: "a.$"}, "group index is missing"},
		{Config{TopicColumn: "t", TopicReplacement: `a.\`}, "character to be escaped is missing"},
		{Config{TopicColumn: "t", TopicReplacement: "a.${x"}, "missing trailing '}'"},
		{Config{TopicColumn: "t", TopicReplacement: "a.${}"}, "0 length name"},
		{Config{TopicColumn: "t", TopicReplacement: "a.${1x}"}, "starts with digit character"},
		{Config{EnvelopeFields: []string{"region"}}, "m.envelope-fields: needs format string, json-schemas or json-plain"},
		{Config{Format: FormatJSONPlain, EnvelopeFields: []string{"region", "shard:region"}}, `m.envelope-fields: "shard:region": the value struct already has a field region`},
		{Config{Format: FormatJSONPlain, EnvelopeFields: []string{"payload"}}, `already has a field payload`},
		{Config{Format: FormatJSONPlain, EnvelopeFields: []string{"a:"}}, `m.envelope-fields: "a:": want column or column:alias`},
		{Config{Format: FormatJSONSchemas, EnvelopeFields: []string{"region"}}, "m.envelope-schema-name: required with envelope-fields and format json-schemas"},
		{Config{Format: FormatJSONSchemas, EnvelopeSchemaName: "x"}, "m.envelope-schema-name: only with envelope-fields"},
	} {
		err := c.cfg.Validate("m")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	// Compile: the envelope field's column and type.
	for _, c := range []struct {
		cols []Column
		want string
	}{
		{corpusCols[:5], "column region (envelope field region): the table has no such column"},
		{append(corpusCols[:5:5], Column{"region", "enum", false, false}), "column region (envelope field region): type enum has a Connect schema of its own"},
		{append(corpusCols[:5:5], Column{"region", "datetime", false, false}), "type datetime is not supported for the envelope field region"},
	} {
		_, err := Compile(Config{Preset: PresetDebezium, Format: FormatJSONPlain, EnvelopeFields: []string{"region"}}, "", "s.t", c.cols)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.cols, err, c.want)
		}
	}
}

// A payload in, the value out, with Debezium's table.expand.json.payload:
// the values of testdata/debezium/mysql.expand.*.jsonl (Debezium
// 3.6.1.Final; the MySQL JSON column as MySQL prints it), and shapes the
// corpus lacks as JsonSchemaData, Struct.toString and JsonConverter make
// them.
func TestEncodeExpandJSONPayload(t *testing.T) {
	const dbzJSON = `{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1}`
	type out struct{ str, plain, schemas string } // "<null>": a tombstone
	for _, c := range []struct {
		name    string
		null    string // expand-json-null
		payload string
		want    out
	}{
		{"golden 0001", "", `{"items": ["a", "b"], "total": 12.5, "orderId": 1001}`, out{
			`Struct{items=[a, b],total=12.5,orderId=1001}`,
			`{"items":["a","b"],"total":12.5,"orderId":1001}`,
			`{"schema":{"type":"struct","fields":[{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"items"},{"type":"double","optional":true,"field":"total"},{"type":"int32","optional":true,"field":"orderId"}],"optional":true,"name":"payload"},"payload":{"items":["a","b"],"total":12.5,"orderId":1001}}`}},
		{"golden 0004: NULL", "", "<null>", out{"<null>", "null", `{"schema":` + dbzJSON + `,"payload":null}`}},
		{"golden 0005: {}", "", `{}`, out{`Struct{}`, `{}`, `{"schema":{"type":"struct","fields":[],"optional":true,"name":"payload"},"payload":{}}`}},
		{"golden 0006: a JSON string stays", "", `""`, out{`""`, `"\"\""`, `{"schema":` + dbzJSON + `,"payload":"\"\""}`}},
		{"golden 0007: unicode, escapes", "", `{"ü": ["ß", "€"], "esc": "a\"b\\c/d\n", "text": "héllo 🎉"}`, out{
			"Struct{ü=[ß, €],esc=a\"b\\c/d\n,text=héllo 🎉}",
			`{"ü":["ß","€"],"esc":"a\"b\\c/d\n","text":"héllo \uD83C\uDF89"}`,
			`{"schema":{"type":"struct","fields":[{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"ü"},{"type":"string","optional":true,"field":"esc"},{"type":"string","optional":true,"field":"text"}],"optional":true,"name":"payload"},"payload":{"ü":["ß","€"],"esc":"a\"b\\c/d\n","text":"héllo \uD83C\uDF89"}}`}},
		{"golden 0008: a mixed array stays a string", "", `{"n": 1.5, "nested": {"a": [1, {"b": null}], "t": false}}`, out{
			`{"n":1.5,"nested":{"a":[1,{"b":null}],"t":false}}`,
			`"{\"n\":1.5,\"nested\":{\"a\":[1,{\"b\":null}],\"t\":false}}"`,
			`{"schema":` + dbzJSON + `,"payload":"{\"n\":1.5,\"nested\":{\"a\":[1,{\"b\":null}],\"t\":false}}"}`}},
		{"nested struct named by path, null left out, empty array left out", "", `{"a": {"b": {"c": true}, "n": null, "e": []}, "x": 3000000000}`, out{
			`Struct{a=Struct{b=Struct{c=true}},x=3000000000}`,
			`{"a":{"b":{"c":true}},"x":3000000000}`,
			`{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"struct","fields":[{"type":"boolean","optional":true,"field":"c"}],"optional":true,"name":"payload.a.b","field":"b"}],"optional":true,"name":"payload.a","field":"a"},{"type":"int64","optional":true,"field":"x"}],"optional":true,"name":"payload"},"payload":{"a":{"b":{"c":true}},"x":3000000000}}`}},
		{"optional-bytes: null a bytes field", ExpandNullOptionalBytes, `{"n": null, "s": "v"}`, out{
			`Struct{s=v}`,
			`{"n":null,"s":"v"}`,
			`{"schema":{"type":"struct","fields":[{"type":"bytes","optional":true,"field":"n"},{"type":"string","optional":true,"field":"s"}],"optional":true,"name":"payload"},"payload":{"n":null,"s":"v"}}`}},
		{"objects in an array: their fields merged, nulls between", "", `{"l": [{"a": 1}, null, {"b": "x", "a": 2}]}`, out{
			`Struct{l=[Struct{a=1}, null, Struct{a=2,b=x}]}`,
			`{"l":[{"a":1,"b":null},null,{"a":2,"b":"x"}]}`,
			`{"schema":{"type":"struct","fields":[{"type":"array","items":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"},{"type":"string","optional":true,"field":"b"}],"optional":true,"name":"payload.l"},"optional":true,"field":"l"}],"optional":true,"name":"payload"},"payload":{"l":[{"a":1,"b":null},null,{"a":2,"b":"x"}]}}`}},
		{"Java's doubles", "", `{"a": 1e7, "b": 0.001, "c": 1.5e-5, "d": 1234567.0, "e": -0.0, "f": 12345678.9}`, out{
			`Struct{a=1.0E7,b=0.001,c=1.5E-5,d=1234567.0,e=-0.0,f=1.23456789E7}`,
			`{"a":1.0E7,"b":0.001,"c":1.5E-5,"d":1234567.0,"e":-0.0,"f":1.23456789E7}`,
			`{"schema":{"type":"struct","fields":[{"type":"double","optional":true,"field":"a"},{"type":"double","optional":true,"field":"b"},{"type":"double","optional":true,"field":"c"},{"type":"double","optional":true,"field":"d"},{"type":"double","optional":true,"field":"e"},{"type":"double","optional":true,"field":"f"}],"optional":true,"name":"payload"},"payload":{"a":1.0E7,"b":0.001,"c":1.5E-5,"d":1234567.0,"e":-0.0,"f":1.23456789E7}}`}},
		{"an empty top-level array infers no schema", "", `[]`, out{`[]`, `"[]"`, `{"schema":null,"payload":"[]"}`}},
		{"a top-level array is no struct: a string (Debezium's JsonConverter fails)", "", `[1, 2]`, out{`[1,2]`, `"[1,2]"`, `{"schema":` + dbzJSON + `,"payload":"[1,2]"}`}},
		{"an integer beyond int64: a string (Debezium's JsonConverter fails)", "", `{"big": 12345678901234567890}`, out{
			`{"big":12345678901234567890}`, `"{\"big\":12345678901234567890}"`, `{"schema":` + dbzJSON + `,"payload":"{\"big\":12345678901234567890}"}`}},
		{"int32 and int64 in one array: a string", "", `{"a": [1, 3000000000]}`, out{`{"a":[1,3000000000]}`, `"{\"a\":[1,3000000000]}"`, `{"schema":` + dbzJSON + `,"payload":"{\"a\":[1,3000000000]}"}`}},
		{"an array of nulls: a string", "", `{"a": [null]}`, out{`{"a":[null]}`, `"{\"a\":[null]}"`, `{"schema":` + dbzJSON + `,"payload":"{\"a\":[null]}"}`}},
	} {
		for _, f := range []struct {
			format string
			want   string
		}{{FormatString, c.want.str}, {FormatJSONPlain, c.want.plain}, {FormatJSONSchemas, c.want.schemas}} {
			cfg := Config{Preset: PresetDebezium, Format: f.format, ExpandJSONPayload: true, ExpandJSONNull: c.null}
			if err := cfg.Validate("m"); err != nil {
				t.Fatal(err)
			}
			m, err := Compile(cfg, "", "im.outbox", corpusCols)
			if err != nil {
				t.Fatal(err)
			}
			vals := row(m, map[string]string{"payload": c.payload})
			got := "<null>"
			if v := m.EncodeRow(vals[m.Payload], vals); v != nil {
				got = string(v)
			}
			if got != f.want {
				t.Errorf("%s %s:\n got %s\nwant %s", c.name, f.format, got, f.want)
			}
		}
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{ExpandJSONPayload: true}, "m.expand-json-payload: needs format string, json-schemas or json-plain"},
		{Config{Format: FormatJSONPlain, ExpandJSONPayload: true, EnvelopeFields: []string{"region"}}, "m.expand-json-payload: not supported with envelope-fields"},
		{Config{Format: FormatJSONPlain, ExpandJSONPayload: true, ExpandJSONNull: "optional_bytes"}, `m.expand-json-null: "optional_bytes": want ignore or optional-bytes`},
	} {
		if err := c.cfg.Validate("m"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
