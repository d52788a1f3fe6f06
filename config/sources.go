package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
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
	Name       string            `yaml:"name"`
	Source     binlog.Config     `yaml:"source"`
	Router     router.Config     `yaml:"router"`
	Kafka      sink.Config       `yaml:"kafka"`
	Checkpoint checkpoint.Config `yaml:"checkpoint"`

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
			type plain SourceConfig // without UnmarshalYAML
			dec := yaml.NewDecoder(bytes.NewReader(b))
			dec.KnownFields(true)
			p := plain(e)
			err = dec.Decode(&p)
			e = SourceConfig(p)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sources[%d] (line %d): %w", i, n.Line, explainYAML(err, b)))
			continue
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
		one.Sources = nil
		one.Source, one.Router, one.Kafka, one.Checkpoint = s.Source, s.Router, s.Kafka, s.Checkpoint
		out[i] = Named{Name: s.Name, Config: one}
	}
	return out
}

// Select returns the configuration of the source named name (for the
// commands that act on one source: check, status, checkpoint, replay);
// "" selects the only one, or fails naming the sources.
func (c Config) Select(name string) (Config, error) {
	ps := c.Pipelines()
	if name == "" && len(ps) == 1 {
		return ps[0].Config, nil
	}
	var names []string
	for _, p := range ps {
		if p.Name == name {
			return p.Config, nil
		}
		names = append(names, p.Name)
	}
	if name == "" {
		return Config{}, fmt.Errorf("the configuration has %d sources (%v): name one", len(ps), names)
	}
	return Config{}, fmt.Errorf("no source named %q; the configuration has %v", name, names)
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
			for _, e := range flatten(err) {
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
		if s.Kafka.DeadLetterTopic != "" && s.Kafka.DeadLetterTopic == s.Router.Topic {
			errs = append(errs, fmt.Errorf("sources[%d].kafka.dead-letter-topic: %q: must differ from router.topic", i, s.Kafka.DeadLetterTopic))
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
