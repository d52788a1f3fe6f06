package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/internal/confref"
)

// RegenerateReference is the command that rewrites docs/configuration.md
// from the configuration structs (the Makefile's docs target runs
// "cdc-outbox config reference -o docs/configuration.md").
const RegenerateReference = "make docs"

// ReferenceSections returns every key of the configuration file by
// section, from Config's fields: their yaml, env and envPrefix tags, the
// defaults of Default, and their doc and rule tags (package confref). A
// field without its doc or rule tag is an error naming it.
func ReferenceSections() ([]confref.Section, error) {
	return confref.Walk(reflect.TypeFor[Config](), Default(), EnvPrefix)
}

// Reference returns the configuration reference, docs/configuration.md.
func Reference() (string, error) {
	secs, err := ReferenceSections()
	if err != nil {
		return "", fmt.Errorf("the configuration reference: %w", err)
	}
	// The sections an entry of sources may give again.
	var perSource []string
	for _, s := range secs {
		for _, a := range s.Also {
			if strings.HasPrefix(a, "sources[].") {
				perSource = append(perSource, "`"+s.Path+"`")
			}
		}
	}
	return confref.Markdown(confref.Page{
		Title:     "Configuration reference",
		Generated: "Generated from the configuration structs by `cdc-outbox config reference`; do not edit: change the doc and rule tags of the structs' fields, then run `" + RegenerateReference + "`.",
		TopLevel:  "Top level",
		Intro: `Every key of the configuration file, by section. Where a value comes from, in order: the defaults below, the YAML file
given with ` + "`--config`" + ` (an unknown key is an error naming the keys its section has), then the ` + "`" + EnvPrefix + "*`" + ` environment
variables (an unknown or empty variable is an error naming the closest one; the start log's ` + "`from_environment`" + ` and
` + "`check`" + `'s INFO lines name each key a variable set, and whether it replaced the file's value). In a variable a list is comma-separated
(` + "`CDC_OUTBOX_KAFKA_BROKERS=k1:9092,k2:9092`" + `), a map is ` + "`key:value`" + ` pairs, comma-separated, a duration has a unit
(` + "`500ms`, `30s`, `2m`" + `), a boolean is ` + "`true` or `false`" + `.

Each secret (a password, a token, a client secret) has a ` + "`-file`" + ` variant naming a file that holds it, read at each
connection (a mounted Kubernetes Secret): give one or the other. A variable of either form replaces the file's value of
both, so that ` + "`CDC_OUTBOX_SOURCE_PASSWORD_FILE`" + ` overrides a ` + "`source.password`" + ` written in the file.

Per source: ` + strings.Join(perSource, ", ") + ` may be given again in each entry of ` + "`sources:`" + `, where every key the
entry does not give is the top-level section's; the variables set the top-level sections, so they apply to every entry
that does not set the key itself. Keys in a list (` + "`sources[]`, `source.tables[]`" + `) have no variable.

The Rule column is what the configuration's validation refuses: ` + "`run`" + ` and every other command report all the problems at
once, each naming its key (and the variable, when one set it); ` + "`check`" + ` also checks the keys against the servers.
` + "`config.example.yaml`" + ` is an annotated example.`,
	}, secs), nil
}
