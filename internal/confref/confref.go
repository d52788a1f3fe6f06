package confref

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Key is one setting.
type Key struct {
	// Path is the key in the file: "kafka.sasl.password"; entries of a
	// list are written "[]": "source.tables[].pattern".
	Path string
	// Type: string, boolean, integer, duration, list of strings, map of
	// strings, list of entries, or section (Same).
	Type string
	// Default as written in YAML ("30s", "true", "[a, b]"); "" when empty.
	Default string
	// Env is the environment variable that sets it; "" when none does.
	Env string
	// File is the key of its -file variant ("source.password-file"), from
	// the tag secret:"password-file": the key is a secret that may be read
	// from a file instead.
	File string
	// Rule is what Validate enforces ("-": nothing beyond the type).
	Rule string
	// Doc is one sentence.
	Doc string
	// Same is the path of the section documenting this key's keys, for a
	// section documented elsewhere ("source" for "sources[].source").
	Same string
}

// Section is the keys of one struct.
type Section struct {
	// Path is the section's key ("kafka.sasl", "source.tables[]"); "" for
	// the top level.
	Path string
	// Doc is the doc tag of the field holding the section.
	Doc string
	// Also lists the other paths where the same keys apply (Key.Same).
	Also []string
	Keys []Key
}

var durationType = reflect.TypeFor[time.Duration]()

// Walk returns the sections of struct type t, the top level first, then
// each section followed by its subsections, in field order. defaults is a
// value of t holding the defaults; envPrefix prefixes every variable. A
// key without a doc tag, or a setting without a rule tag, is an error
// naming the Go field and the tag to add (all joined).
func Walk(t reflect.Type, defaults any, envPrefix string) ([]Section, error) {
	w := &walker{expanded: map[reflect.Type]int{}}
	v := reflect.ValueOf(defaults)
	if v.Type() != t {
		return nil, fmt.Errorf("confref: defaults are a %s, not a %s", v.Type(), t)
	}
	w.section(t, v, "", "", envPrefix, true)
	return w.out, errors.Join(w.errs...)
}

type walker struct {
	out      []Section
	expanded map[reflect.Type]int // section index by struct type
	errs     []error
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// section appends the section of struct type t at path and its
// subsections. env is the variable prefix, envOK whether variables reach
// it at all (not inside a list).
func (w *walker) section(t reflect.Type, v reflect.Value, path, doc, env string, envOK bool) {
	idx := len(w.out)
	w.out = append(w.out, Section{Path: path, Doc: doc})
	w.expanded[t] = idx
	type sub struct {
		t             reflect.Type
		v             reflect.Value
		path, doc     string
		env           string
		envOK         bool
		afterKeyIndex int
	}
	var subs []sub
	var keys []Key
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		p := join(path, name)
		fdoc, hasDoc := f.Tag.Lookup("doc")
		rule, hasRule := f.Tag.Lookup("rule")
		if !hasDoc || strings.TrimSpace(fdoc) == "" {
			w.errs = append(w.errs, fmt.Errorf("%s (%s.%s): no doc tag: add doc:\"one sentence for the user\"", p, t, f.Name))
		}
		fv := reflect.Value{}
		if v.IsValid() {
			fv = v.Field(i)
		}
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != durationType:
			childEnv, childOK := env+f.Tag.Get("envPrefix"), envOK
			if j, seen := w.expanded[ft]; seen && !(childOK && hasEnvTags(ft)) {
				w.out[j].Also = append(w.out[j].Also, p)
				keys = append(keys, Key{Path: p, Type: "section", Doc: fdoc, Same: w.out[j].Path})
				continue
			}
			subs = append(subs, sub{ft, fv, p, fdoc, childEnv, childOK, len(keys)})
			continue
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			if !hasRule {
				w.errs = append(w.errs, fmt.Errorf("%s (%s.%s): no rule tag: add rule:\"what Validate enforces\" (or rule:\"-\")", p, t, f.Name))
			}
			keys = append(keys, Key{Path: p, Type: "list of entries", Default: format(fv), Rule: rule, Doc: fdoc})
			// Variables never reach into a list (github.com/caarlos0/env
			// needs an envPrefix per entry).
			subs = append(subs, sub{ft.Elem(), reflect.Zero(ft.Elem()), p + "[]", "One entry of " + p + ".", "", false, len(keys)})
			continue
		}
		if !hasRule {
			w.errs = append(w.errs, fmt.Errorf("%s (%s.%s): no rule tag: add rule:\"what Validate enforces\" (or rule:\"-\")", p, t, f.Name))
		}
		k := Key{Path: p, Type: typeName(ft), Default: format(fv), Rule: rule, Doc: fdoc}
		if file := f.Tag.Get("secret"); file != "" {
			k.File = join(path, file)
		}
		if e := f.Tag.Get("env"); envOK && e != "" {
			k.Env = env + e
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		if k.File != "" && !slices.ContainsFunc(keys, func(o Key) bool { return o.Path == k.File }) {
			w.errs = append(w.errs, fmt.Errorf("%s: its secret tag names %s, not a key of %s", k.Path, k.File, t))
		}
	}
	w.out[idx].Keys = keys
	for _, s := range subs {
		w.section(s.t, s.v, s.path, s.doc, s.env, s.envOK)
	}
}

// hasEnvTags reports whether a field of struct type t, or of its nested
// structs, has an env tag.
func hasEnvTags(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if _, ok := f.Tag.Lookup("env"); ok {
			return true
		}
		if f.Type.Kind() == reflect.Struct && f.Type != durationType && hasEnvTags(f.Type) {
			return true
		}
	}
	return false
}

func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "integer"
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return "integer ≥ 0"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "list of strings"
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String:
		return "map of strings"
	}
	return t.String()
}

// format writes a default as YAML would; "" for an empty or absent one.
func format(v reflect.Value) string {
	if !v.IsValid() {
		return ""
	}
	if v.Type() == durationType {
		return duration(time.Duration(v.Int()))
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Slice:
		if v.Len() == 0 {
			return ""
		}
		var items []string
		for i := 0; i < v.Len(); i++ {
			items = append(items, format(v.Index(i)))
		}
		return "[" + strings.Join(items, ", ") + "]"
	case reflect.Map:
		if v.Len() == 0 {
			return ""
		}
		var items []string
		for _, k := range v.MapKeys() {
			items = append(items, format(k)+": "+format(v.MapIndex(k)))
		}
		sort.Strings(items)
		return "{" + strings.Join(items, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}

// duration writes d as time.ParseDuration reads it, without the zero
// units String adds to whole minutes and hours ("1m0s" → "1m").
func duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
