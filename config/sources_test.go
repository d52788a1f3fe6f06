package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

const sourcesYAML = `
source:
  addr: db:3306
  user: cdc
  password: pw
  server-id: 7000
  schema: im
  table: im_event_outbox
  start: latest
router:
  topic: im.events
kafka:
  brokers: [k1:9092]
checkpoint:
  addr: redis:6379
ha:
  lease-ttl: 4s
sources:
  - name: shard1
    checkpoint: {key: "cp:shard1"}
  - name: shard2
    source: {addr: db2:3306, table: other}
    router: {topic: im.shard2}
    kafka: {batch-size: 77}
    checkpoint: {key: "cp:shard2", interval: 3s}
`

// Entries inherit every key they do not set from the top level; the one
// source of a configuration without a list is "default".
func TestSourcesInherit(t *testing.T) {
	clearEnv(t)
	t.Setenv("CDC_OUTBOX_SOURCE_PASSWORD", "from-env")
	cfg, err := LoadFor(writeConfig(t, sourcesYAML), ScopeRun)
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.Pipelines()
	if len(ps) != 2 || ps[0].Name != "shard1" || ps[1].Name != "shard2" {
		t.Fatalf("pipelines %+v", ps)
	}
	a, b := ps[0].Config, ps[1].Config
	if a.Source.Addr != "db:3306" || a.Source.Table != "im_event_outbox" || a.Router.Topic != "im.events" || a.Checkpoint.Key != "cp:shard1" ||
		a.Checkpoint.Addr != "redis:6379" || a.Source.Password != "from-env" || a.HA.TTL != 4*time.Second || a.Sources != nil {
		t.Fatalf("shard1 %+v", a)
	}
	if b.Source.Addr != "db2:3306" || b.Source.Table != "other" || b.Source.User != "cdc" || b.Source.ServerID != 7000 || b.Router.Topic != "im.shard2" ||
		b.Kafka.BatchSize != 77 || b.Kafka.Brokers[0] != "k1:9092" || b.Checkpoint.Interval != 3*time.Second || b.Source.Password != "from-env" {
		t.Fatalf("shard2 %+v", b)
	}
	if one, err := cfg.Select("shard2"); err != nil || one.Source.Addr != "db2:3306" {
		t.Fatalf("Select = %v", err)
	}
	if _, err := cfg.Select(""); err == nil || !strings.Contains(err.Error(), "shard1") {
		t.Fatalf("Select(\"\") of two = %v", err)
	}
	single, err := LoadFor(writeConfig(t, strings.Replace(strings.Split(sourcesYAML, "sources:")[0], "addr: redis:6379", "addr: redis:6379\n  key: k", 1)), ScopeRun)
	if err != nil {
		t.Fatal(err)
	}
	if ps := single.Pipelines(); len(ps) != 1 || ps[0].Name != "default" || ps[0].Config.Checkpoint.Key != "k" {
		t.Fatalf("single %+v", ps)
	}
}

// Each entry's problems are named by its index; shared keys, names and
// server_id ranges on one server are refused.
func TestSourcesValidate(t *testing.T) {
	clearEnv(t)
	bad := strings.Split(sourcesYAML, "sources:")[0] + `sources:
  - name: a
    checkpoint: {key: k}
  - name: a
    source: {table: ""}
    checkpoint: {key: k}
  - name: "b c"
    source: {server-id: 7010, addr: db:3306}
    checkpoint: {key: k3}
  - name: d
    source: {server-id: 7020}
    kafka: {brokers: []}
    checkpoint: {key: k4}
  - name: e
    source: {server-id: 7040}
    router: {topic: __consumer_offsets}
    checkpoint: {key: k5, mirror-topic: cp}
    kafka: {dead-letter-topic: cp}
`
	_, err := LoadFor(writeConfig(t, bad), ScopeRun)
	for _, want := range []string{
		`sources[1].name: "a": also the name of sources[0]`,
		`sources[1].checkpoint.key: "k": also the key of sources[0]`,
		"sources[1].source.table: required",
		`sources[2].name: "b c"`,
		"sources[2].source.server-id: 7010 (with ha.server-ids 16: 7010–7025) overlaps sources[0]'s 7000–7015",
		"sources[3].kafka.brokers",
		`sources[4].router.topic: "__consumer_offsets": a Kafka-internal topic name`,
		`sources[4].kafka.dead-letter-topic: "cp": is also checkpoint.mirror-topic`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to contain %q", err, want)
		}
	}
	_, err = Load(writeConfig(t, strings.Split(sourcesYAML, "sources:")[0]+"sources:\n  - name: x\n    sourcee: {}\n"))
	// Named in the file's terms: the key path, the entry's keys and the
	// file's line (not the Go type, not the line of the entry re-rendered).
	if err == nil || !strings.Contains(err.Error(), "sources[0] (line 19): line 20: sources[0].sourcee: unknown key; did you mean source?; sources[0] has: name, source, router, kafka, checkpoint") ||
		strings.Contains(err.Error(), "type config.") {
		t.Errorf("unknown key in an entry: %v", err)
	}
}

// The commands' choice of source: Select for one, Selected for every
// source or one, ApplyRun for run's start options; each refusal names the
// sources and the fix.
func TestSelectSources(t *testing.T) {
	clearEnv(t)
	path := writeConfig(t, sourcesYAML)
	cfg, err := LoadFor(path, ScopeRun)
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := cfg.Selected(""); err != nil || len(ps) != 2 {
		t.Fatalf("Selected(\"\") = %v %v", ps, err)
	}
	if ps, err := cfg.Selected("shard2"); err != nil || len(ps) != 1 || ps[0].Config.Source.Addr != "db2:3306" {
		t.Fatalf("Selected(shard2) = %v %v", ps, err)
	}
	var se *SourceError
	if _, err := cfg.Selected("shard3"); !errors.As(err, &se) || !strings.Contains(err.Error(), `--source "shard3": no such source; the configuration has shard1, shard2`) {
		t.Fatalf("Selected(shard3) = %v", err)
	}
	if _, err := cfg.Select(""); !errors.As(err, &se) || !se.Need || !strings.Contains(err.Error(), "2 sources (shard1, shard2)") || !strings.Contains(err.Error(), "--source NAME") {
		t.Fatalf("Select(\"\") = %v", err)
	}
	one, err := LoadSource(path, ScopeCheckpoint, "shard2")
	if err != nil || one.Checkpoint.Key != "cp:shard2" || one.Checkpoint.Interval != 3*time.Second || one.Sources != nil {
		t.Fatalf("LoadSource(shard2) = %+v %v", one.Checkpoint, err)
	}
	if _, err := LoadSource(path, ScopeOps, ""); err == nil {
		t.Fatal("LoadSource of two sources without a name succeeded")
	}
	single := writeConfig(t, strings.Split(sourcesYAML, "sources:")[0])
	if one, err := LoadSource(single, ScopeOps, ""); err != nil || one.Source.Addr != "db:3306" {
		t.Fatalf("LoadSource of a single source = %v", err)
	}
	if _, err := LoadSource(single, ScopeOps, "default"); err != nil {
		t.Fatalf("--source default of a single source: %v", err)
	}

	for _, c := range []struct {
		name  string
		flags RunFlags
		want  string // error; "" none
		to    string // the source the options went to
	}{
		{"no options", RunFlags{}, "", ""},
		{"start without --source", RunFlags{Start: "earliest", StartSet: true, Recover: false}, "--start: the configuration has 2 sources (shard1, shard2) and these options apply to one: add --source NAME", ""},
		{"recover and backfill without --source", RunFlags{Recover: true, Backfill: true}, "--recover-checkpoint, --backfill: the configuration has 2 sources", ""},
		{"--source alone", RunFlags{Source: "shard1"}, "run publishes every source", ""},
		{"unknown source", RunFlags{Source: "x", StartSet: true, Start: "latest"}, `--source "x": no such source`, ""},
		{"start of shard2", RunFlags{Source: "shard2", StartSet: true, Start: "earliest", Recover: true}, "", "shard2"},
		{"backfill of shard1", RunFlags{Source: "shard1", Backfill: true}, "", "shard1"},
	} {
		c2 := cfg
		c2.Sources = append([]SourceConfig(nil), cfg.Sources...)
		to, err := c2.ApplyRun(c.flags)
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: ApplyRun = %v, want %q", c.name, err, c.want)
			}
			continue
		}
		if err != nil || to != c.to {
			t.Errorf("%s: ApplyRun = %q %v, want %q", c.name, to, err, c.to)
			continue
		}
		for _, p := range c2.Pipelines() {
			mine := p.Name == c.to
			if got := p.Config.Source.Start; (got == c.flags.Start && c.flags.StartSet) != (mine && c.flags.StartSet) || (!mine && got != "latest") {
				t.Errorf("%s: source %s start %q", c.name, p.Name, got)
			}
			if p.Config.Checkpoint.Recover != (mine && c.flags.Recover) || p.Config.Source.Backfill != (mine && c.flags.Backfill) {
				t.Errorf("%s: source %s recover %v backfill %v", c.name, p.Name, p.Config.Checkpoint.Recover, p.Config.Source.Backfill)
			}
		}
	}
	// Without a sources list the options apply to the one source.
	s, _ := LoadFor(single, ScopeRun)
	if to, err := s.ApplyRun(RunFlags{StartSet: true, Start: "earliest", Backfill: true}); err != nil || to != "" || s.Source.Start != "earliest" || !s.Source.Backfill || !s.Backfills() {
		t.Fatalf("single ApplyRun = %q %v %+v", to, err, s.Source)
	}
	if _, err := s.ApplyRun(RunFlags{Source: "shard1", Recover: true}); err == nil {
		t.Fatal("single ApplyRun with another source's name succeeded")
	}
}

// 64 sources on one server, each with its own range of ha.server-ids 16
// ids (docs/ha.md, "Many sources"), load; one id more in a range overlaps.
func TestSourcesManyServerIDRanges(t *testing.T) {
	clearEnv(t)
	entries := func(step int) string {
		var b strings.Builder
		for i := range 64 {
			fmt.Fprintf(&b, "  - name: shard%d\n    source: {server-id: %d, table: ob_%d}\n    checkpoint: {key: \"cp:shard%d\"}\n", i, 100000+i*step, i, i)
		}
		return b.String()
	}
	head := strings.Split(sourcesYAML, "sources:")[0] + "sources:\n"
	cfg, err := LoadFor(writeConfig(t, head+entries(16)), ScopeRun)
	if err != nil || len(cfg.Pipelines()) != 64 {
		t.Fatalf("64 sources with 16 ids each: %v", err)
	}
	_, err = LoadFor(writeConfig(t, strings.Replace(head, "lease-ttl: 4s", "lease-ttl: 4s\n  server-ids: 17", 1)+entries(16)), ScopeRun)
	if err == nil || !strings.Contains(err.Error(), "sources[63].source.server-id: 101008 (with ha.server-ids 17: 101008–101024) overlaps sources[62]'s 100992–101008") {
		t.Fatalf("ranges of 17 ids 16 apart: %v", err)
	}
}
