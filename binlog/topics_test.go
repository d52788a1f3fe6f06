package binlog

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// RoutedTopics: the topics of the distinct values, as the router names
// them; rows naming none left out; the limit reported as cut; the query
// bounded by LIMIT limit+1; none for a fixed topic.
func TestRoutedTopics(t *testing.T) {
	dbz, err := mapping.Compile(mapping.Config{Preset: mapping.PresetDebezium}, "im.events", "shop.outbox", []mapping.Column{
		{Name: "id", DataType: "varchar"}, {Name: "aggregatetype", DataType: "varchar"}, {Name: "aggregateid", DataType: "varchar"},
		{Name: "type", DataType: "varchar"}, {Name: "payload", DataType: "json", Nullable: true}})
	if err != nil {
		t.Fatal(err)
	}
	col, err := mapping.Compile(mapping.Config{Preset: mapping.PresetDebezium, TopicColumn: "dest"}, "im.events", "shop.outbox", []mapping.Column{
		{Name: "id", DataType: "varchar"}, {Name: "dest", DataType: "varchar", Nullable: true}, {Name: "aggregateid", DataType: "varchar"},
		{Name: "type", DataType: "varchar"}, {Name: "payload", DataType: "json"}})
	if err != nil {
		t.Fatal(err)
	}
	im, _ := mapping.RouterTopic("im.{event_type}")
	fixed, _ := mapping.RouterTopic("im.events")
	for _, c := range []struct {
		name  string
		m     *mapping.Mapping
		col   string
		rows  [][]any
		limit int
		want  []string
		cut   bool
		query string // a part of the query; "" for none
	}{
		{"fixed router.topic", fixed, "", nil, 1000, []string{"im.events"}, false, ""},
		{"template", dbz, "aggregatetype", [][]any{{"order"}, {"user"}, {nil}}, 1000, []string{"outbox.event.order", "outbox.event.user"}, false,
			"SELECT DISTINCT `aggregatetype` FROM `shop`.`outbox` LIMIT 1001"},
		{"template cut", dbz, "aggregatetype", [][]any{{"b"}, {"a"}, {"c"}}, 2, []string{"outbox.event.a", "outbox.event.b"}, true, "LIMIT 3"},
		{"invalid names kept", dbz, "aggregatetype", [][]any{{"bad name"}}, 1000, []string{"outbox.event.bad name"}, false, ""},
		{"im: an empty event_type names none", im, "event_type", [][]any{{""}, {"msg"}}, 0, []string{"im.msg"}, false, "FROM `shop`.`outbox`"},
		{"topic column", col, "dest", [][]any{{"t1"}, {nil}, {"t2"}}, 1000, []string{"t1", "t2"}, false, "SELECT DISTINCT `dest`"},
	} {
		var q string
		exec := func(s string, _ ...any) (*mysql.Result, error) {
			q = s
			// A result holds at most the LIMIT's rows, as the server's.
			rows := c.rows
			if c.limit > 0 && len(rows) > c.limit+1 {
				rows = rows[:c.limit+1]
			}
			return result(t, []string{c.col}, rows...), nil
		}
		got, cut, err := RoutedTopics(exec, "`shop`.`outbox`", "", c.m, c.limit)
		if err != nil || !reflect.DeepEqual(got, c.want) || cut != c.cut {
			t.Errorf("%s: %v, cut %v, %v; want %v, cut %v", c.name, got, cut, err, c.want, c.cut)
		}
		if c.col == "" && q != "" || !strings.Contains(q, c.query) {
			t.Errorf("%s: query %q, want one with %q", c.name, q, c.query)
		}
	}
}
