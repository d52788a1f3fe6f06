package mapping

import (
	"strconv"
	"unicode/utf8"
)

// Formats accepted in Config.Format: the bytes of a record's key and value,
// as the converter of a Kafka Connect worker running Debezium's Outbox Event
// Router writes them (testdata/debezium holds what Debezium 3.6.1.Final
// wrote for each; docs/mapping.md, "Debezium parity").
const (
	// FormatRaw: the key and the payload column's bytes as stored (the
	// default; a NULL payload is a poison record).
	FormatRaw = "raw"
	// FormatString: Kafka Connect's StringConverter: the key as text, the
	// payload as text (MySQL's JSON type rendered compact, as Debezium
	// renders it); a NULL payload gives a tombstone (a null value).
	FormatString = "string"
	// FormatJSONSchemas: Kafka Connect's JsonConverter with
	// schemas.enable=true: {"schema":{...},"payload":...} for the key and
	// the value, the payload a JSON string; a NULL payload gives
	// "payload":null.
	FormatJSONSchemas = "json-schemas"
	// FormatJSONPlain: JsonConverter with schemas.enable=false: the key
	// and the payload as JSON strings; a NULL payload gives the value null
	// (4 bytes, not a tombstone).
	FormatJSONPlain = "json-plain"
)

// Formats returns the accepted formats.
func Formats() []string { return []string{FormatRaw, FormatString, FormatJSONSchemas, FormatJSONPlain} }

// Encoded reports whether the mapping encodes key and value (a format other
// than raw).
func (m *Mapping) Encoded() bool { return m.Format != "" && m.Format != FormatRaw }

// EncodeKey returns the record key of a key column's text in m.Format:
// a JSON string, or for an integer column (KeyType int16/int32/int64) its
// decimal text as a JSON number; with schemas, the Connect schema
// {"type":KeyType,"optional":false} (the key column is NOT NULL).
func (m *Mapping) EncodeKey(key []byte) []byte {
	val := func(b []byte) []byte {
		if m.KeyType != "string" {
			return append(b, key...)
		}
		return AppendJacksonString(b, key)
	}
	switch m.Format {
	case FormatJSONSchemas:
		b := make([]byte, 0, len(key)+64)
		b = append(b, `{"schema":{"type":"`...)
		b = append(b, m.KeyType...)
		b = append(b, `","optional":false},"payload":`...)
		return append(val(b), '}')
	case FormatJSONPlain:
		return val(make([]byte, 0, len(key)+2))
	}
	return key
}

// EncodeValue returns the record value of a payload (nil: NULL) in
// m.Format, as Debezium's Outbox Event Router and the worker's converter
// make it: MySQL's JSON type compact (CompactJSON); a NULL payload a
// tombstone (nil) with the string format or Tombstone, else the JSON
// converter's null ("null", or "payload":null with schemas). With
// Tombstone a payload of blanks (Java's String.trim leaves nothing: bytes
// up to U+0020) is a tombstone too, as Debezium's isDeleteEvent has it.
func (m *Mapping) EncodeValue(payload []byte) []byte {
	if payload == nil && m.Format == FormatString || m.Tombstone && blank(payload) {
		return nil
	}
	if payload != nil && m.CompactJSON {
		payload = CompactJSON(payload)
	}
	if m.expand != nil && payload != nil {
		if v, ok := m.encodeExpanded(payload); ok {
			return v
		}
	}
	switch m.Format {
	case FormatJSONSchemas:
		b := make([]byte, 0, len(payload)+len(payload)/8+96)
		b = append(b, `{"schema":{"type":"string","optional":`...)
		if m.PayloadOptional {
			b = append(b, "true"...)
		} else {
			b = append(b, "false"...)
		}
		if m.Kinds[m.Payload] == KindJSON {
			b = append(b, `,"name":"io.debezium.data.Json","version":1`...)
		}
		b = append(b, `},"payload":`...)
		if payload == nil {
			b = append(b, "null"...)
		} else {
			b = AppendJacksonString(b, payload)
		}
		return append(b, '}')
	case FormatJSONPlain:
		if payload == nil {
			return []byte("null")
		}
		return AppendJacksonString(make([]byte, 0, len(payload)+len(payload)/8+2), payload)
	}
	return payload
}

// encodeExpanded returns the value of a payload Debezium expands
// (expand-json-payload): the Struct as StringConverter (Struct.toString)
// or JsonConverter writes it; under json-schemas the schema of an empty
// top-level array, which infers none, is null. ok is false where the
// payload stays a string under its own schema; also where Debezium's
// conversion failed after the schema was replaced (a JsonConverter then
// fails the task: cdc-outbox writes the string, docs/mapping.md).
func (m *Mapping) encodeExpanded(payload []byte) (v []byte, ok bool) {
	st, noSchema, _ := m.expand.expand(payload)
	switch {
	case st != nil:
		b := make([]byte, 0, len(payload)+len(payload)/4+64)
		switch m.Format {
		case FormatString:
			return appendJava(b, st), true
		case FormatJSONPlain:
			return appendJSON(b, st), true
		}
		b = append(b, `{"schema":`...)
		b = appendSchema(b, st.s)
		b = append(b, `,"payload":`...)
		return append(appendJSON(b, st), '}'), true
	case noSchema && m.Format == FormatJSONSchemas:
		b := append(make([]byte, 0, len(payload)+32), `{"schema":null,"payload":`...)
		return append(AppendJacksonString(b, payload), '}'), true
	}
	return nil, false
}

// blank reports whether a payload is NULL or empty after Java's
// String.trim (which strips the characters up to U+0020): Debezium's
// isDeleteEvent.
func blank(p []byte) bool {
	for _, c := range p {
		if c > ' ' {
			return false
		}
	}
	return true
}

// EncodeRow returns the record value of a row (vals by slot, nil for
// NULL) whose payload is payload: EncodeValue, or with EnvelopeFields the
// Connect struct Debezium's envelope placement makes, {payload, fields...}
// in order, as the converter writes it: StringConverter Struct.toString
// ("Struct{payload=...,region=eu}", NULL fields left out), JsonConverter
// an object of the payload (a JSON string or null) and the fields
// (strings, integers as JSON numbers, null), with schemas under the
// struct schema named EnvelopeName. With Tombstone a blank payload gives
// a tombstone (nil).
func (m *Mapping) EncodeRow(payload []byte, vals [][]byte) []byte {
	if len(m.EnvelopeFields) == 0 {
		return m.EncodeValue(payload)
	}
	if m.Tombstone && blank(payload) {
		return nil
	}
	if payload != nil && m.CompactJSON {
		payload = CompactJSON(payload)
	}
	n := len(payload) + len(payload)/8 + 64
	for _, f := range m.EnvelopeFields {
		n += len(f.Name) + len(vals[f.Slot]) + 8
	}
	switch m.Format {
	case FormatString:
		b := append(make([]byte, 0, n), "Struct{"...)
		sep := false
		put := func(name string, v []byte) {
			if v == nil {
				return
			}
			if sep {
				b = append(b, ',')
			}
			sep = true
			b = append(append(append(b, name...), '='), v...)
		}
		put("payload", payload)
		for _, f := range m.EnvelopeFields {
			put(f.Name, vals[f.Slot])
		}
		return append(b, '}')
	case FormatJSONSchemas:
		b := make([]byte, 0, n+128+48*len(m.EnvelopeFields)+len(m.EnvelopeName))
		b = append(b, `{"schema":{"type":"struct","fields":[{"type":"string","optional":`...)
		b = strconv.AppendBool(b, m.PayloadOptional)
		if m.Kinds[m.Payload] == KindJSON {
			b = append(b, `,"name":"io.debezium.data.Json","version":1`...)
		}
		b = append(b, `,"field":"payload"}`...)
		for _, f := range m.EnvelopeFields {
			b = append(b, `,{"type":"`...)
			b = append(b, f.Type...)
			b = append(b, `","optional":`...)
			b = strconv.AppendBool(b, f.Optional)
			b = append(b, `,"field":`...)
			b = AppendJacksonString(b, []byte(f.Name))
			b = append(b, '}')
		}
		b = append(b, `],"optional":false,"name":`...)
		b = AppendJacksonString(b, []byte(m.EnvelopeName))
		b = append(b, `},"payload":`...)
		return append(m.appendStruct(b, payload, vals), '}')
	}
	return m.appendStruct(make([]byte, 0, n), payload, vals)
}

// appendStruct appends the value struct as JsonConverter writes it
// without its schema.
func (m *Mapping) appendStruct(b, payload []byte, vals [][]byte) []byte {
	b = append(b, `{"payload":`...)
	if payload == nil {
		b = append(b, "null"...)
	} else {
		b = AppendJacksonString(b, payload)
	}
	for _, f := range m.EnvelopeFields {
		b = append(b, ',')
		b = AppendJacksonString(b, []byte(f.Name))
		b = append(b, ':')
		switch v := vals[f.Slot]; {
		case v == nil:
			b = append(b, "null"...)
		case f.Type != "string":
			b = append(b, v...)
		default:
			b = AppendJacksonString(b, v)
		}
	}
	return append(b, '}')
}

// CompactJSON returns JSON text without the whitespace outside strings:
// MySQL's JSON type as Debezium's MySQL connector renders it (JsonBinary:
// no space after ":" and ","), from the text MySQL prints ("{"a": 1}" →
// "{"a":1}"). Numbers are kept as MySQL prints them, which agrees with
// Java's rendering for integers and for doubles from 1e-3 to 1e7 (Java
// switches to E notation outside: 1.0E7).
func CompactJSON(s []byte) []byte {
	out := make([]byte, 0, len(s))
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in:
			out = append(out, c)
			if c == '\\' && i+1 < len(s) {
				i++
				out = append(out, s[i])
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
			out = append(out, c)
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
		default:
			out = append(out, c)
		}
	}
	return out
}

const hexUpper = "0123456789ABCDEF"

// AppendJacksonString appends s (UTF-8 text) as a JSON string the way
// Kafka Connect's JsonConverter writes it (Jackson 2.21's UTF8JsonGenerator
// defaults): '"' and '\' escaped, the control characters below U+0020 as
// \b \t \n \f \r or \u00XX, characters beyond the Basic Multilingual Plane
// as an escaped surrogate pair (\uD83C\uDF89: JsonWriteFeature
// COMBINE_UNICODE_SURROGATES_IN_UTF8 is off by default), everything else as
// is. An invalid UTF-8 byte becomes U+FFFD, as Java's decoding makes it.
func AppendJacksonString(b, s []byte) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\t':
				b = append(b, '\\', 't')
			case '\n':
				b = append(b, '\\', 'n')
			case '\f':
				b = append(b, '\\', 'f')
			case '\r':
				b = append(b, '\\', 'r')
			default:
				if c < 0x20 {
					b = append(b, '\\', 'u', '0', '0', hexUpper[c>>4], hexUpper[c&15])
				} else {
					b = append(b, c)
				}
			}
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = utf8.AppendRune(b, utf8.RuneError)
		case r > 0xFFFF:
			r -= 0x10000
			b = appendU(b, 0xD800+(r>>10))
			b = appendU(b, 0xDC00+(r&0x3FF))
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexUpper[r>>12&15], hexUpper[r>>8&15], hexUpper[r>>4&15], hexUpper[r&15])
}
