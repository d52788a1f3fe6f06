package mapping_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/mapping"
	"gopkg.in/yaml.v3"
)

// sqlColumns reads the columns of a CREATE TABLE: name, type, nullability.
func sqlColumns(t *testing.T, ddl string) []mapping.Column {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s+([a-z_]+)\s+([A-Za-z]+)[^,\n]*`)
	var cols []mapping.Column
	for _, m := range re.FindAllStringSubmatch(ddl, -1) {
		if up := strings.ToUpper(m[1]); up == "INDEX" || up == "PRIMARY" || up == "KEY" {
			continue
		}
		cols = append(cols, mapping.Column{Name: m[1], DataType: strings.ToLower(m[2]),
			Nullable: !strings.Contains(strings.ToUpper(m[0]), "NOT NULL") && !strings.Contains(strings.ToUpper(m[0]), "PRIMARY KEY")})
	}
	if len(cols) == 0 {
		t.Fatalf("no columns in %s", ddl)
	}
	return cols
}

// Every YAML example of docs/mapping.md validates and compiles against its
// table: the im examples against schema/mariadb.sql's im_event_outbox, the
// others against the CREATE TABLE shown before them.
func TestDocsMappingExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/mapping.md")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile("../schema/mariadb.sql")
	if err != nil {
		t.Fatal(err)
	}
	im := sqlColumns(t, string(schema[strings.Index(string(schema), "CREATE TABLE IF NOT EXISTS im_event_outbox"):]))
	blocks := regexp.MustCompile("(?s)```(yaml|sql)\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	n := 0
	cols := im
	for _, b := range blocks {
		if b[1] == "sql" {
			cols = sqlColumns(t, b[2])
			continue
		}
		var cfg struct {
			Source struct {
				Mapping mapping.Config
				Tables  []struct {
					Table, Pattern string
					Mapping        mapping.Config
				}
			}
		}
		if err := yaml.Unmarshal([]byte(b[2]), &cfg); err != nil {
			t.Fatalf("example %d: %v\n%s", n, err, b[2])
		}
		ms := []mapping.Config{cfg.Source.Mapping}
		for _, e := range cfg.Source.Tables {
			ms = append(ms, e.Mapping)
		}
		for _, m := range ms {
			if err := m.Validate("source.mapping"); err != nil {
				t.Fatalf("example %d: %v\n%s", n, err, b[2])
			}
			if _, err := mapping.Compile(m, "im.events", "s.outbox", cols); err != nil {
				t.Fatalf("example %d: %v\n%s", n, err, b[2])
			}
		}
		n++
	}
	if n != 5 {
		t.Fatalf("%d YAML examples, want 5 (im, sharded im, debezium, debezium's options, generic)", n)
	}
}
