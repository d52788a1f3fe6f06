package check

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/pipeline"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/segmentio/kafka-go"
)

// topicLimit bounds the distinct topic values read from an outbox table
// per mapping (SELECT DISTINCT … LIMIT): check says when it was reached.
const topicLimit = 1000

// routed is an outbox table and the mapping its rows' topics come from.
type routed struct {
	table   string // schema.table
	quoted  string // `schema`.`table`
	setting string // the configuration key of its topic: router.topic, source.mapping, source.tables[i]
	m       *mapping.Mapping
}

// origin names where a topic of t comes from, for the report's lines.
func (t routed) origin() string {
	if t.setting == "router.topic" {
		return "router.topic"
	}
	return fmt.Sprintf("%s %s of table %s", t.setting, t.m.TopicSetting(), t.table)
}

// checkTables runs run's validation of the outbox tables and their
// mappings (pipeline.Checked, the function run calls): one FAIL line per
// problem, each naming the setting, the table, the column and the fix;
// else one OK line per table. It returns the tables whose topics to check
// (the im table read without a mapping routes by router.topic), nil after
// a failure.
func checkTables(cfg config.Config, srv *binlog.Server, r *Report) []routed {
	ts, found, cols, err := pipeline.Checked(cfg, srv)
	if err != nil {
		for _, e := range mapping.Problems(err) {
			r.fail("outbox", "%v", e)
		}
		return nil
	}
	src := cfg.Source
	if ts.Legacy() {
		m, err := mapping.RouterTopic(cfg.Router.Topic)
		if err != nil {
			r.fail("config", "router.topic: %v", err)
			return nil
		}
		r.ok("outbox", "table %s.%s exists (%d columns)", src.Schema, src.Table, len(cols))
		return []routed{{table: src.Schema + "." + src.Table, quoted: fmt.Sprintf("`%s`.`%s`", src.Schema, src.Table), setting: "router.topic", m: m}}
	}
	out := make([]routed, 0, len(found))
	for _, t := range found {
		m := t.Mapping
		keys := make([]string, len(m.Key))
		for i, k := range m.Key {
			keys[i] = m.Name(k)
		}
		r.ok("outbox", "table %s fits its mapping (%s): id %s, key %s, payload %s, %s", t, t.Setting, m.Name(m.ID), strings.Join(keys, ":"), m.Name(m.Payload), m.TopicSetting())
		out = append(out, routed{table: t.String(), quoted: t.Quoted(), setting: t.Setting, m: m})
	}
	return out
}

// target is a topic records are routed to, and where it comes from.
type target struct {
	topic, origin string
}

// routedTopics returns the topics the tables' rows route to, each once
// (the first table naming it gives its origin): a fixed topic as such; for
// a template or a topic column, those of the distinct values in the table
// (at most topicLimit, a WARN line saying when there are more), an invalid
// name a line of its own (invalidTopic). tables nil (the outbox tables
// could not be checked): the mappings' fixed topics, a WARN line saying
// that the others are not checked.
func routedTopics(ctx context.Context, cfg config.Config, tables []routed, r *Report) []target {
	var out []target
	seen := map[string]bool{}
	add := func(topic, origin string) {
		if !seen[topic] {
			seen[topic] = true
			out = append(out, target{topic, origin})
		}
	}
	if tables == nil {
		ts, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic)
		if err != nil {
			return nil // a configuration error, refused by the loader
		}
		origin := "a fixed topic of the mappings"
		if ts.Legacy() {
			origin = "router.topic"
		}
		for _, t := range ts.FixedTopics() {
			add(t, origin)
		}
		if ts.Variable() {
			r.warn("topic", "the topics of the templates and topic columns are not checked: the outbox tables or their mappings failed (see the outbox lines above)")
		}
		return out
	}
	var conn *binlog.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for _, t := range tables {
		if len(t.m.TopicSlots()) > 0 && conn == nil {
			c, err := binlog.Dial(ctx, cfg.Source, "")
			if err != nil {
				r.fail("topic", "cannot read the topics of table %s (%s): %v", t.table, t.origin(), err)
				continue
			}
			conn = c
		}
		var exec func(string, ...any) (*mysql.Result, error) // not called for a fixed topic
		if conn != nil {
			exec = conn.Execute
		}
		topics, cut, err := binlog.RoutedTopics(exec, t.quoted, "", t.m, topicLimit)
		switch {
		case err != nil:
			r.fail("topic", "cannot read the topics of table %s (%s): %v", t.table, t.origin(), err)
			continue
		case len(topics) == 0:
			r.ok("topic", "%s: no row names a topic yet, none to check", t.origin())
		case cut:
			r.warn("topic", "%s: the table holds more than %d distinct values of %s; the topics of the first %d are checked",
				t.origin(), topicLimit, slotNames(t.m), topicLimit)
		}
		for _, topic := range topics {
			// run's decision on a routed name (router.CheckTopic): Kafka's
			// rules, internal "__" names, the dead-letter and mirror topics.
			if err := router.CheckTopic(router.Routed{Topic: topic}, cfg.ReservedTopics()); err != nil {
				invalidTopic(cfg.Kafka, topic, t.origin(), err, r)
				continue
			}
			add(topic, t.origin())
		}
	}
	return out
}

// slotNames returns the columns a mapping's topic is read from, joined.
func slotNames(m *mapping.Mapping) string {
	var s []string
	for _, c := range m.TopicSlots() {
		s = append(s, m.Name(c))
	}
	return strings.Join(s, ", ")
}

// invalidTopic reports a routed topic run refuses (err, from
// router.CheckTopic): its rows are poison records, which stop run under
// kafka.on-poison: fail (a FAIL line) and are dead-lettered under
// dead-letter (a WARN line).
func invalidTopic(k sink.Config, topic, origin string, err error, r *Report) {
	if k.OnPoison == sink.PolicyDeadLetter {
		r.warn("topic", "%q (%s) is not a valid Kafka topic name (%v): the rows routed to it are dead-lettered to %s (kafka.on-poison: dead-letter); fix their values or the mapping's topic",
			topic, origin, err, k.DeadLetterTopic)
		return
	}
	r.fail("topic", "%q (%s) is not a valid Kafka topic name (%v): run stops at the first such row not yet published (kafka.on-poison: %s); fix the rows' values or the mapping's topic, or set kafka.on-poison: dead-letter",
		topic, origin, err, k.OnPoison)
}

// checkTopics checks the topics the rows are routed to (routedTopics) and
// the dead-letter topic; it returns the partition counts of the routed
// topics found.
func checkTopics(ctx context.Context, cfg config.Config, tables []routed, r *Report) map[string]int {
	parts := map[string]int{}
	for _, t := range routedTopics(ctx, cfg, tables, r) {
		if n, ok := checkTopic(ctx, cfg, "topic", t.topic, t.origin, r); ok {
			parts[t.topic] = n
		}
	}
	if cfg.Kafka.OnPoison == sink.PolicyDeadLetter {
		checkTopic(ctx, cfg, "dead-letter", cfg.Kafka.DeadLetterTopic, "kafka.dead-letter-topic", r)
	}
	return parts
}

// checkMirror checks checkpoint.mirror-topic: it exists, or run can
// create it (sink.CanCreateMirror: the brokers accept its creation, as
// run's start does it).
func checkMirror(ctx context.Context, cfg config.Config, r *Report) {
	topic := cfg.Checkpoint.MirrorTopic
	if topic == "" {
		return
	}
	ids, err := sink.Partitions(ctx, cfg.Kafka, topic)
	switch {
	case errors.Is(err, kafka.UnknownTopicOrPartition):
		if err := sink.CanCreateMirror(ctx, cfg.Kafka, topic); err != nil {
			r.fail("mirror", "%v", err)
			return
		}
		r.ok("mirror", "checkpoint.mirror-topic %s does not exist yet; run creates it at start (1 partition, cleanup.policy compact), which the brokers accept", topic)
	case err != nil:
		r.fail("mirror", "checkpoint.mirror-topic %s: %v: check kafka.brokers and that the brokers are up", topic, err)
	default:
		r.ok("mirror", "checkpoint.mirror-topic %s exists, %d %s", topic, len(ids), plural(len(ids), "partition", "partitions"))
	}
}
