package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/internal/secure"
)

// configKeys returns every key path of the configuration file, from the
// yaml tags of Config: sections ("kafka.tls") and settings
// ("kafka.tls.ca-file"); list entries without their index ("sources.name",
// "source.tables.pattern").
func configKeys() map[string]bool {
	keys := map[string]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			key, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if key == "" || key == "-" {
				continue
			}
			p := key
			if path != "" {
				p = path + "." + key
			}
			keys[p] = true
			walk(t.Field(i).Type, p)
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return keys
}

// keyRef matches a configuration key named in a message: a section name
// (every section of Config: a new one is covered without editing this), a
// dot, then lower-case words ("source.ssl-ca", "sources[1].kafka.tls.ca-file",
// "audit.rows-per-second").
var keyRef = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./{-])((?:sources\[[0-9i]+\]\.)?(?:` + strings.Join(sections(), "|") + `)(?:\[[0-9i]+\])?(?:\.[a-z][a-z0-9-]*\*?(?:\[[0-9i%d]+\])?)+)`)

// sections returns the top-level keys of Config that hold settings of
// their own ("source", "kafka", "audit", ...), but "sources", whose entries'
// keys are the sections' (keyRef's optional prefix).
func sections() []string {
	var out []string
	for k := range configKeys() {
		if sec, _, ok := strings.Cut(k, "."); ok && sec != "sources" && !slices.Contains(out, sec) {
			out = append(out, sec)
		}
	}
	slices.Sort(out)
	return out
}

// The sections keyRef knows include those the hard-coded list of before
// missed (audit): a message naming a key of theirs that does not exist
// is caught.
func TestKeyRefSections(t *testing.T) {
	for _, want := range []string{"audit", "checkpoint", "ha", "kafka", "log", "router", "source"} {
		if !slices.Contains(sections(), want) {
			t.Errorf("sections() = %v, lacks %s", sections(), want)
		}
	}
	keys := configKeys()
	for _, c := range []struct {
		msg, key string
		known    bool
	}{
		{"set audit.rows-per-sec lower", "audit.rows-per-sec", false},
		{"audit.rows-per-second: at least 1", "audit.rows-per-second", true},
		{"see docs/verify-and-audit.md", "", false},
		{"sources[2].checkpoint.tls.ca-file: open x", "sources[2].checkpoint.tls.ca-file", true},
	} {
		m := keyRef.FindStringSubmatch(c.msg)
		switch {
		case c.key == "" && m != nil:
			t.Errorf("%q: matched %q, want no key", c.msg, m[1])
		case c.key != "" && (m == nil || m[1] != c.key):
			t.Errorf("%q: matched %v, want %q", c.msg, m, c.key)
		case c.key != "" && known(keys, normKey(m[1])) != c.known:
			t.Errorf("%q: known %v, want %v", c.msg, !c.known, c.known)
		}
	}
}

// normKey drops list indices and a trailing "." ("sources[2].source.tables[0].pattern" → "sources.source.tables.pattern").
func normKey(k string) string {
	return strings.TrimSuffix(regexp.MustCompile(`\[[^]]*\]`).ReplaceAllString(k, ""), ".")
}

// known reports whether k (normalised) is a key; keys of a sources entry
// are also the top-level section's; "kafka.sasl.aws-*" names the keys
// with that prefix (at least one).
func known(keys map[string]bool, k string) bool {
	k = strings.TrimPrefix(k, "sources.")
	if p, ok := strings.CutSuffix(k, "*"); ok {
		for key := range keys {
			if strings.HasPrefix(key, p) {
				return true
			}
		}
		return false
	}
	return keys[k] || keys["sources."+k]
}

// Every configuration key a message names exists: the string literals of
// the program's Go files (error texts, log lines, hints) are searched for
// "section.key" references, each checked against the keys of the yaml
// tags. A text naming source.ssl.ca-file (the setting is source.ssl-ca)
// fails here.
func TestMessagesNameRealKeys(t *testing.T) {
	keys := configKeys()
	var bad []string
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, m := range keyRef.FindAllStringSubmatch(s, -1) {
				if k := normKey(m[1]); !known(keys, k) {
					bad = append(bad, fset.Position(lit.Pos()).String()+": "+m[1])
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(bad)
	for _, b := range bad {
		t.Errorf("a message names a key the configuration does not have: %s", b)
	}
	// The names given to package secure's messages at run time.
	for _, k := range []secure.Keys{secure.Section("kafka.tls"), secure.Section("checkpoint.tls")} {
		for _, n := range []string{k.CAFile, k.CertFile, k.KeyFile, k.ServerName, strings.TrimSuffix(k.Off, ": false")} {
			if !keys[n] {
				t.Errorf("secure.Section names %s, not a key", n)
			}
		}
	}
}

// The refusals of configurations that would be accepted silently, and
// every message of a table of bad configurations: each line names a key
// of the configuration first, and the fix.
func TestValidateNamesRealKeys(t *testing.T) {
	clearEnv(t)
	keys := configKeys()
	base := "source: {user: u, schema: im, start: latest}\n"
	for _, c := range []struct {
		name, yaml string
		want       string // a line of the error
	}{
		{"table beside tables", "source: {user: u, schema: im, start: latest, table: t, tables: [{table: a}]}\n",
			"source.table: not read when source.tables is set (the tables listed there are the source's outbox tables): remove it, or list it in source.tables as {table: ...}"},
		{"the default table beside tables", "source: {user: u, schema: im, start: latest, table: im_event_outbox, tables: [{table: a}]}\n", "source.table: not read when source.tables is set"},
		{"table beside tables in an entry", base + "sources:\n  - {name: a, source: {table: t, tables: [{pattern: 'im\\.x'}]}}\n", "sources[0].source.table: not read when sources[0].source.tables is set"},
		{"transactional-id without exactly-once", base + "kafka: {transactional-id: my-id}\n",
			`kafka.transactional-id: "my-id": only used with kafka.delivery: exactly-once (delivery is at-least-once): remove it, or set kafka.delivery: exactly-once`},
		{"addrs without sentinel or cluster", base + "checkpoint: {addrs: ['r1:6379', 'r2:6379']}\n",
			"checkpoint.addrs: [r1:6379 r2:6379]: only used with checkpoint.sentinel-master (the Sentinels) or checkpoint.cluster: true (seed nodes): set one of them, or give the one Redis server as checkpoint.addr"},
		{"sentinel without addrs", base + "checkpoint: {sentinel-master: m}\n", "checkpoint.addrs: required with checkpoint.sentinel-master"},
		{"source TLS files", "source: {user: u, schema: im, start: latest, ssl-mode: verify-ca, ssl-ca: /nonexistent/ca.pem, ssl-cert: /x.pem}\n", "source.ssl-ca: open /nonexistent/ca.pem"},
		{"source client certificate without key", "source: {user: u, schema: im, start: latest, ssl-mode: required, ssl-cert: /x.pem}\n", "source.ssl-cert and source.ssl-key: give both or neither"},
		{"kafka TLS", base + "kafka: {tls: {enabled: true, ca-file: /nonexistent/ca.pem}}\n", "kafka.tls.ca-file: open /nonexistent/ca.pem"},
		{"checkpoint TLS", base + "checkpoint: {tls: {server-name: x}}\n", "checkpoint.tls.enabled: false, but other checkpoint.tls settings are set"},
		{"every section", "source: {addr: x, linger: 1s, on-purged: maybe, ssl-mode: preferred, ssl-ca: /x}\nrouter: {topic: ''}\nkafka: {batch-size: 0, on-poison: no, delivery: twice, sasl: {mechanism: PLAIN}}\ncheckpoint: {key: '', interval: 1ms, cluster: true, db: 2}\nha: {server-ids: 0}\nlog: {level: loud}\nshutdown-timeout: 0s\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadFor(writeConfig(t, c.yaml), ScopeRun)
			if err == nil {
				t.Fatalf("accepted:\n%s", c.yaml)
			}
			lines := strings.Split(err.Error(), "\n")
			if c.want != "" && !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, c.want) }) {
				t.Errorf("no line starts with %q:\n%v", c.want, err)
			}
			for _, l := range lines[1:] { // the first is "invalid configuration:"
				key := strings.FieldsFunc(l, func(r rune) bool { return r == ':' || r == ' ' })[0]
				if key == "" {
					t.Errorf("line names no key first: %q", l)
					continue
				}
				if k := normKey(key); !known(keys, k) {
					t.Errorf("line names %q, not a key: %q", key, l)
				}
				for _, m := range keyRef.FindAllStringSubmatch(l, -1) {
					if !known(keys, normKey(m[1])) {
						t.Errorf("line names %q, not a key: %q", m[1], l)
					}
				}
			}
		})
	}
	if binlog.DefaultConfig().Table == "" {
		t.Fatal("source.table has no default: the load-time check of source.table beside source.tables is not needed")
	}
}
