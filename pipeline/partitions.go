package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
)

// PartitionCounts returns the partition count of each existing topic of
// topics, read with sink.Partitions (never creating a topic). Missing topics
// are left out. kcfg gives the brokers and their TLS and SASL settings.
func PartitionCounts(ctx context.Context, kcfg sink.Config, topics []string) (map[string]int, error) {
	out := make(map[string]int, len(topics))
	for _, t := range topics {
		ids, err := sink.Partitions(ctx, kcfg, t)
		if errors.Is(err, kafka.UnknownTopicOrPartition) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[t] = len(ids)
	}
	return out, nil
}

// PartitionChange is a topic whose partition count differs from the stored one.
type PartitionChange struct {
	Topic       string
	Stored, Now int
}

func (c PartitionChange) String() string {
	return fmt.Sprintf("%s: %d → %d partitions", c.Topic, c.Stored, c.Now)
}

// PartitionChanges compares stored counts with the current ones, topic by
// topic, in name order. Topics missing from either side are not changes (a
// checkpoint without counts, a new topic, a deleted topic).
func PartitionChanges(stored, now map[string]int) []PartitionChange {
	var out []PartitionChange
	for _, t := range slices.Sorted(maps.Keys(stored)) {
		if n, ok := now[t]; ok && n != stored[t] {
			out = append(out, PartitionChange{Topic: t, Stored: stored[t], Now: n})
		}
	}
	return out
}

// PartitionChangeError explains a partition count change and how to
// confirm it.
func PartitionChangeError(key string, changes []PartitionChange) error {
	s := make([]string, len(changes))
	for i, c := range changes {
		s[i] = c.String()
	}
	return fmt.Errorf("%w since checkpoint %s was written (%s): the key → partition mapping changed, so each conversation's "+
		"records published after the change go to another partition than those before it, and per-conversation order "+
		"breaks across the change (a consumer may read newer records before older ones). If this is intended, wait until "+
		"consumers drained the old records, then confirm once with run --accept-partition-change (or cdc-outbox checkpoint set "+
		"<position>, which stores the current counts); Kafka cannot reduce a partition count again (see docs/operations.md)",
		ErrPartitionsChanged, key, strings.Join(s, ", "))
}

// RoutedTopics returns the topics records are published to: router.topic
// when fixed; for a template ({event_type}), the topics of the event types
// present in the outbox table (SELECT DISTINCT event_type, a scan of the
// table), which may be none.
//
// With mappings (source.tables, or a mapping other than the im preset):
// the fixed topics of the mappings; the topics of templates and topic
// columns are those the checkpoint recorded (its partition counts).
func RoutedTopics(ctx context.Context, cfg config.Config) ([]string, error) {
	if ts, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic); err == nil && !ts.Legacy() {
		return ts.FixedTopics(), nil
	}
	if !strings.Contains(cfg.Router.Topic, "{") {
		return []string{cfg.Router.Topic}, nil
	}
	src := cfg.Source
	conn, err := binlog.Dial(ctx, src, "")
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", src.Addr, err)
	}
	defer conn.Close()
	table := fmt.Sprintf("`%s`.`%s`", src.Schema, src.Table)
	r, err := conn.Execute("SELECT DISTINCT event_type FROM " + table)
	if err != nil {
		return nil, fmt.Errorf("event types of %s: %w", table, err)
	}
	rt := router.New(cfg.Router, cfg.ReservedTopics())
	seen := map[string]bool{}
	var out []string
	for i := 0; i < r.RowNumber(); i++ {
		et, _ := r.GetString(i, 0)
		t, err := rt.Topic(et)
		if err != nil || seen[t] {
			continue // an invalid topic is a poison record, reported by the sink
		}
		seen[t] = true
		out = append(out, t)
	}
	slices.Sort(out)
	return out, nil
}
