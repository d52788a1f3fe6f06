package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/mapping"
)

// ruleProbes turns the first clause of a rule tag (before ";") into
// values Validate must accept and refuse, for the rules written in one of
// these forms: "at least N", ">= 0", "> 0", "A to B", "-1 or more",
// "required" (for a string), and a list of lower-case words "a, b or c"
// ("or empty"). Other rules give none.
func ruleProbes(rule, typ string) (accept, refuse []string) {
	clause, _, _ := strings.Cut(rule, ";")
	clause = strings.TrimSpace(regexp.MustCompile(`\s*\(.*?\)`).ReplaceAllString(clause, ""))
	below := func(v string) string { return step(v, typ, -1) }
	above := func(v string) string { return step(v, typ, +1) }
	switch m := regexp.MustCompile(`^(?:at least (-?[0-9]\S*)|(-?[0-9]\S*) or more|>= (0)|> (0)|(-?[0-9]\S*) to (-?[0-9]\S*))$`).FindStringSubmatch(clause); {
	case m == nil:
	case m[1] != "" || m[2] != "" || m[3] != "":
		v := m[1] + m[2] + m[3]
		return []string{v}, []string{below(v)}
	case m[4] != "":
		return []string{above("0")}, []string{"0"}
	default:
		return []string{m[5], m[6]}, []string{below(m[5]), above(m[6])}
	}
	if typ != "string" {
		return nil, nil
	}
	if rest, ok := strings.CutPrefix(clause, "required"); ok && (rest == "" || strings.HasPrefix(rest, ",")) {
		return nil, []string{""}
	}
	words := regexp.MustCompile(`^([a-z][a-z0-9-]*(?:, [a-z][a-z0-9-]*)*) or ([a-z][a-z0-9-]*)$`).FindStringSubmatch(clause)
	if words == nil {
		return nil, nil
	}
	for _, w := range append(strings.Split(words[1], ", "), words[2]) {
		if w == "empty" {
			w = ""
		}
		accept = append(accept, w)
	}
	return accept, []string{"bogus"}
}

// step returns v (a number or a duration) plus or minus the smallest unit.
func step(v, typ string, d int) string {
	if typ == "duration" {
		x, err := time.ParseDuration(v)
		if err != nil {
			return "bad duration " + v
		}
		return (x + time.Duration(d)*time.Millisecond).String()
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return "bad number " + v
	}
	return strconv.FormatInt(n+int64(d), 10)
}

// setKey sets the field of struct v at key path from text.
func setKey(v reflect.Value, path, text string) error {
	name, rest, _ := strings.Cut(path, ".")
	f, ok := fieldByKey(v.Type(), name)
	if !ok {
		return fmt.Errorf("no key %s", name)
	}
	fv := v.FieldByIndex(f.Index)
	if rest != "" {
		return setKey(fv, rest, text)
	}
	switch {
	case fv.Type() == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(text)
		fv.SetInt(int64(d))
		return err
	case fv.Kind() == reflect.String:
		fv.SetString(text)
	case fv.CanInt():
		n, err := strconv.ParseInt(text, 10, 64)
		fv.SetInt(n)
		return err
	case fv.CanUint():
		n, err := strconv.ParseUint(text, 10, 64)
		fv.SetUint(n)
		return err
	default:
		return fmt.Errorf("%s: cannot set a %s", path, fv.Type())
	}
	return nil
}

// The rules of the reference are what Validate enforces: for every key
// whose rule is a bound or a list of words, a configuration holding a
// value the rule accepts has no problem with that key, and one holding a
// value it refuses has.
func TestReferenceRulesHonest(t *testing.T) {
	secs, err := ReferenceSections()
	if err != nil {
		t.Fatal(err)
	}
	probed := 0
	for _, s := range secs {
		for _, k := range s.Keys {
			if strings.Contains(k.Path, "[]") {
				continue
			}
			accept, refuse := ruleProbes(k.Rule, k.Type)
			for _, c := range []struct {
				values []string
				want   bool // a problem named by the key
			}{{accept, false}, {refuse, true}} {
				for _, v := range c.values {
					cfg := Default()
					cfg.Source.User, cfg.Source.Schema, cfg.Source.Start = "u", "im", "latest"
					if err := setKey(reflect.ValueOf(&cfg).Elem(), k.Path, v); err != nil {
						t.Errorf("%s: rule %q: %v", k.Path, k.Rule, err)
						continue
					}
					var named []string
					for _, e := range mapping.Problems(cfg.Validate()) {
						if e == nil {
							continue
						}
						// "ha.renew-interval, ha.margin: want >= 0" names both
						keys, _, _ := strings.Cut(e.Error(), ": ")
						if slices.Contains(strings.Split(keys, ", "), k.Path) {
							named = append(named, e.Error())
						}
					}
					if got := len(named) > 0; got != c.want {
						t.Errorf("%s: %q with rule %q: problems %q", k.Path, v, k.Rule, named)
					}
					probed++
				}
			}
		}
	}
	if probed < 50 {
		t.Errorf("only %d values probed: the rule forms ruleProbes reads are not used", probed)
	}
}

func TestRuleProbes(t *testing.T) {
	for _, c := range []struct {
		rule, typ      string
		accept, refuse []string
	}{
		{"at least 100ms", "duration", []string{"100ms"}, []string{"99ms"}},
		{"at least 1; more", "integer", []string{"1"}, []string{"0"}},
		{">= 0", "duration", []string{"0"}, []string{"-1ms"}},
		{"> 0", "integer", []string{"1"}, []string{"0"}},
		{"0 to 50ms", "duration", []string{"0", "50ms"}, []string{"-1ms", "51ms"}},
		{"0 to 1073741824 (1 GiB)", "integer", []string{"0", "1073741824"}, []string{"-1", "1073741825"}},
		{"-1 or more", "integer", []string{"-1"}, []string{"-2"}},
		{"file or gtid", "string", []string{"file", "gtid"}, []string{"bogus"}},
		{"fail, earliest, latest or empty (fail)", "string", []string{"fail", "earliest", "latest", ""}, []string{"bogus"}},
		{"none, gzip, lz4 or empty (none)", "string", []string{"none", "gzip", "lz4", ""}, []string{"bogus"}},
		{"required", "string", nil, []string{""}},
		{"required, unique", "string", nil, []string{""}},
		{"required with token-url", "string", nil, nil},
		{"host:port", "string", nil, nil},
		{"at least interval", "duration", nil, nil},
	} {
		a, r := ruleProbes(c.rule, c.typ)
		if !slices.Equal(a, c.accept) || !slices.Equal(r, c.refuse) {
			t.Errorf("%q: accept %q refuse %q, want %q, %q", c.rule, a, r, c.accept, c.refuse)
		}
	}
}
