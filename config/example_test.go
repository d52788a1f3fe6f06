package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// A variable giving a secret in one form replaces the file's other form
// (doc error 13 of issue 33: config.example.yaml's source.password and
// CDC_OUTBOX_SOURCE_PASSWORD_FILE made every command exit 2); both
// variables at once are still refused.
func TestEnvReplacesSecretForm(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "source: {user: u, schema: im, start: latest}\n"
	for _, c := range []struct {
		name, yaml string
		env        map[string]string
		check      func(Config) bool
		refused    string // a line of the error; "" when accepted
	}{
		{"file variable over the file's password", "source: {user: u, schema: im, start: latest, password: p}\n",
			map[string]string{"CDC_OUTBOX_SOURCE_PASSWORD_FILE": secret},
			func(c Config) bool { return c.Source.Password == "" && c.Source.PasswordFile == secret }, ""},
		{"password variable over the file's password-file", "source: {user: u, schema: im, start: latest, password-file: " + secret + "}\n",
			map[string]string{"CDC_OUTBOX_SOURCE_PASSWORD": "v"},
			func(c Config) bool { return c.Source.Password == "v" && c.Source.PasswordFile == "" }, ""},
		{"redis sentinel password file", base + "checkpoint: {sentinel-password: p}\n",
			map[string]string{"CDC_OUTBOX_CHECKPOINT_SENTINEL_PASSWORD_FILE": secret},
			func(c Config) bool {
				return c.Checkpoint.SentinelPassword == "" && c.Checkpoint.SentinelPasswordFile == secret
			}, ""},
		{"kafka client secret file", base + "kafka: {sasl: {mechanism: OAUTHBEARER, token-url: 'https://idp/token', client-id: c, client-secret: s}}\n",
			map[string]string{"CDC_OUTBOX_KAFKA_SASL_CLIENT_SECRET_FILE": secret},
			func(c Config) bool { return c.Kafka.SASL.ClientSecret == "" && c.Kafka.SASL.ClientSecretFile == secret }, ""},
		{"both variables", base, map[string]string{"CDC_OUTBOX_SOURCE_PASSWORD": "v", "CDC_OUTBOX_SOURCE_PASSWORD_FILE": secret},
			nil, "source.password-file: set either source.password or source.password-file, not both"},
		{"both in the file", "source: {user: u, schema: im, start: latest, password: p, password-file: " + secret + "}\n", nil,
			nil, "source.password-file: set either source.password or source.password-file, not both"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := LoadFor(writeConfig(t, c.yaml), ScopeRun)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("err = %v, want %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(cfg) {
				t.Errorf("loaded %+v", cfg.Redacted())
			}
			// The start log and check say the variable replaced the
			// file's value (every accepted case gives the other form in
			// the file).
			for _, e := range cfg.Environment() {
				if _, ok := c.env[e.Var]; ok && !e.OverridesFile {
					t.Errorf("Environment(): %q, want it over the file's value", e)
				}
			}
		})
	}
}

// exampleOmits are the keys config.example.yaml leaves out on purpose,
// with the reason ("x.*": every key under x); every other key is in it,
// set or commented out.
var exampleOmits = map[string]string{
	"source.mapping.*":                 "a mapping per layout: docs/mapping.md",
	"source.tables.mapping.*":          "a mapping per layout: docs/mapping.md",
	"kafka.sasl.password":              "secrets: the example shows the -file form",
	"kafka.sasl.client-secret":         "secrets: the example shows the -file form",
	"kafka.sasl.aws-access-key-id":     "secrets: the example shows the -file form",
	"kafka.sasl.aws-secret-access-key": "secrets: the example shows the -file form",
	"kafka.sasl.aws-session-token":     "secrets: the example shows the -file form",
	"checkpoint.password":              "secrets: the example shows the -file form",
	"checkpoint.sentinel-password":     "secrets: the example shows the -file form",
}

// omitted reports whether exampleOmits lists key p.
func omitted(p string) bool {
	for k := range exampleOmits {
		if prefix, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(p, prefix) || k == p {
			return true
		}
	}
	return false
}

// commentedKey matches a commented-out setting of config.example.yaml:
// "  # password-file: /run/secrets/x", "#   - name: shard1".
var commentedKey = regexp.MustCompile(`^(\s*)# ( *(?:- )?[a-z][a-z0-9-]*:(?:\s.*)?)$`)

// uncomment returns config.example.yaml with its commented-out settings
// set: the whole example, for checking its keys.
func uncomment(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if m := commentedKey.FindStringSubmatch(l); m != nil {
			lines[i] = m[1] + m[2]
		}
	}
	return strings.Join(lines, "\n")
}

// exampleKeys returns the key paths of a YAML document decoded into t
// ("sources.name", "source.tables.pattern": lists without an index), and
// an error for each key t does not have.
func exampleKeys(n *yaml.Node, t reflect.Type, path string, keys map[string]bool, bad *[]string) {
	for t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			exampleKeys(c, t, path, keys, bad)
		}
		return
	case yaml.MappingNode:
	default:
		return
	}
	if t.Kind() != reflect.Struct {
		return // a map's own keys (extensions, headers, configs)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		f, ok := fieldByKey(t, k.Value)
		if !ok {
			*bad = append(*bad, fmt.Sprintf("line %d: %s", k.Line, p))
			continue
		}
		keys[p] = true
		exampleKeys(n.Content[i+1], f.Type, p, keys, bad)
	}
}

// config.example.yaml names real keys only, set or commented out, and
// every key of the configuration, but for exampleOmits.
func TestExampleKeys(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(uncomment(string(b))), &doc); err != nil {
		t.Fatalf("config.example.yaml with its commented-out settings set is not YAML: %v", err)
	}
	keys := map[string]bool{}
	var bad []string
	exampleKeys(&doc, reflect.TypeFor[Config](), "", keys, &bad)
	for _, b := range bad {
		t.Errorf("config.example.yaml %s: no such key", b)
	}
	secs, err := ReferenceSections()
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, s := range secs {
		for _, k := range s.Keys {
			p := strings.ReplaceAll(k.Path, "[]", "")
			if !keys[p] && !omitted(p) {
				missing = append(missing, p)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("config.example.yaml lacks %s: add each (commented out when optional, with its default), or list it in exampleOmits with the reason", strings.Join(missing, ", "))
	}
	for k := range exampleOmits {
		if keys[k] {
			t.Errorf("exampleOmits lists %s, which config.example.yaml has", k)
		}
	}
}

// config.example.yaml loads and validates, also with the source password
// from a file given by a variable beside the file's password (doc error
// 13 of issue 33).
func TestLoadConfigExamplePasswordFile(t *testing.T) {
	clearEnv(t)
	secret := filepath.Join(t.TempDir(), "mysql-password")
	if err := os.WriteFile(secret, []byte("change-me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CDC_OUTBOX_SOURCE_PASSWORD_FILE", secret)
	cfg, err := LoadFor(filepath.Join("..", "config.example.yaml"), ScopeRun)
	if err != nil {
		t.Fatal(err)
	}
	if pw, err := cfg.Source.Secret(); err != nil || pw != "change-me" || cfg.Source.Password != "" {
		t.Errorf("source password %q (%v), source.password %q: want the file's", pw, err, cfg.Source.Password)
	}
}
