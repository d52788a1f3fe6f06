package pipeline

import (
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/mapping"
)

// The start log names the topic the records go to: router.topic only for
// the im preset (it named router.topic's default, im.events, for a
// mapping whose records went to outbox.{aggregate_type}).
func TestStartLogTopic(t *testing.T) {
	for _, c := range []struct {
		name string
		src  binlog.Config
		want string
	}{
		{"im preset", binlog.Config{}, "im.events"},
		{"debezium preset", binlog.Config{Mapping: mapping.Config{Preset: mapping.PresetDebezium}}, "outbox.event.{aggregatetype}"},
		{"generic with a template", binlog.Config{Mapping: mapping.Config{Preset: mapping.PresetGeneric, Topic: "outbox.{aggregate_type}"}}, "outbox.{aggregate_type}"},
		{"topic column", binlog.Config{Mapping: mapping.Config{Preset: mapping.PresetGeneric, TopicColumn: "dest"}}, "from column dest"},
		{"several tables", binlog.Config{Tables: []binlog.TableConfig{{Table: "a"}, {Table: "b"}}}, "by each table's mapping (source.tables)"},
	} {
		cfg := config.Default()
		cfg.Router.Topic = "im.events"
		cfg.Source = c.src
		if got := startTopic(cfg); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
