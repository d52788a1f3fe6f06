package confref

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

type fakeTLS struct {
	Enabled bool   `yaml:"enabled" env:"ENABLED" doc:"Turn TLS on." rule:"-"`
	CAFile  string `yaml:"ca-file" env:"CA_FILE" doc:"The CA file." rule:"a readable PEM file"`
}

type fakeMapping struct {
	Preset string `yaml:"preset" doc:"The preset." rule:"im or generic"`
}

type fakeTable struct {
	Table   string      `yaml:"table" doc:"A table." rule:"required"`
	Mapping fakeMapping `yaml:"mapping" doc:"Its mapping."`
}

type fakeSource struct {
	Addr         string        `yaml:"addr" env:"ADDR" doc:"host:port." rule:"host:port"`
	Schema       string        `yaml:"schema" doc:"Not a secret." rule:"-"`
	SchemaFile   string        `yaml:"schema-file" doc:"Not a secret's file." rule:"-"`
	Password     string        `yaml:"password" env:"PASSWORD" secret:"password-file" doc:"The password." rule:"-"`
	PasswordFile string        `yaml:"password-file" env:"PASSWORD_FILE" doc:"The password's file." rule:"not with password"`
	Wait         time.Duration `yaml:"wait" env:"WAIT" doc:"How long." rule:"> 0"`
	Mapping      fakeMapping   `yaml:"mapping" doc:"How rows become records."`
	Tables       []fakeTable   `yaml:"tables" doc:"Several tables." rule:"-"`
	internal     int
	FromCode     int `yaml:"-"`
}

type fakeEntry struct {
	Name   string     `yaml:"name" doc:"Its name." rule:"unique"`
	Source fakeSource `yaml:"source" doc:"Its source."`
}

type fakeConfig struct {
	Source fakeSource `yaml:"source" envPrefix:"SOURCE_" doc:"The database."`
	Kafka  struct {
		TLS fakeTLS `yaml:"tls" envPrefix:"TLS_" doc:"TLS to Kafka."`
	} `yaml:"kafka" envPrefix:"KAFKA_" doc:"The brokers."`
	Redis struct {
		TLS fakeTLS `yaml:"tls" envPrefix:"TLS_" doc:"TLS to Redis."`
	} `yaml:"redis" envPrefix:"REDIS_" doc:"The checkpoint store."`
	Entries []fakeEntry       `yaml:"entries" doc:"Several sources." rule:"names unique"`
	Brokers []string          `yaml:"brokers" env:"BROKERS" doc:"Brokers." rule:"at least one"`
	Labels  map[string]string `yaml:"labels" env:"LABELS" doc:"Labels." rule:"-"`
	Long    time.Duration     `yaml:"long" env:"LONG" doc:"Long." rule:"-"`
	Count   uint32            `yaml:"count" env:"COUNT" doc:"Count." rule:"-"`
}

func TestWalk(t *testing.T) {
	def := fakeConfig{Brokers: []string{"a:1", "b:2"}, Labels: map[string]string{"z": "1", "a": "2"}, Long: 90 * time.Minute, Count: 7}
	def.Source.Addr, def.Source.Wait = "db:3306", 3*time.Millisecond
	def.Redis.TLS.Enabled = true
	secs, err := Walk(reflect.TypeFor[fakeConfig](), def, "APP_")
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]Key{}
	sections := map[string]Section{}
	var order []string
	for _, s := range secs {
		order = append(order, s.Path)
		sections[s.Path] = s
		for _, k := range s.Keys {
			byPath[k.Path] = k
		}
	}
	if got, want := strings.Join(order, " "), " source source.mapping source.tables[] kafka kafka.tls redis redis.tls entries[]"; got != want {
		t.Errorf("sections %q, want %q", got, want)
	}
	for _, c := range []struct {
		path string
		want Key
	}{
		{"source.addr", Key{Type: "string", Default: "db:3306", Env: "APP_SOURCE_ADDR", Rule: "host:port", Doc: "host:port."}},
		{"source.password", Key{Type: "string", Env: "APP_SOURCE_PASSWORD", File: "source.password-file", Rule: "-", Doc: "The password."}},
		{"source.password-file", Key{Type: "string", Env: "APP_SOURCE_PASSWORD_FILE", Rule: "not with password", Doc: "The password's file."}},
		{"source.schema", Key{Type: "string", Rule: "-", Doc: "Not a secret."}}, // a -file sibling alone makes no secret
		{"source.wait", Key{Type: "duration", Default: "3ms", Env: "APP_SOURCE_WAIT", Rule: "> 0", Doc: "How long."}},
		{"source.mapping.preset", Key{Type: "string", Rule: "im or generic", Doc: "The preset."}},      // no env tag
		{"source.tables", Key{Type: "list of entries", Rule: "-", Doc: "Several tables."}},             // a list: a subsection
		{"source.tables[].table", Key{Type: "string", Rule: "required", Doc: "A table."}},              // no variable in a list
		{"source.tables[].mapping", Key{Type: "section", Same: "source.mapping", Doc: "Its mapping."}}, // documented once
		{"kafka.tls.ca-file", Key{Type: "string", Env: "APP_KAFKA_TLS_CA_FILE", Rule: "a readable PEM file", Doc: "The CA file."}},
		{"redis.tls.enabled", Key{Type: "boolean", Default: "true", Env: "APP_REDIS_TLS_ENABLED", Rule: "-", Doc: "Turn TLS on."}}, // expanded again: its own variables
		{"entries[].source", Key{Type: "section", Same: "source", Doc: "Its source."}},
		{"brokers", Key{Type: "list of strings", Default: "[a:1, b:2]", Env: "APP_BROKERS", Rule: "at least one", Doc: "Brokers."}},
		{"labels", Key{Type: "map of strings", Default: "{a: 2, z: 1}", Env: "APP_LABELS", Rule: "-", Doc: "Labels."}},
		{"long", Key{Type: "duration", Default: "1h30m", Env: "APP_LONG", Rule: "-", Doc: "Long."}},
		{"count", Key{Type: "integer ≥ 0", Default: "7", Env: "APP_COUNT", Rule: "-", Doc: "Count."}},
	} {
		c.want.Path = c.path
		if got := byPath[c.path]; got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.path, got, c.want)
		}
	}
	if got := sections["source"].Also; !reflect.DeepEqual(got, []string{"entries[].source"}) {
		t.Errorf("source is also at %v", got)
	}
	if got := sections["source.mapping"].Also; !reflect.DeepEqual(got, []string{"source.tables[].mapping"}) {
		t.Errorf("source.mapping is also at %v", got)
	}
	for _, p := range []string{"source.internal", "source.FromCode", "source.from-code"} {
		if _, ok := byPath[p]; ok {
			t.Errorf("%s listed", p)
		}
	}
}

// A key without its doc or rule tag is an error naming the key, the Go
// field and the tag to add.
func TestWalkMissingTags(t *testing.T) {
	type section struct {
		A string `yaml:"a" doc:"A."`
		B string `yaml:"b" rule:"-"`
		C string `yaml:"c" secret:"c-file" doc:"C." rule:"-"`
	}
	type cfg struct {
		S section `yaml:"s"`
	}
	_, err := Walk(reflect.TypeFor[cfg](), cfg{}, "")
	for _, want := range []string{
		"s (confref.cfg.S): no doc tag",
		"s.a (confref.section.A): no rule tag: add rule:",
		"s.b (confref.section.B): no doc tag: add doc:",
		"s.c: its secret tag names s.c-file, not a key of confref.section",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want %q", err, want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	type inner struct {
		Password     string `yaml:"password" env:"PASSWORD" secret:"password-file" doc:"A | password." rule:"-"`
		PasswordFile string `yaml:"password-file" env:"PASSWORD_FILE" doc:"Its file." rule:"not with password"`
	}
	type cfg struct {
		Timeout time.Duration `yaml:"timeout" env:"TIMEOUT" doc:"Bound." rule:"> 0"`
		Src     inner         `yaml:"src" envPrefix:"SRC_" doc:"The source."`
		List    []struct {
			Src inner `yaml:"src" doc:"Its source."`
		} `yaml:"list" doc:"Entries." rule:"-"`
	}
	secs, err := Walk(reflect.TypeFor[cfg](), cfg{Timeout: time.Second}, "X_")
	if err != nil {
		t.Fatal(err)
	}
	got := Markdown(Page{Title: "Reference", Generated: "Generated.", Intro: "Read me.", TopLevel: "Top level"}, secs)
	want := `# Reference

Generated.

Read me.

Sections: [Top level](#top-level) · [src](#src) · [list[]](#list)

## Top level

| Key | Type | Default | Environment variable | Rule | Description |
|---|---|---|---|---|---|
| ` + "`timeout` | duration | `1s` | `X_TIMEOUT` | > 0 | Bound. |" + `
| ` + "`list` | list of entries | — | — | — | Entries. |" + `

## src

The source.

The same keys apply at ` + "`list[].src`" + `.

| Key | Type | Default | Environment variable | Rule | Description |
|---|---|---|---|---|---|
| ` + "`src.password` | string | — | `X_SRC_PASSWORD` | — | A \\| password. Secret: never logged; or read it from a file with `src.password-file`. |" + `
| ` + "`src.password-file` | string | — | `X_SRC_PASSWORD_FILE` | not with password | Its file. |" + `

## list[]

One entry of list.

| Key | Type | Default | Environment variable | Rule | Description |
|---|---|---|---|---|---|
| ` + "`list[].src` | section | — | — | — | Its source. Its keys are those of [src](#src). |" + `
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// A subsection whose parent has no keys of its own (metrics.otlp, with
// metrics-addr a top-level key) is a section of its own: a level-2
// heading in the index, not a level-3 one under the section before it.
func TestMarkdownOrphanSubsection(t *testing.T) {
	k := func(path string) []Key { return []Key{{Path: path, Type: "string"}} }
	got := Markdown(Page{Title: "R", TopLevel: "Top level"}, []Section{
		{Path: "", Keys: k("a")}, {Path: "list[]", Keys: k("list[].x")}, {Path: "metrics.otlp", Keys: k("metrics.otlp.endpoint")},
		{Path: "metrics.otlp.tls", Keys: k("metrics.otlp.tls.ca")}})
	for _, want := range []string{"[metrics.otlp](#metricsotlp)\n", "\n## metrics.otlp\n", "\n### metrics.otlp.tls\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
}
