// Package confref generates the configuration reference (docs/configuration.md)
// from the configuration structs themselves, so that it cannot drift from
// them: Walk reads, by reflection, every key of a struct tree (its yaml tags),
// its type, its default (from a value of the defaults), its environment
// variable (the env and envPrefix tags, as github.com/caarlos0/env reads
// them), for a secret the key of its file variant (the tag
// secret:"password-file", a sibling key), and two tags
// every key carries: doc, one sentence for the user, and rule, what the
// package's Validate enforces ("-" for nothing beyond the type). Markdown
// renders the result as tables, one per section.
//
// A struct type reached again where it has no environment variables (an
// entry of a list of sections, a mapping per table) is not expanded twice:
// its key says where its keys are documented, and that section lists the
// other paths it applies at.
package confref
