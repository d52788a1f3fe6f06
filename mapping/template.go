package mapping

import (
	"errors"
	"fmt"
	"strings"
)

// Template is a topic (or ce_source) made of literal text and column
// values: "outbox.event.{aggregatetype}". A template without placeholders
// is a fixed name.
type Template struct {
	Parts []Part
}

// Part is a literal (Column empty) or a column's value (Slot).
type Part struct {
	Lit    string
	Column string
	Slot   int
}

// ParseTemplate parses "{column}" placeholders; "{" and "}" are not
// allowed otherwise, nor an empty placeholder.
func ParseTemplate(s string) (Template, error) {
	var t Template
	if s == "" {
		return t, errors.New("empty: want a name or a template such as outbox.event.{aggregatetype}")
	}
	for s != "" {
		i := strings.IndexAny(s, "{}")
		if i < 0 {
			t.Parts = append(t.Parts, Part{Lit: s, Slot: -1})
			break
		}
		if s[i] == '}' {
			return Template{}, fmt.Errorf("%q without an opening {", "}")
		}
		if i > 0 {
			t.Parts = append(t.Parts, Part{Lit: s[:i], Slot: -1})
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return Template{}, fmt.Errorf("{ without a closing }")
		}
		col := s[i+1 : i+j]
		if col == "" || strings.ContainsAny(col, "{ ") {
			return Template{}, fmt.Errorf("placeholder {%s}: want {column}", col)
		}
		t.Parts = append(t.Parts, Part{Column: strings.ToLower(col), Slot: -1})
		s = s[i+j+1:]
	}
	return t, nil
}

// Fixed returns the name of a template without placeholders.
func (t Template) Fixed() (string, bool) {
	switch len(t.Parts) {
	case 0:
		return "", true
	case 1:
		return t.Parts[0].Lit, t.Parts[0].Column == ""
	}
	return "", false
}

// Columns returns the template's columns.
func (t Template) Columns() []string {
	var cs []string
	for _, p := range t.Parts {
		if p.Column != "" {
			cs = append(cs, p.Column)
		}
	}
	return cs
}

// Append appends the template rendered over vals (by slot). ok is false
// when a column's value is NULL (nil).
func (t Template) Append(b []byte, vals [][]byte) ([]byte, bool) {
	b, null, _ := t.Render(b, vals)
	return b, null == ""
}

// Render appends the template rendered over vals (by slot) and names the
// first column whose value is NULL (null: b then holds what was rendered
// before it) and the first whose value is empty (empty).
func (t Template) Render(b []byte, vals [][]byte) (out []byte, null, empty string) {
	for _, p := range t.Parts {
		if p.Column == "" {
			b = append(b, p.Lit...)
			continue
		}
		if p.Slot < 0 || p.Slot >= len(vals) || vals[p.Slot] == nil {
			return b, p.Column, empty
		}
		if len(vals[p.Slot]) == 0 && empty == "" {
			empty = p.Column
		}
		b = append(b, vals[p.Slot]...)
	}
	return b, "", empty
}

// Probe renders the template with "x" for every column: the shape whose
// validity (a Kafka topic name) can be checked at start.
func (t Template) Probe() string {
	return t.render(func(string) string { return "x" })
}

// render renders the template with col(column) for each placeholder.
func (t Template) render(col func(string) string) string {
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Column == "" {
			b.WriteString(p.Lit)
		} else {
			b.WriteString(col(p.Column))
		}
	}
	return b.String()
}
