package mapping

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Presets accepted in Config.Preset.
const (
	PresetIM       = "im"       // schema/*.sql's im_event_outbox (the default)
	PresetDebezium = "debezium" // Debezium's outbox event router defaults
	PresetGeneric  = "generic"  // aggregate_type / aggregate_id / payload (docs/mapping.md)
)

// HeaderEventID is the header the publisher sets on every record to the
// event id (the id column), whatever the mapping (router.HeaderEventID).
const HeaderEventID = "event_id"

// Envelopes accepted in Config.Envelope.
const (
	EnvelopeRaw         = "raw"         // the payload column's bytes as the record value (default)
	EnvelopeCloudEvents = "cloudevents" // CloudEvents 1.0, Kafka binding, binary mode
)

// Policies for an invalid traceparent/tracestate (Config.InvalidTrace).
const (
	TracePass = "pass" // the value is passed on unchanged (default)
	TraceDrop = "drop" // the header is left out
)

// Config is one table's mapping (YAML source.mapping, or the mapping of an
// entry of source.tables). Every field left empty takes the preset's value;
// Headers add to (or, with an empty column, remove) the preset's headers.
// Column names are matched case-insensitively.
type Config struct {
	// Preset is im (default), debezium or generic.
	Preset string `yaml:"preset" doc:"The column layout the other keys override: im (im_event_outbox), debezium or generic." rule:"im, debezium, generic or empty (im)"`
	// ID is the event id column: the dedupe id, header event_id. An
	// integer or a string column.
	ID string `yaml:"id" doc:"The event id column (the dedupe id, header event_id): an integer or string column." rule:"a column of the table (checked at start)"`
	// Key are the key column(s): integers (signed or UNSIGNED) in decimal,
	// strings as stored; several are joined with ":".
	Key []string `yaml:"key" doc:"The record key column(s); several are joined with ':'." rule:"columns of the table (checked at start)"`
	// Payload is the record value's column: JSON, TEXT or BLOB, its bytes
	// as stored (MySQL's binary JSON as MySQL prints it).
	Payload string `yaml:"payload" doc:"The record value's column: JSON, TEXT or BLOB, its bytes as stored." rule:"a column of the table (checked at start)"`
	// PayloadFormat is json (the sink rejects a payload that is not valid
	// JSON as a poison record) or raw (any bytes); default json for the im
	// and debezium presets, raw for generic.
	PayloadFormat string `yaml:"payload-format" doc:"json (a payload that is not valid JSON is a poison record) or raw (any bytes); empty: the preset's." rule:"json, raw or empty"`
	// Order is the ordering column within a key (seq_no), used by verify;
	// optional ("-" for none).
	Order string `yaml:"order" doc:"The ordering column within a key (seq_no), used by verify; - for none." rule:"a column of the table or -"`
	// Topic is a fixed topic name or a template over columns,
	// "outbox.event.{aggregatetype}". Empty with the im preset: router.topic.
	Topic string `yaml:"topic" doc:"A fixed topic name or a template over columns such as outbox.event.{aggregatetype}; empty with the im preset: router.topic." rule:"a valid template; not with topic-column; its fixed parts a valid topic name"`
	// TopicColumn names a column holding the topic name (instead of Topic).
	TopicColumn string `yaml:"topic-column" doc:"A column holding each record's topic name, instead of topic." rule:"not with topic"`
	// Headers maps header names to columns. A NULL value leaves the header
	// out. An empty column removes a preset's header.
	Headers map[string]string `yaml:"headers" doc:"Header names mapped to columns (a NULL leaves the header out); an empty column removes a preset's header." rule:"no empty header name"`
	// Timestamp is the column of the record timestamp (DATETIME or
	// TIMESTAMP, taken as UTC); empty: the time of publishing.
	Timestamp string `yaml:"timestamp" doc:"The column of the record timestamp (DATETIME or TIMESTAMP, taken as UTC); empty: the time of publishing." rule:"a DATETIME or TIMESTAMP column (checked at start)"`
	// Partition is a column holding an explicit partition (an integer,
	// taken modulo the topic's partition count); empty: by key.
	Partition string `yaml:"partition" doc:"A column holding an explicit partition (an integer, taken modulo the partition count); empty: by key." rule:"an integer column (checked at start)"`
	// TraceParent and TraceState are the columns of W3C trace context
	// (https://www.w3.org/TR/trace-context/), published as the headers
	// traceparent and tracestate unchanged.
	TraceParent string `yaml:"traceparent" doc:"The column of the W3C traceparent header, published unchanged." rule:"-"`
	TraceState  string `yaml:"tracestate" doc:"The column of the W3C tracestate header, published unchanged." rule:"-"`
	// InvalidTrace is what an invalid traceparent/tracestate does: pass
	// (default: published as is) or drop (the header is left out). Never
	// fatal.
	InvalidTrace string `yaml:"invalid-trace" doc:"What an invalid traceparent or tracestate does: pass (published as is) or drop (the header is left out); never fatal." rule:"pass, drop or empty (pass)"`
	// Envelope is raw (default) or cloudevents.
	Envelope string `yaml:"envelope" doc:"raw (the payload as the record value) or cloudevents (binary-mode CloudEvents headers)." rule:"raw, cloudevents or empty (raw)"`
	// CloudEvents configures the cloudevents envelope.
	CloudEvents CloudEvents `yaml:"cloudevents" doc:"The CloudEvents headers of envelope cloudevents."`
	// Format is the encoding of key and value (format.go): raw (default:
	// as stored), or what a Kafka Connect worker running Debezium's Outbox
	// Event Router writes with its converter: string (StringConverter),
	// json-schemas (JsonConverter, schemas.enable=true) or json-plain
	// (JsonConverter, schemas.enable=false). With a format other than raw
	// a NULL payload is a record (see TombstoneOnEmptyPayload), not a
	// poison record, the key must be one string column and the payload a
	// JSON or string column, and the envelope raw.
	Format string `yaml:"format" doc:"The key and value bytes: raw (as stored), or those of a Kafka Connect worker running Debezium's Outbox Event Router with StringConverter (string) or JsonConverter with schemas.enable true (json-schemas) or false (json-plain)." rule:"raw, string, json-schemas, json-plain or empty (raw); not raw: envelope raw, one key column, a JSON or string payload"`
	// TombstoneOnEmptyPayload: a NULL payload gives a tombstone (a null
	// value) in every format, as Debezium's route.tombstone.on.empty.payload
	// does; default false: only the string format gives a tombstone
	// (json-plain writes null, json-schemas "payload":null). Needs a format
	// other than raw.
	TombstoneOnEmptyPayload bool `yaml:"tombstone-on-empty-payload" doc:"A NULL payload gives a tombstone in every format (Debezium's route.tombstone.on.empty.payload); false: only format string does." rule:"needs a format other than raw"`
	// TopicRegex and TopicReplacement are Debezium's route.topic.regex
	// and route.topic.replacement over the topic column's value (its
	// route.by.field): the replacement when the regex matches the whole
	// value, else the value as it is (TopicRegex). Setting one takes
	// Debezium's default for the other: (?<routedByValue>.*) and
	// outbox.event.${routedByValue}.
	TopicRegex       string `yaml:"topic-regex" doc:"Debezium's route.topic.regex over the topic-column's value (RE2 syntax); empty with topic-replacement set: (?<routedByValue>.*)." rule:"needs topic-column; a regex Go's regexp compiles, its group names Java's (letters and digits)"`
	TopicReplacement string `yaml:"topic-replacement" doc:"Debezium's route.topic.replacement: the topic when topic-regex matches the whole value (Java syntax: ${name} or $n for a group, \\x for x); empty with topic-regex set: outbox.event.${routedByValue}." rule:"needs topic-column; its groups those of topic-regex"`
	// EnvelopeFields are Debezium's table.fields.additional.placement
	// entries of placement envelope, in order: "column" or "column:alias".
	// The value becomes a struct of the payload (field "payload") and
	// these columns, as a Connect converter writes it (format string,
	// json-schemas or json-plain).
	EnvelopeFields []string `yaml:"envelope-fields" doc:"Debezium's additional fields of placement envelope, in order: column or column:alias; the value becomes a struct {payload, fields...}." rule:"needs a format other than raw; string (CHAR, VARCHAR, TEXT) or integer columns; names distinct, not payload"`
	// EnvelopeSchemaName is the json-schemas value schema's name with
	// EnvelopeFields. Debezium names it <topic.prefix>.<database>.<table>.
	// <route.by.field value>.Value after the first record its task routes,
	// and keeps that name for every record (its schema cache is keyed by
	// the payload's schema), so it is given here.
	EnvelopeSchemaName string `yaml:"envelope-schema-name" doc:"With envelope-fields and format json-schemas: the value schema's name, as Debezium's task names it (<topic.prefix>.<database>.<table>.<route.by.field value of its first record>.Value)." rule:"required with envelope-fields and format json-schemas; only with envelope-fields"`
	// ExpandJSONPayload is Debezium's table.expand.json.payload: a
	// payload that starts with { is written as the Connect struct whose
	// schema Debezium infers from it (expand.go), not as a JSON string;
	// one that does not parse, or whose schema cannot be inferred, stays
	// a string. Needs a format other than raw; not with EnvelopeFields.
	ExpandJSONPayload bool `yaml:"expand-json-payload" doc:"Debezium's table.expand.json.payload: a JSON object payload is written as the Connect struct Debezium infers from it (its fields, with a schema under json-schemas), not as a JSON string." rule:"needs a format other than raw; not with envelope-fields"`
	// ExpandJSONNull is Debezium's table.json.payload.null.behavior: a
	// JSON null in an expanded payload leaves its field out (ignore, the
	// default) or makes it an optional bytes field (optional-bytes).
	ExpandJSONNull string `yaml:"expand-json-null" doc:"Debezium's table.json.payload.null.behavior: a null in an expanded payload leaves its field out (ignore) or gives an optional bytes field (optional-bytes)." rule:"ignore, optional-bytes or empty (ignore); used with expand-json-payload (ignored without, as by Debezium)"`
}

// CloudEvents configures the binary-mode CloudEvents headers (CloudEvents
// 1.0 Kafka protocol binding §3.2): ce_specversion 1.0, ce_id from the id
// column, ce_source, ce_type, ce_time and content-type.
type CloudEvents struct {
	// Source is ce_source: a URI-reference, fixed or a template over
	// columns ("/im/{conversation_id}"). Required with the envelope.
	Source string `yaml:"source" doc:"ce_source: a URI-reference, fixed or a template over columns such as /im/{conversation_id}." rule:"required with envelope cloudevents; a valid template"`
	// Type is the column of ce_type; default: the preset's type column.
	Type string `yaml:"type" doc:"The column of ce_type; empty: the preset's type column." rule:"-"`
	// Time is the column of ce_time (DATETIME/TIMESTAMP, rendered as RFC
	// 3339 in UTC); default: the preset's time column, "-" for none.
	Time string `yaml:"time" doc:"The column of ce_time (rendered as RFC 3339 in UTC); empty: the preset's time column, - for none." rule:"-"`
	// ContentType is the content-type header (the datacontenttype);
	// default application/json.
	ContentType string `yaml:"content-type" doc:"The content-type header (the datacontenttype); empty: application/json." rule:"-"`
}

// Header is one header of the preset or the configuration.
type preset struct {
	cfg     Config
	headers [][2]string // ordered: name, column
	ceType  string
	ceTime  string
}

var presets = map[string]preset{
	PresetIM: {
		cfg: Config{ID: "id", Key: []string{"conversation_id"}, Payload: "payload", PayloadFormat: "json", Order: "seq_no", Timestamp: ""},
		headers: [][2]string{{"event_type", "event_type"}, {"message_id", "message_id"}, {"seq_no", "seq_no"},
			{"sender_id", "sender_id"}, {"receiver_id", "receiver_id"}, {"created_at", "created_at"}},
		ceType: "event_type", ceTime: "created_at",
	},
	PresetDebezium: {
		cfg:     Config{ID: "id", Key: []string{"aggregateid"}, Payload: "payload", PayloadFormat: "json", Order: "-", Topic: "outbox.event.{aggregatetype}"},
		headers: [][2]string{{"id", "id"}}, // Debezium's default: the id header alone
		ceType:  "type", ceTime: "-",
	},
	PresetGeneric: {
		cfg:     Config{ID: "id", Key: []string{"aggregate_id"}, Payload: "payload", PayloadFormat: "raw", Order: "-", Topic: "outbox.{aggregate_type}"},
		headers: [][2]string{{"aggregate_type", "aggregate_type"}, {"create_time", "create_time"}},
		ceType:  "aggregate_type", ceTime: "create_time",
	},
}

// Presets returns the preset names.
func Presets() []string { return slices.Sorted(maps.Keys(presets)) }

// Validate checks the configuration alone (the columns are checked by
// Compile) and returns all problems joined, each naming its field under
// prefix (e.g. "source.mapping").
func (c *Config) Validate(prefix string) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", prefix, field, fmt.Sprintf(format, a...)))
	}
	p := c.Preset
	if p == "" {
		p = PresetIM
	}
	if _, ok := presets[p]; !ok {
		bad("preset", "%q: want one of %s", c.Preset, strings.Join(Presets(), ", "))
	}
	if c.Topic != "" && c.TopicColumn != "" {
		bad("topic-column", "set either topic (a name or template) or topic-column, not both")
	}
	if c.Topic != "" {
		if _, err := ParseTemplate(c.Topic); err != nil {
			bad("topic", "%q: %v", c.Topic, err)
		}
	}
	if c.CloudEvents.Source != "" {
		if _, err := ParseTemplate(c.CloudEvents.Source); err != nil {
			bad("cloudevents.source", "%q: %v", c.CloudEvents.Source, err)
		}
	}
	switch c.PayloadFormat {
	case "", "json", "raw":
	default:
		bad("payload-format", "%q: want json or raw", c.PayloadFormat)
	}
	switch c.InvalidTrace {
	case "", TracePass, TraceDrop:
	default:
		bad("invalid-trace", "%q: want pass or drop", c.InvalidTrace)
	}
	switch c.Format {
	case "", FormatRaw:
		if c.TombstoneOnEmptyPayload {
			bad("tombstone-on-empty-payload", "needs format string, json-schemas or json-plain (with format raw a NULL payload is a poison record)")
		}
	case FormatString, FormatJSONSchemas, FormatJSONPlain:
		if c.Envelope != "" && c.Envelope != EnvelopeRaw {
			bad("format", "%q with envelope %s: a Connect converter's format takes envelope raw", c.Format, c.Envelope)
		}
		if len(c.Key) > 1 {
			bad("key", "format %s takes one key column (Debezium's table.field.event.key), not %d", c.Format, len(c.Key))
		}
	default:
		bad("format", "%q: want one of %s", c.Format, strings.Join(Formats(), ", "))
	}
	switch c.Envelope {
	case "", EnvelopeRaw:
	case EnvelopeCloudEvents:
		if c.CloudEvents.Source == "" {
			bad("cloudevents.source", "required with envelope: cloudevents: a URI-reference such as /im/outbox (the ce_source header)")
		}
	default:
		bad("envelope", "%q: want raw or cloudevents", c.Envelope)
	}
	for name := range c.Headers {
		if name == "" {
			bad("headers", "a header with an empty name")
		}
	}
	if c.TopicRegex != "" || c.TopicReplacement != "" {
		if c.TopicColumn == "" {
			bad("topic-regex", "topic-regex and topic-replacement rename the topic-column's value (Debezium's route.by.field): set topic-column")
		}
		if _, err := c.topicRegex(); err != nil {
			bad("topic-regex", "%v", err)
		}
	}
	if len(c.EnvelopeFields) > 0 {
		if c.Format == "" || c.Format == FormatRaw {
			bad("envelope-fields", "needs format string, json-schemas or json-plain (the value becomes a Connect struct)")
		}
		seen := map[string]bool{"payload": true}
		for _, f := range c.EnvelopeFields {
			_, alias, err := envelopeField(f)
			if err != nil {
				bad("envelope-fields", "%q: %v", f, err)
				continue
			}
			if seen[alias] {
				bad("envelope-fields", "%q: the value struct already has a field %s (Debezium fails the record): give it another alias (column:alias)", f, alias)
			}
			seen[alias] = true
		}
		if c.Format == FormatJSONSchemas && c.EnvelopeSchemaName == "" {
			bad("envelope-schema-name", "required with envelope-fields and format json-schemas: the value schema's name, as Debezium names it: <topic.prefix>.<database>.<table>.<route.by.field value of its task's first record>.Value, e.g. dbserver1.shop.outbox.Order.Value")
		}
	} else if c.EnvelopeSchemaName != "" {
		bad("envelope-schema-name", "only with envelope-fields (the value schema of a struct value)")
	}
	if c.ExpandJSONPayload {
		if c.Format == "" || c.Format == FormatRaw {
			bad("expand-json-payload", "needs format string, json-schemas or json-plain (the payload becomes a Connect struct)")
		}
		if len(c.EnvelopeFields) > 0 {
			bad("expand-json-payload", "not supported with envelope-fields (Debezium names each inferred value schema after the first record of that payload shape)")
		}
	}
	switch c.ExpandJSONNull {
	case "", ExpandNullIgnore, ExpandNullOptionalBytes:
	default:
		bad("expand-json-null", "%q: want ignore or optional-bytes", c.ExpandJSONNull)
	}
	return errors.Join(errs...)
}

// IsIM reports whether c is the im preset without overrides: such a table
// is decoded into Event's typed fields (the fastest path) and routed as
// before mappings existed, with router.topic.
func (c *Config) IsIM() bool {
	return (c.Preset == "" || c.Preset == PresetIM) && c.ID == "" && len(c.Key) == 0 && c.Payload == "" && c.PayloadFormat == "" && c.Order == "" &&
		c.Topic == "" && c.TopicColumn == "" && len(c.Headers) == 0 && c.Timestamp == "" && c.Partition == "" &&
		c.TraceParent == "" && c.TraceState == "" && (c.Envelope == "" || c.Envelope == EnvelopeRaw) &&
		(c.Format == "" || c.Format == FormatRaw) && c.TopicRegex == "" && c.TopicReplacement == "" && len(c.EnvelopeFields) == 0 &&
		c.EnvelopeSchemaName == "" && !c.ExpandJSONPayload && c.ExpandJSONNull == ""
}

// topicRegex compiles TopicRegex and TopicReplacement with Debezium's
// default for the one left empty; nil when neither is set.
func (c *Config) topicRegex() (*TopicRegex, error) {
	if c.TopicRegex == "" && c.TopicReplacement == "" {
		return nil, nil
	}
	return CompileTopicRegex(cmp.Or(c.TopicRegex, DefaultTopicRegex), cmp.Or(c.TopicReplacement, DefaultTopicReplacement))
}

// envelopeField splits an envelope-fields entry, "column" or
// "column:alias" (Debezium's column:envelope:alias).
func envelopeField(s string) (col, alias string, err error) {
	col, alias, found := strings.Cut(s, ":")
	col, alias = strings.TrimSpace(col), strings.TrimSpace(alias)
	if !found {
		alias = col
	}
	if col == "" || alias == "" || strings.Contains(alias, ":") {
		return "", "", errors.New("want column or column:alias")
	}
	return col, alias, nil
}

// IsZero reports whether c sets nothing (a source.tables entry without a
// mapping takes source.mapping).
func (c *Config) IsZero() bool {
	return c.Preset == "" && c.IsIM() && c.Envelope == "" && c.InvalidTrace == "" && c.CloudEvents == (CloudEvents{}) &&
		c.Format == "" && !c.TombstoneOnEmptyPayload
}

// Column is what Compile needs to know of a table column
// (information_schema.COLUMNS).
type Column struct {
	Name string
	// DataType is DATA_TYPE, lower case ("bigint", "varchar", "json",
	// "longtext", ...); empty when unknown (binlog files without a server):
	// the types are then not checked.
	DataType string
	Unsigned bool // COLUMN_TYPE ends in "unsigned"
	Nullable bool // IS_NULLABLE = 'YES'
}

// Kind classifies a column's type for the roles it may take.
type Kind int

const (
	KindUnknown Kind = iota
	KindInteger
	KindString // char, varchar, text types, binary, varbinary, enum
	KindBytes  // blob types
	KindJSON
	KindTime // datetime, timestamp
	KindOther
)

// KindOf returns the kind of an information_schema DATA_TYPE.
func KindOf(dataType string) Kind {
	switch strings.ToLower(dataType) {
	case "":
		return KindUnknown
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		return KindInteger
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "binary", "varbinary", "enum", "uuid":
		return KindString
	case "tinyblob", "blob", "mediumblob", "longblob":
		return KindBytes
	case "json":
		return KindJSON
	case "datetime", "timestamp":
		return KindTime
	}
	return KindOther
}

// Mapping is a Config compiled against a table's columns. Slots index
// Cols; a slot of -1 is not mapped. It is immutable and shared.
type Mapping struct {
	// Table is "schema.table" for messages (the first table of a pattern).
	Table string
	// IM: the im preset without overrides (Config.IsIM): decoded into the
	// typed fields of binlog.Event and routed with router.topic.
	IM bool
	// Cols are the mapped columns, lower case, in slot order.
	Cols []string
	// Kinds are the columns' kinds by slot (KindUnknown without types).
	Kinds []Kind
	// Unsigned by slot.
	Unsigned []bool

	ID, Payload, Order, Timestamp, Partition, TopicColumn, TraceParent, TraceState int
	Key                                                                            []int
	// Topic is the topic template (when TopicColumn < 0).
	Topic Template
	// TopicBy names the column(s) the topic comes from, for messages:
	// the topic column, or the template's columns ("aggregatetype";
	// "region, aggregatetype"); "" for a fixed topic.
	TopicBy string
	// Headers in record order.
	Headers []Header
	// Required are the slots whose NULL makes the row a poison record:
	// the id, the key, the topic column or the template's columns, the
	// payload.
	Required []int

	// PayloadJSON: the payload must be valid JSON (payload-format json).
	PayloadJSON  bool
	InvalidTrace string
	CloudEvents  bool
	CESource     Template
	CEType       int
	CETime       int
	ContentType  string

	// Format is Config.Format (raw, string, json-schemas, json-plain):
	// EncodeKey and EncodeValue.
	Format string
	// NullPayload: a NULL payload is a record (a format other than raw),
	// not a poison record; Tombstone: its value is null in every format
	// (tombstone-on-empty-payload).
	NullPayload, Tombstone bool
	// CompactJSON: the payload is MySQL's JSON type and the format not
	// raw: rendered without blanks, as Debezium does (CompactJSON).
	CompactJSON bool
	// PayloadOptional: the payload column is nullable (the json-schemas
	// schema's "optional").
	PayloadOptional bool
	// KeyType is the Kafka Connect schema type of the key column as
	// Debezium's MySQL connector gives it: "string", or int16/int32/int64
	// for an integer column (connectType); the json formats write an
	// integer key as a JSON number.
	KeyType string
	// TopicRegex renames the topic column's value (topic-regex,
	// topic-replacement); nil: the value is the topic.
	TopicRegex *TopicRegex
	// EnvelopeFields are the value struct's fields after "payload"
	// (envelope-fields), in order; EnvelopeName is its json-schemas name.
	EnvelopeFields []EnvelopeField
	EnvelopeName   string
	// expand: the payload is expanded (expand-json-payload); nil: not.
	expand *expander
}

// EnvelopeField is a field of the value struct (Config.EnvelopeFields):
// its name, its column's slot and the Connect schema Debezium's MySQL
// connector gives the column: Type string, or int16/int32/int64
// (connectType); Optional for a nullable column.
type EnvelopeField struct {
	Name     string
	Slot     int
	Type     string
	Optional bool
}

// Header is a record header taken from a column slot.
type Header struct {
	Name string
	Slot int
}

// ColumnError is a mapped column the table lacks, or one of the wrong type
// or nullability; it names the table, the column and the fix.
type ColumnError struct {
	Table  string // schema.table
	Column string
	Role   string // id, key, payload, topic, header x, ...
	Reason string
	Fix    string
}

func (e *ColumnError) Error() string {
	return fmt.Sprintf("mapping: table %s, column %s (%s): %s; %s", e.Table, e.Column, e.Role, e.Reason, e.Fix)
}

// ErrMapping matches every error of Compile.
var ErrMapping = errors.New("mapping")

// Is reports whether target is ErrMapping.
func (e *ColumnError) Is(target error) bool { return target == ErrMapping }

// Resolve returns c with the preset's values filled in, and the header
// list in record order.
func Resolve(c Config) (Config, [][2]string) {
	name := c.Preset
	if name == "" {
		name = PresetIM
	}
	p, ok := presets[name]
	if !ok {
		p = presets[PresetIM]
	}
	r := c
	r.Preset = name
	d := p.cfg
	if r.ID == "" {
		r.ID = d.ID
	}
	if len(r.Key) == 0 {
		r.Key = d.Key
	}
	if r.Payload == "" {
		r.Payload = d.Payload
	}
	if r.Order == "" {
		r.Order = d.Order
	}
	if r.PayloadFormat == "" {
		r.PayloadFormat = d.PayloadFormat
	}
	if r.Order == "-" {
		r.Order = ""
	}
	if r.Topic == "" && r.TopicColumn == "" {
		r.Topic = d.Topic
	}
	if r.InvalidTrace == "" {
		r.InvalidTrace = TracePass
	}
	if r.Envelope == "" {
		r.Envelope = EnvelopeRaw
	}
	if r.Format == "" {
		r.Format = FormatRaw
	}
	if r.CloudEvents.Type == "" {
		r.CloudEvents.Type = p.ceType
	}
	if r.CloudEvents.Time == "" {
		r.CloudEvents.Time = p.ceTime
	}
	if r.CloudEvents.Time == "-" {
		r.CloudEvents.Time = ""
	}
	if r.CloudEvents.ContentType == "" {
		r.CloudEvents.ContentType = "application/json"
	}
	var hs [][2]string
	for _, h := range p.headers {
		col, set := c.Headers[h[0]]
		if !set {
			col = h[1]
		}
		if col != "" {
			hs = append(hs, [2]string{h[0], col})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Headers)) {
		if col := c.Headers[name]; col != "" && !slices.ContainsFunc(p.headers, func(h [2]string) bool { return h[0] == name }) {
			hs = append(hs, [2]string{name, col})
		}
	}
	return r, hs
}

// Published names the headers that carry a mapping's event id, ordering
// column and event type column on its records: what a consumer reads them
// by (package consumer's Layout). Empty: not published.
type Published struct {
	// EventID is the header of the id column: a header the mapping maps
	// to that column (the debezium preset's "id"), else HeaderEventID.
	EventID string
	// Order is the header of the ordering column (Config.Order; the im
	// preset's "seq_no"): empty without one, or when no header carries it.
	Order string
	// Type is the header of the event type column (the CloudEvents type
	// column: event_type, type, aggregate_type by preset), when one
	// carries it.
	Type string
}

// PublishedHeaders returns where the records of mapping c carry the event
// id, the ordering column and the event type (Resolve's preset values and
// headers).
func PublishedHeaders(c Config) Published {
	r, headers := Resolve(c)
	of := func(col string) string {
		for _, h := range headers {
			if col != "" && strings.EqualFold(h[1], col) {
				return h[0]
			}
		}
		return ""
	}
	p := Published{EventID: of(r.ID), Order: of(r.Order), Type: of(r.CloudEvents.Type)}
	if p.EventID == "" {
		p.EventID = HeaderEventID
	}
	return p
}

// Compile checks c against the columns of table ("schema.table") and
// returns its Mapping. defaultTopic is router.topic, the im preset's topic
// (its "{event_type}" is a template like any other). Every problem is a
// *ColumnError (matching ErrMapping), all joined.
func Compile(c Config, defaultTopic, table string, cols []Column) (*Mapping, error) {
	r, headers := Resolve(c)
	byName := make(map[string]Column, len(cols))
	for _, col := range cols {
		byName[strings.ToLower(col.Name)] = col
	}
	have := make([]string, len(cols))
	for i, col := range cols {
		have[i] = col.Name
	}
	m := &Mapping{Table: table, IM: c.IsIM(), PayloadJSON: r.PayloadFormat == "json", InvalidTrace: r.InvalidTrace, CloudEvents: r.Envelope == EnvelopeCloudEvents,
		ContentType: r.CloudEvents.ContentType,
		ID:          -1, Payload: -1, Order: -1, Timestamp: -1, Partition: -1, TopicColumn: -1, TraceParent: -1, TraceState: -1, CEType: -1, CETime: -1}
	var errs []error
	fail := func(col, role, reason, fix string) {
		errs = append(errs, &ColumnError{Table: table, Column: col, Role: role, Reason: reason, Fix: fix})
	}
	slot := func(name, role string, kinds ...Kind) int {
		name = strings.ToLower(name)
		col, ok := byName[name]
		if !ok {
			fail(name, role, "the table has no such column (it has "+strings.Join(have, ", ")+")",
				fmt.Sprintf("add the column to the table, or map %s to one of its columns in the mapping", role))
			return -1
		}
		k := KindOf(col.DataType)
		if k != KindUnknown && len(kinds) > 0 && !slices.Contains(kinds, k) {
			fail(name, role, fmt.Sprintf("type %s is not supported for the %s", col.DataType, role),
				fmt.Sprintf("map the %s to a column of type %s", role, kindNames(kinds)))
		}
		if i := slices.Index(m.Cols, name); i >= 0 {
			return i
		}
		m.Cols = append(m.Cols, name)
		m.Kinds = append(m.Kinds, k)
		m.Unsigned = append(m.Unsigned, col.Unsigned)
		return len(m.Cols) - 1
	}
	nullable := func(name string) bool { return byName[strings.ToLower(name)].Nullable }
	// template parses a {column} template of the setting what, each
	// column a string or integer that may not be NULL (it would give no
	// gives), else the fix names alt.
	template := func(what, text, gives, alt string) Template {
		t, err := ParseTemplate(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: table %s: %s %q: %v", ErrMapping, table, what, text, err))
		}
		for i := range t.Parts {
			if col := t.Parts[i].Column; col != "" {
				t.Parts[i].Slot = slot(col, what+" template", KindString, KindInteger)
				if nullable(col) {
					fail(col, what+" template", "the column can be NULL, which gives no "+gives,
						fmt.Sprintf("ALTER TABLE %s MODIFY %s ... NOT NULL, or %s", table, col, alt))
				}
			}
		}
		return t
	}
	scalar := []Kind{KindInteger, KindString}
	m.ID = slot(r.ID, "id", scalar...)
	for _, k := range r.Key {
		m.Key = append(m.Key, slot(k, "key", scalar...))
	}
	m.Payload = slot(r.Payload, "payload", KindJSON, KindString, KindBytes)
	if r.Order != "" {
		m.Order = slot(r.Order, "order", KindInteger)
	}
	if r.TopicColumn != "" {
		m.TopicColumn = slot(r.TopicColumn, "topic-column", KindString)
		var err error
		if m.TopicRegex, err = r.topicRegex(); err != nil {
			errs = append(errs, fmt.Errorf("%w: table %s: topic-regex: %v", ErrMapping, table, err))
		}
	} else {
		topic := r.Topic
		if topic == "" {
			topic = defaultTopic
		}
		m.Topic = template("topic", topic, "topic", "route by topic-column (a NULL there is a poison record)")
	}
	m.Required = append(m.Required, m.ID)
	m.Required = append(m.Required, m.Key...)
	m.Format, m.Tombstone = r.Format, r.TombstoneOnEmptyPayload
	if m.Encoded() {
		m.NullPayload = true
		m.PayloadOptional = nullable(r.Payload)
		if m.Payload >= 0 {
			switch m.Kinds[m.Payload] {
			case KindJSON:
				m.CompactJSON = true
			case KindBytes:
				fail(r.Payload, "payload", "format "+r.Format+" takes a JSON or string payload (Debezium's converters write a BLOB as base64 bytes)", "map the payload to a JSON or TEXT column, or use format raw")
			}
		}
		m.KeyType = "string"
		if len(m.Key) == 1 && m.Key[0] >= 0 && m.Kinds[m.Key[0]] == KindInteger {
			col := byName[m.Cols[m.Key[0]]]
			m.KeyType = connectType(col.DataType, col.Unsigned)
		}
	} else {
		m.Required = append(m.Required, m.Payload)
	}
	if m.TopicColumn >= 0 {
		m.Required = append(m.Required, m.TopicColumn)
		m.TopicBy = m.Cols[m.TopicColumn]
	} else {
		m.TopicBy = strings.Join(m.Topic.Columns(), ", ")
	}
	for _, p := range m.Topic.Parts {
		if p.Column != "" {
			m.Required = append(m.Required, p.Slot)
		}
	}
	if r.Timestamp != "" {
		m.Timestamp = slot(r.Timestamp, "timestamp", KindTime)
	}
	if r.Partition != "" {
		m.Partition = slot(r.Partition, "partition", KindInteger)
	}
	if r.TraceParent != "" {
		m.TraceParent = slot(r.TraceParent, "traceparent", KindString)
	}
	if r.TraceState != "" {
		m.TraceState = slot(r.TraceState, "tracestate", KindString)
	}
	for _, h := range headers {
		m.Headers = append(m.Headers, Header{Name: h[0], Slot: slot(h[1], "header "+h[0])})
	}
	for _, f := range r.EnvelopeFields {
		col, alias, err := envelopeField(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: table %s: envelope-fields %q: %v", ErrMapping, table, f, err))
			continue
		}
		role := "envelope field " + alias
		s := slot(col, role, KindString, KindInteger)
		ef := EnvelopeField{Name: alias, Slot: s, Type: "string", Optional: nullable(col)}
		if s >= 0 {
			switch c := byName[m.Cols[s]]; strings.ToLower(c.DataType) {
			case "binary", "varbinary", "enum", "set", "uuid":
				fail(col, role, "type "+c.DataType+" has a Connect schema of its own in Debezium (bytes, io.debezium.data.Enum, ...), not reproduced",
					"map the field to a CHAR, VARCHAR, TEXT or integer column")
			default:
				if m.Kinds[s] == KindInteger {
					ef.Type = connectType(c.DataType, c.Unsigned)
				}
			}
		}
		m.EnvelopeFields = append(m.EnvelopeFields, ef)
	}
	m.EnvelopeName = r.EnvelopeSchemaName
	if r.ExpandJSONPayload {
		m.expand = &expander{optionalBytes: r.ExpandJSONNull == ExpandNullOptionalBytes}
	}
	if m.CloudEvents {
		m.CESource = template("cloudevents.source", r.CloudEvents.Source, "ce_source", "use a fixed source")
		if r.CloudEvents.Type != "" {
			m.CEType = slot(r.CloudEvents.Type, "cloudevents.type", KindString)
		}
		if r.CloudEvents.Time != "" {
			m.CETime = slot(r.CloudEvents.Time, "cloudevents.time", KindTime)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// connectType is the Kafka Connect schema type Debezium's MySQL connector
// gives an integer column (its MySqlValueConverters, with
// bigint.unsigned.handling.mode long, the default): TINYINT and SMALLINT
// int16, MEDIUMINT and INT int32, BIGINT int64; UNSIGNED one size up
// (BIGINT UNSIGNED stays int64).
func connectType(dataType string, unsigned bool) string {
	switch strings.ToLower(dataType) {
	case "tinyint":
		return "int16"
	case "smallint":
		if unsigned {
			return "int32"
		}
		return "int16"
	case "mediumint":
		return "int32"
	case "int", "integer":
		if unsigned {
			return "int64"
		}
		return "int32"
	}
	return "int64"
}

func kindNames(ks []Kind) string {
	names := map[Kind]string{KindInteger: "integer (TINYINT … BIGINT, signed or UNSIGNED)", KindString: "string (CHAR, VARCHAR, TEXT)",
		KindBytes: "BLOB", KindJSON: "JSON", KindTime: "DATETIME or TIMESTAMP"}
	var s []string
	for _, k := range ks {
		s = append(s, names[k])
	}
	return strings.Join(s, " or ")
}

// Slot returns the slot of column name, or -1.
func (m *Mapping) Slot(name string) int { return slices.Index(m.Cols, strings.ToLower(name)) }

// Name returns the column of a slot, or "" for -1.
func (m *Mapping) Name(slot int) string {
	if slot < 0 || slot >= len(m.Cols) {
		return ""
	}
	return m.Cols[slot]
}
