package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
)

// Policies for a JSON null in an expanded payload (Config.ExpandJSONNull,
// Debezium's table.json.payload.null.behavior).
const (
	ExpandNullIgnore        = "ignore"         // the field is left out of the schema (default)
	ExpandNullOptionalBytes = "optional-bytes" // an optional bytes field (Debezium's optional_bytes)
)

// This file reproduces Debezium's table.expand.json.payload
// (EventRouterDelegate and JsonSchemaData, 3.6.1.Final): a payload that
// starts with "{" or "[" is parsed (Jackson's ObjectMapper.readTree), a
// Connect schema is inferred from it (JsonSchemaData.toConnectSchema) and
// the value converted to a Struct (toConnectData); whatever fails there
// (a top-level array, an array of mixed types, a number beyond int64, ...)
// keeps the payload a string, as Debezium does after its "JSON expansion
// failed" warning.

// jnode is a parsed JSON value, its object members in document order (a
// repeated name keeps its first place and takes the last value, as
// Jackson's ObjectNode does).
type jnode struct {
	kind  byte // 'o' object, 'a' array, 's' string, 'b' boolean, 'n' number, 'z' null
	text  string
	keys  []string
	elems []*jnode
}

// parseJSON parses the first JSON value of p (Jackson ignores what
// follows it: FAIL_ON_TRAILING_TOKENS is off).
func parseJSON(p []byte) (*jnode, error) {
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	return parseValue(d, tok, 0)
}

func parseValue(d *json.Decoder, tok json.Token, depth int) (*jnode, error) {
	if depth > 1000 { // Jackson's StreamReadConstraints default nesting depth
		return nil, errors.New("nesting depth beyond 1000")
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &jnode{kind: 'a'}
		if t == '{' {
			n.kind = 'o'
		}
		for d.More() {
			var key string
			if n.kind == 'o' {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				key = k.(string)
			}
			vt, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := parseValue(d, vt, depth+1)
			if err != nil {
				return nil, err
			}
			if n.kind == 'a' {
				n.elems = append(n.elems, v)
				continue
			}
			if i := indexOf(n.keys, key); i >= 0 {
				n.elems[i] = v
				continue
			}
			n.keys = append(n.keys, key)
			n.elems = append(n.elems, v)
		}
		if _, err := d.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &jnode{kind: 's', text: t}, nil
	case bool:
		n := &jnode{kind: 'b', text: "false"}
		if t {
			n.text = "true"
		}
		return n, nil
	case json.Number:
		return &jnode{kind: 'n', text: string(t)}, nil
	case nil:
		return &jnode{kind: 'z'}, nil
	}
	return nil, errors.New("unexpected token")
}

func indexOf(s []string, v string) int {
	for i := range s {
		if s[i] == v {
			return i
		}
	}
	return -1
}

// number classifies a JSON number as Jackson's tree does: a literal with a
// fraction or exponent is a double (DoubleNode); an integer an int
// (IntNode), a long (LongNode) or beyond (BigIntegerNode: typ "big", whose
// Connect schema is float64 but whose value, a BigDecimal, fits none).
func number(lit string) (typ string, i int64, f float64) {
	if strings.ContainsAny(lit, ".eE") {
		f, _ = strconv.ParseFloat(lit, 64) // ±Inf beyond the range, as Double.parseDouble
		return "double", 0, f
	}
	i, err := strconv.ParseInt(lit, 10, 64)
	switch {
	case err != nil:
		return "big", 0, 0
	case i >= math.MinInt32 && i <= math.MaxInt32:
		return "int32", i, 0
	}
	return "int64", i, 0
}

// cschema is an inferred Kafka Connect schema; every one is optional.
type cschema struct {
	typ    string // string, boolean, int32, int64, double, bytes, array, struct
	name   string
	named  bool
	fields []cfield
	items  *cschema
}

type cfield struct {
	name string
	s    *cschema
}

func (s *cschema) field(name string) int {
	for i := range s.fields {
		if s.fields[i].name == name {
			return i
		}
	}
	return -1
}

// equal is ConnectSchema.equals for inferred schemas.
func (s *cschema) equal(o *cschema) bool {
	if s == nil || o == nil {
		return s == o
	}
	if s.typ != o.typ || s.named != o.named || s.name != o.name || len(s.fields) != len(o.fields) || !s.items.equal(o.items) {
		return false
	}
	for i := range s.fields {
		if s.fields[i].name != o.fields[i].name || !s.fields[i].s.equal(o.fields[i].s) {
			return false
		}
	}
	return true
}

var errExpand = errors.New("JSON expansion failed")

// expander is JsonSchemaData with its null behaviour.
type expander struct{ optionalBytes bool }

// schema is JsonSchemaData.toConnectSchema; nil: no field (a null under
// ignore, an empty array).
func (x expander) schema(key string, keyed bool, n *jnode) (*cschema, error) {
	switch n.kind {
	case 's':
		return &cschema{typ: "string"}, nil
	case 'b':
		return &cschema{typ: "boolean"}, nil
	case 'n':
		typ, _, _ := number(n.text)
		if typ == "big" {
			typ = "double"
		}
		return &cschema{typ: typ}, nil
	case 'a':
		if len(n.elems) == 0 {
			return nil, nil
		}
		items, err := x.arrayItems(key, keyed, n)
		if err != nil {
			return nil, err
		}
		return &cschema{typ: "array", items: items}, nil
	case 'o':
		s := &cschema{typ: "struct", name: key, named: keyed}
		for i, k := range n.keys {
			fk := k
			if keyed && strings.TrimSpace(key) != "" {
				fk = key + "." + k
			}
			fs, err := x.schema(fk, true, n.elems[i])
			if err != nil {
				return nil, err
			}
			if fs != nil && s.field(k) < 0 {
				s.fields = append(s.fields, cfield{k, fs})
			}
		}
		return s, nil
	case 'z':
		if x.optionalBytes {
			return &cschema{typ: "bytes"}, nil
		}
	}
	return nil, nil
}

// arrayItems is toConnectSchemaWithCycles: the element schema of a
// non-empty array whose non-null elements are of one JSON type (and
// numbers of one schema); for objects the union of their fields. Debezium
// merges the distinct object schemas in the order of a HashSet (Java's
// identity hashes: it varies between runs); here in the order of the
// elements.
func (x expander) arrayItems(key string, keyed bool, n *jnode) (*cschema, error) {
	var sample *jnode
	refNum := ""
	for _, e := range n.elems {
		if e.kind == 'z' {
			continue
		}
		if sample == nil {
			sample = e
		}
		if e.kind != sample.kind {
			return nil, errExpand // not a homogenous array
		}
		if e.kind == 'n' {
			typ, _, _ := number(e.text)
			if typ == "big" {
				typ = "double"
			}
			if refNum == "" {
				refNum = typ
			}
			if typ != refNum {
				return nil, errExpand // different number types
			}
		}
	}
	if sample == nil {
		sample = &jnode{kind: 'z'}
	}
	if sample.kind != 'o' {
		s, err := x.schema("", false, sample)
		if err == nil && s == nil {
			err = errExpand // unrecognized member schema
		}
		return s, err
	}
	var merged *cschema
	var seen []*cschema
	for _, e := range n.elems {
		if e.kind != 'o' {
			continue
		}
		s, err := x.schema(key, keyed, e)
		if err != nil {
			return nil, err
		}
		dup := false
		for _, o := range seen {
			dup = dup || o.equal(s)
		}
		if dup {
			continue
		}
		seen = append(seen, s)
		if merged == nil {
			merged = s
			continue
		}
		m := &cschema{typ: "struct", name: merged.name, named: merged.named, fields: append([]cfield(nil), merged.fields...)}
		for _, f := range s.fields {
			if i := m.field(f.name); i < 0 {
				m.fields = append(m.fields, f)
			} else if old := m.fields[i].s; !old.equal(f.s) && old.typ == "bytes" && f.s.typ != "bytes" {
				m.fields[i].s = f.s
			}
		}
		merged = m
	}
	return merged, nil
}

// cstruct is a Struct of an inferred schema: vals by field, nil for null.
type cstruct struct {
	s    *cschema
	vals []any
}

// data is toConnectData with Struct.put's validation: the value of n under
// schema s (string, bool, int32, int64, float64, []any, *cstruct or nil),
// or errExpand where Java throws.
func data(n *jnode, s *cschema) (any, error) {
	switch n.kind {
	case 'z':
		return nil, nil
	case 's':
		if s.typ == "string" {
			return n.text, nil
		}
	case 'b':
		if s.typ == "boolean" {
			return n.text == "true", nil
		}
	case 'n':
		typ, i, f := number(n.text)
		switch {
		case typ == "double" && s.typ == "double":
			return f, nil
		case typ == "int32" && s.typ == "int32":
			return int32(i), nil
		case typ == "int64" && s.typ == "int64":
			return i, nil
		}
	case 'a':
		if s.typ != "array" {
			return nil, errExpand
		}
		out := make([]any, len(n.elems))
		for j, e := range n.elems {
			v, err := data(e, s.items)
			if err != nil {
				return nil, err
			}
			out[j] = v
		}
		return out, nil
	case 'o':
		if s.typ != "struct" {
			return nil, errExpand
		}
		st := &cstruct{s: s, vals: make([]any, len(s.fields))}
		for j, f := range s.fields {
			if k := indexOf(n.keys, f.name); k >= 0 {
				v, err := data(n.elems[k], f.s)
				if err != nil {
					return nil, err
				}
				st.vals[j] = v
			}
		}
		return st, nil
	}
	return nil, errExpand
}

// expand returns the payload expanded into a Struct (st), or nil when
// Debezium keeps the payload a string: with its schema (the parse or the
// schema inference failed), without a schema (noSchema: an empty
// top-level array infers none), or under the inferred schema (mismatch:
// the conversion failed after the schema was replaced, e.g. a top-level
// array or an integer beyond int64; a JsonConverter then fails the task
// with a DataException, StringConverter writes the string).
func (x expander) expand(payload []byte) (st *cstruct, noSchema, mismatch bool) {
	if len(payload) == 0 || payload[0] != '{' && payload[0] != '[' {
		return nil, false, false
	}
	n, err := parseJSON(payload)
	if err != nil {
		return nil, false, false
	}
	s, err := x.schema("payload", true, n)
	switch {
	case err != nil:
		return nil, false, false
	case s == nil:
		return nil, true, false
	case s.typ != "struct": // a top-level array is no Struct
		return nil, false, true
	}
	v, err := data(n, s)
	if err != nil {
		return nil, false, true
	}
	return v.(*cstruct), false, false
}

// appendSchema appends s as JsonConverter.asJsonSchema writes it.
func appendSchema(b []byte, s *cschema) []byte {
	b = append(b, `{"type":"`...)
	b = append(b, s.typ...)
	b = append(b, '"')
	switch s.typ {
	case "array":
		b = append(b, `,"items":`...)
		b = appendSchema(b, s.items)
	case "struct":
		b = append(b, `,"fields":[`...)
		for i, f := range s.fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSchema(b, f.s)
			b = append(b[:len(b)-1], `,"field":`...)
			b = AppendJacksonString(b, []byte(f.name))
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"optional":true`...)
	if s.named {
		b = append(b, `,"name":`...)
		b = AppendJacksonString(b, []byte(s.name))
	}
	return append(b, '}')
}

// appendJSON appends a value as JsonConverter writes it (Jackson, compact).
func appendJSON(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return AppendJacksonString(b, []byte(v))
	case bool:
		return strconv.AppendBool(b, v)
	case int32:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		return appendJavaDouble(b, v)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case *cstruct:
		b = append(b, '{')
		for i, f := range v.s.fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJacksonString(b, []byte(f.name))
			b = append(b, ':')
			b = appendJSON(b, v.vals[i])
		}
		return append(b, '}')
	}
	return b
}

// appendJava appends a value as Java's toString writes it (Struct.toString,
// AbstractCollection.toString, Double.toString): StringConverter's text.
func appendJava(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return append(b, v...)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendJava(b, e)
		}
		return append(b, ']')
	case *cstruct:
		b = append(b, "Struct{"...)
		sep := false
		for i, f := range v.s.fields {
			if v.vals[i] == nil {
				continue
			}
			if sep {
				b = append(b, ',')
			}
			sep = true
			b = append(append(b, f.name...), '=')
			b = appendJava(b, v.vals[i])
		}
		return append(b, '}')
	}
	return appendJSON(b, v) // booleans and numbers: the same text
}

// appendJavaDouble appends Java's Double.toString of f: plain from 1e-3 to
// 1e7 (at least one decimal: 1000.0), else computerized scientific
// notation (1.0E7, 1.5E-5); Infinity, NaN. The digits are the shortest
// that round-trip (JDK 19+; JDK 17's FloatingDecimal gives one digit more
// for a few values).
func appendJavaDouble(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	if a := math.Abs(f); a == 0 || a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		b = append(b, s...)
		if !strings.Contains(s, ".") {
			b = append(b, ".0"...)
		}
		return b
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // 1.5e-05
	mant, exp, _ := strings.Cut(s, "e")
	b = append(b, mant...)
	if !strings.Contains(mant, ".") {
		b = append(b, ".0"...)
	}
	b = append(b, 'E')
	if exp[0] == '-' {
		b = append(b, '-')
	}
	return append(b, strings.TrimLeft(exp[1:], "0")...)
}
