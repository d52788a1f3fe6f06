package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"gopkg.in/yaml.v3"
)

// SourceConfig is one entry of the sources list (several sources in one
// process, each its own pipeline with its own lease, see docs/ha.md): a
// MySQL server and outbox table, where its events go, and its checkpoint.
// Every section the entry does not give, and every key of a section it
// does not give, is the top-level section's, so shared settings (brokers,
// Redis, credentials) are written once at the top:
//
//	source: {user: cdc, password: ..., server-id: 7000}
//	kafka: {brokers: [k1:9092]}
//	checkpoint: {addr: redis:6379}
//	sources:
//	  - name: shard1
//	    source: {addr: db1:3306, table: im_event_outbox}
//	    router: {topic: im.events}
//	    checkpoint: {key: cdc-outbox:checkpoint:shard1}
//	  - name: shard2
//	    source: {addr: db2:3306, table: im_event_outbox}
//	    router: {topic: im.events}
//	    checkpoint: {key: cdc-outbox:checkpoint:shard2}
//
// CDC_OUTBOX_* variables set the top-level sections, so they apply to
// every entry that does not set the key itself. Without a sources list
// the top-level sections are the one source (the single-source
// configuration), named "default".
type SourceConfig struct {
	// Name labels the source in logs and metrics: letters, digits, '_'
	// and '-', unique.
	Name       string            `yaml:"name" doc:"The source's name in logs, metrics and --source." rule:"required, unique; letters, digits, _ and -, at most 64"`
	Source     binlog.Config     `yaml:"source" doc:"This source's database and table(s); keys not given: the top-level source section's."`
	Router     router.Config     `yaml:"router" doc:"This source's routing; keys not given: the top-level router section's."`
	Kafka      sink.Config       `yaml:"kafka" doc:"This source's producer; keys not given: the top-level kafka section's."`
	Checkpoint checkpoint.Config `yaml:"checkpoint" doc:"This source's checkpoint (a key of its own); keys not given: the top-level checkpoint section's."`

	node *yaml.Node // the entry as written, resolved over the top level by Load
}

// UnmarshalYAML keeps the entry's node: its sections are decoded over the
// top-level ones once the whole file (and the environment) is read.
func (s *SourceConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: sources: each entry is a mapping (name, source, router, kafka, checkpoint)", n.Line)
	}
	s.node = n
	return nil
}

// sourceEntry is SourceConfig without its UnmarshalYAML, to decode an
// entry's sections.
type sourceEntry SourceConfig

// renderedLines maps the line numbers of data, node n rendered alone
// (yaml.Marshal), to n's lines in the file, by walking both trees.
func renderedLines(n *yaml.Node, data []byte) map[int]int {
	out := map[int]int{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) != 1 {
		return out
	}
	var walk func(r, o *yaml.Node)
	walk = func(r, o *yaml.Node) {
		if _, seen := out[r.Line]; !seen {
			out[r.Line] = o.Line
		}
		for i := 0; i < len(r.Content) && i < len(o.Content); i++ {
			walk(r.Content[i], o.Content[i])
		}
	}
	walk(doc.Content[0], n)
	return out
}

// resolveSources decodes each entry over a copy of the top-level
// sections (unknown keys are errors, named with the entry's index).
func (c *Config) resolveSources() error {
	var errs []error
	for i := range c.Sources {
		n := c.Sources[i].node
		if n == nil {
			continue
		}
		e := SourceConfig{Source: c.Source, Router: c.Router, Kafka: c.Kafka, Checkpoint: c.Checkpoint}
		b, err := yaml.Marshal(n)
		if err == nil {
			dec := yaml.NewDecoder(bytes.NewReader(b))
			dec.KnownFields(true)
			p := sourceEntry(e)
			err = dec.Decode(&p)
			e = SourceConfig(p)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sources[%d] (line %d): %w", i, n.Line,
				explainYAML(err, b, yamlDoc{t: reflect.TypeFor[sourceEntry](), path: fmt.Sprintf("sources[%d].", i), label: fmt.Sprintf("sources[%d]", i), lines: renderedLines(n, b)})))
			continue
		}
		if len(e.Source.Tables) > 0 && hasKey(n, "source", "table") {
			c.tableBeside = append(c.tableBeside, fmt.Sprintf("sources[%d].source", i))
		}
		e.node = nil
		c.Sources[i] = e
	}
	return errors.Join(errs...)
}

// Named is one source's whole configuration.
type Named struct {
	Name   string
	Config Config // Sources nil: the source's own sections at the top
}

// Pipelines returns each source's configuration: the sources list's
// entries, or the top-level sections as the one source "default".
func (c Config) Pipelines() []Named {
	if len(c.Sources) == 0 {
		one := c
		return []Named{{Name: "default", Config: one}}
	}
	out := make([]Named, len(c.Sources))
	for i, s := range c.Sources {
		one := c
		one.Sources, one.tableBeside = nil, nil
		one.Source, one.Router, one.Kafka, one.Checkpoint = s.Source, s.Router, s.Kafka, s.Checkpoint
		out[i] = Named{Name: s.Name, Config: one}
	}
	return out
}

// Select returns the configuration of the source named name (for the
// commands that act on one source: checkpoint, replay, prune, verify,
// dead-letter, and check or status given --source). "" selects the only
// source; with several it fails with a *SourceError naming them.
func (c Config) Select(name string) (Config, error) {
	ps, err := c.Selected(name)
	if err != nil {
		return Config{}, err
	}
	if len(ps) > 1 {
		return Config{}, &SourceError{Names: names(c.Pipelines()), Need: true}
	}
	return ps[0].Config, nil
}

// Selected returns the sources a command covering every source (check,
// status) acts on: all of them for "", else the one named name (a
// *SourceError when there is none).
func (c Config) Selected(name string) ([]Named, error) {
	ps := c.Pipelines()
	if name == "" {
		return ps, nil
	}
	for _, p := range ps {
		if p.Name == name {
			return []Named{p}, nil
		}
	}
	return nil, &SourceError{Name: name, Names: names(ps)}
}

// LoadSource is LoadFor(path, s) followed by Select(name), the selected
// source validated for s too (ScopeCheckpoint validates only the
// top-level checkpoint section otherwise).
func LoadSource(path string, s Scope, name string) (Config, error) {
	cfg, err := LoadFor(path, s)
	if err != nil {
		return cfg, err
	}
	one, err := cfg.Select(name)
	if err != nil {
		return one, err
	}
	return one, one.Check(s)
}

func names(ps []Named) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// SourceError is a --source that names no source of the configuration,
// or its absence where one of several sources must be chosen.
type SourceError struct {
	Name  string   // the name given ("" when none was)
	Names []string // the configuration's sources
	Need  bool     // the command acts on one source and none was named
	// Flags, when set, are the options that need the source named (run's
	// start options).
	Flags []string
}

func (e *SourceError) Error() string {
	list := strings.Join(e.Names, ", ")
	switch {
	case e.Name != "":
		return fmt.Sprintf("--source %q: no such source; the configuration has %s", e.Name, list)
	case len(e.Flags) > 0:
		return fmt.Sprintf("%s: the configuration has %d sources (%s) and these options apply to one: add --source NAME (or set them per source in the configuration: sources[i].source.start, sources[i].source.backfill, sources[i].checkpoint.recover)",
			strings.Join(e.Flags, ", "), len(e.Names), list)
	default:
		return fmt.Sprintf("the configuration has %d sources (%s) and this command acts on one: add --source NAME", len(e.Names), list)
	}
}

// RunFlags are run's one-off start options. Like a connector's offsets
// and snapshot mode in Kafka Connect, they belong to one source: with a
// sources list they need Source (--source), and apply to it alone; the
// other sources start as their configuration says.
type RunFlags struct {
	// Source: --source, the source the options apply to ("": the only one).
	Source string
	// Start: --start when given (StartSet).
	Start    string
	StartSet bool
	// Recover: --recover-checkpoint; Backfill: --backfill;
	// AcceptPartitionChange: --accept-partition-change.
	Recover, Backfill, AcceptPartitionChange bool
}

// Any reports whether a start option is given.
func (f RunFlags) Any() bool {
	return f.StartSet || f.Recover || f.Backfill || f.AcceptPartitionChange
}

func (f RunFlags) given() []string {
	var out []string
	for _, o := range []struct {
		set  bool
		name string
	}{{f.StartSet, "--start"}, {f.Recover, "--recover-checkpoint"}, {f.Backfill, "--backfill"}, {f.AcceptPartitionChange, "--accept-partition-change"}} {
		if o.set {
			out = append(out, o.name)
		}
	}
	return out
}

// ApplyRun applies f to the source it names (source.start,
// checkpoint.recover, source.backfill of that source) and returns the
// source's name ("" for a configuration without a sources list, where
// they apply to the one source). It fails with a *SourceError when the
// options need a source named (several sources, none named), when the
// name is unknown, or when --source is given without a start option (run
// publishes every source; --source only says which one the options are for).
func (c *Config) ApplyRun(f RunFlags) (string, error) {
	ps := c.Pipelines()
	if f.Source != "" && !f.Any() {
		return "", fmt.Errorf("run --source %q: run publishes every source of the configuration; --source names the source --start, --recover-checkpoint, --backfill or --accept-partition-change apply to: give one of them, or drop --source", f.Source)
	}
	if !f.Any() {
		return "", nil
	}
	set := func(src *binlog.Config, cp *checkpoint.Config) {
		if f.StartSet {
			src.Start = f.Start
		}
		if f.Recover {
			cp.Recover = true
		}
		if f.Backfill {
			src.Backfill = true
		}
	}
	if len(c.Sources) == 0 {
		if f.Source != "" && f.Source != ps[0].Name {
			return "", &SourceError{Name: f.Source, Names: names(ps)}
		}
		set(&c.Source, &c.Checkpoint)
		return "", nil
	}
	if f.Source == "" {
		return "", &SourceError{Names: names(ps), Need: true, Flags: f.given()}
	}
	for i := range c.Sources {
		if c.Sources[i].Name == f.Source {
			set(&c.Sources[i].Source, &c.Sources[i].Checkpoint)
			return f.Source, nil
		}
	}
	return "", &SourceError{Name: f.Source, Names: names(ps)}
}

var sourceName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validateSources validates every entry, each error named by its index
// (sources[2].source.table: required), and what the entries must not
// share: names, checkpoint keys, and replica server_id ranges
// (source.server-id .. + ha.server-ids − 1) on the same server.
func (c *Config) validateSources() error {
	var errs []error
	names, keys := map[string]int{}, map[string]int{}
	type span struct {
		i        int
		from, to uint64
	}
	ids := map[string][]span{}
	n := uint64(1)
	if c.HA.Enabled {
		n = uint64(max(c.HA.ServerIDs, 1))
	}
	for i, s := range c.Sources {
		at := func(err error) {
			for _, e := range mapping.Problems(err) {
				errs = append(errs, fmt.Errorf("sources[%d].%w", i, e))
			}
		}
		if !sourceName.MatchString(s.Name) {
			errs = append(errs, fmt.Errorf("sources[%d].name: %q: required, letters, digits, '_' and '-' (it labels logs and metrics)", i, s.Name))
		} else if j, dup := names[s.Name]; dup {
			errs = append(errs, fmt.Errorf("sources[%d].name: %q: also the name of sources[%d]", i, s.Name, j))
		}
		names[s.Name] = i
		if j, dup := keys[s.Checkpoint.Key]; dup && s.Checkpoint.Key != "" {
			errs = append(errs, fmt.Errorf("sources[%d].checkpoint.key: %q: also the key of sources[%d]: every source needs its own", i, s.Checkpoint.Key, j))
		}
		keys[s.Checkpoint.Key] = i
		for _, err := range []error{s.Source.Validate(), s.Router.Validate(), s.Kafka.Validate(), s.Checkpoint.Validate()} {
			if err != nil {
				at(err)
			}
		}
		for _, err := range topicErrors(s.Source, s.Router, s.Kafka, s.Checkpoint) {
			errs = append(errs, fmt.Errorf("sources[%d].%w", i, err))
		}
		me := span{i, uint64(s.Source.ServerID), uint64(s.Source.ServerID) + n - 1}
		for _, o := range ids[s.Source.Addr] {
			if me.from <= o.to && o.from <= me.to {
				errs = append(errs, fmt.Errorf("sources[%d].source.server-id: %d (with ha.server-ids %d: %d–%d) overlaps sources[%d]'s %d–%d on the same server %s: give each source its own range",
					i, s.Source.ServerID, n, me.from, me.to, o.i, o.from, o.to, s.Source.Addr))
			}
		}
		ids[s.Source.Addr] = append(ids[s.Source.Addr], me)
	}
	return errors.Join(errs...)
}

// Backfills reports whether the one source of a single-source
// configuration is set to backfill (source.backfill): run then draws the
// backfill's progress bar. With several sources the log says it.
func (c Config) Backfills() bool {
	ps := c.Pipelines()
	return len(ps) == 1 && ps[0].Config.Source.Backfill
}
