package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caarlos0/env/v11"
)

// docs/configuration.md is what the configuration structs generate: a
// key added, a default or a doc tag changed without regenerating the page
// fails here.
func TestConfigurationReferenceCurrent(t *testing.T) {
	want, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	if err != nil {
		t.Fatalf("%v: generate it with %s", err, RegenerateReference)
	}
	if string(got) == want {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
	i := 0
	for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
		i++
	}
	line := func(l []string) string {
		if i < len(l) {
			return l[i]
		}
		return "(end of page)"
	}
	t.Errorf("docs/configuration.md is not what the configuration structs generate: regenerate it with `%s` "+
		"(go run ./cmd/cdc-outbox config reference -o docs/configuration.md) and commit it.\nFirst difference, line %d:\n committed: %s\n generated: %s",
		RegenerateReference, i+1, line(gl), line(wl))
}

// Every key of the file is in the reference (no field lacks its doc or
// rule tag), and its variables are exactly those the loader reads.
func TestReferenceComplete(t *testing.T) {
	secs, err := ReferenceSections()
	if err != nil {
		t.Fatalf("%v\n(each configuration key needs a doc and a rule tag: see package internal/confref)", err)
	}
	documented, vars := map[string]bool{}, map[string]bool{}
	same := map[string]string{} // "sources.source" → "source"
	for _, s := range secs {
		documented[strings.ReplaceAll(s.Path, "[]", "")] = true
		for _, k := range s.Keys {
			documented[strings.ReplaceAll(k.Path, "[]", "")] = true
			if k.Env != "" {
				vars[k.Env] = true
			}
			if k.Same != "" {
				same[strings.ReplaceAll(k.Path, "[]", "")] = strings.ReplaceAll(k.Same, "[]", "")
			}
		}
	}
	for k := range configKeys() {
		// sources.source.tables.mapping.id is documented as source.mapping.id
		p := k
		for changed := true; changed; {
			changed = false
			for from, to := range same {
				if rest, ok := strings.CutPrefix(p, from+"."); ok {
					p, changed = to+"."+rest, true
				}
			}
		}
		if !documented[p] {
			t.Errorf("%s: not in the reference", k)
		}
	}
	cfg := Default()
	params, err := env.GetFieldParamsWithOptions(&cfg, env.Options{Prefix: EnvPrefix})
	if err != nil {
		t.Fatal(err)
	}
	loader := map[string]bool{}
	for _, p := range params {
		loader[p.Key] = true
		if !vars[p.Key] {
			t.Errorf("the loader reads %s, the reference does not name it", p.Key)
		}
	}
	for v := range vars {
		if !loader[v] {
			t.Errorf("the reference names %s, the loader does not read it", v)
		}
	}
}

// fieldByKey returns the field of struct type t whose yaml key is key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k == key && k != "-" {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}
