package binlog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// RoutedTopics returns the distinct topics the rows of a table route to
// under m (mapping.Mapping.TopicOf), sorted: m's fixed topic without a
// query, else one SELECT DISTINCT over m's topic columns (TopicSlots) of
// quoted (`schema`.`table`) with where ("" or " WHERE ..."), run by exec
// (a connection's Execute). Rows naming no topic (NULL, an empty
// event_type) are left out; names are returned as rendered, valid or not
// (router.ValidTopic judges them). limit > 0 reads at most limit distinct
// value combinations; cut then reports that the table holds more.
func RoutedTopics(exec func(string, ...any) (*mysql.Result, error), quoted, where string, m *mapping.Mapping, limit int) (topics []string, cut bool, err error) {
	cols := m.TopicSlots()
	if len(cols) == 0 {
		name, _ := m.TopicOf(nil)
		return []string{name}, false, nil
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = "`" + m.Name(c) + "`"
	}
	q := fmt.Sprintf("SELECT DISTINCT %s FROM %s%s", strings.Join(names, ", "), quoted, where)
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit+1)
	}
	r, err := exec(q)
	if err != nil {
		return nil, false, fmt.Errorf("binlog: topics of %s: %s: %w", quoted, q, err)
	}
	n := r.RowNumber()
	if limit > 0 && n > limit {
		n, cut = limit, true
	}
	vals := make([][]byte, len(m.Cols))
	for i := 0; i < n; i++ {
		for j, c := range cols {
			vals[c] = nil
			if null, _ := r.IsNull(i, j); !null {
				s, _ := r.GetString(i, j)
				vals[c] = []byte(s)
			}
		}
		if t, ok := m.TopicOf(vals); ok && !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	slices.Sort(topics)
	return topics, cut, nil
}
