package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// Options select what Run checks.
type Options struct {
	Topics           []string // none: the mapping's topics (fixed, or a template's / topic column's topics of the range)
	SinceID, UntilID uint64   // 0: the smallest / largest id in the table at start (integer id columns only)
	// Table is the outbox table to check ("schema.table" or "table" in
	// source.schema) when the source reads several (source.tables).
	Table string
	Wait  time.Duration
	// Log receives the plan and "missing so far" lines (usually stderr).
	Log io.Writer
	// Progress, when set, is told the records read so far and where.
	Progress func(records int64, at string)
}

// layout is what verify reads of the outbox table through its mapping
// (compiled at start from source.mapping / source.tables, as run does):
// the id column (integer: a range and a bitmap; string: every row), the
// header holding the ordering column, and the topics.
type layout struct {
	quoted string // `schema`.`table`
	m      *mapping.Mapping
	intID  bool
	order  string // header carrying the ordering column; "" none
}

func newLayout(t *binlog.Table) layout {
	m := t.Mapping
	l := layout{quoted: fmt.Sprintf("`%s`.`%s`", t.Schema, t.Name), m: m}
	k := m.Kinds[m.ID]
	l.intID = k == mapping.KindInteger || k == mapping.KindUnknown
	if m.Order >= 0 {
		for _, h := range m.Headers {
			if h.Slot == m.Order {
				l.order = h.Name
				break
			}
		}
	}
	return l
}

func (l layout) id() string { return "`" + l.m.Name(l.m.ID) + "`" }

// where is the id range condition ("" for string ids).
func (l layout) where(lo, hi uint64) string {
	if !l.intID {
		return ""
	}
	return fmt.Sprintf(" WHERE %s BETWEEN %d AND %d", l.id(), lo, hi)
}

// pickTable returns the table of the source verify checks: the only one,
// or the one named by want.
func pickTable(tables []*binlog.Table, want, schema string) (*binlog.Table, error) {
	if want != "" {
		if !strings.Contains(want, ".") {
			want = schema + "." + want
		}
		for _, t := range tables {
			if strings.EqualFold(t.String(), want) {
				return t, nil
			}
		}
		names := make([]string, len(tables))
		for i, t := range tables {
			names[i] = t.String()
		}
		return nil, fmt.Errorf("verify: --table %s is not an outbox table of this source (it reads %s)", want, strings.Join(names, ", "))
	}
	switch len(tables) {
	case 0:
		return nil, errors.New("verify: the source has no outbox table")
	case 1:
		return tables[0], nil
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	return nil, fmt.Errorf("verify: the source reads %d outbox tables (%s): give --table schema.table; verify checks one table at a time "+
		"(records name no table, and the ids of different tables may overlap: records of another table with an id of this one count as this table's)",
		len(tables), strings.Join(names, ", "))
}

// Run compares the topics with the outbox table's rows of the id range
// (see the verify command): records are read from the beginning of each
// topic, rows streamed from the table; with Wait, missing events are
// re-checked until they arrive or Wait passes. The table's mapping says
// which column is the id, which header holds the ordering column and
// which topics the records went to.
func Run(ctx context.Context, cfg config.Config, o Options) (AuditReport, error) {
	src := cfg.Source
	srv, err := binlog.Connect(ctx, src, zap.NewNop())
	if err != nil {
		return AuditReport{}, fmt.Errorf("verify: connect to %s: %w", src.Addr, err)
	}
	defer srv.Close()
	ts, err := binlog.NewTableSet(src, cfg.Router.Topic)
	if err != nil {
		return AuditReport{}, err
	}
	tables, err := ts.Check(srv)
	if err != nil {
		return AuditReport{}, fmt.Errorf("verify: %w", err)
	}
	tbl, err := pickTable(tables, o.Table, src.Schema)
	if err != nil {
		return AuditReport{}, err
	}
	lay := newLayout(tbl)
	conn, err := binlog.Dial(ctx, src, src.Schema)
	if err != nil {
		return AuditReport{}, fmt.Errorf("verify: connect to %s: %w", src.Addr, err)
	}
	defer conn.Close()
	table := lay.quoted
	var lo, hi uint64
	if lay.intID {
		r, err := conn.Execute(fmt.Sprintf("SELECT COALESCE(MIN(%s),0), COALESCE(MAX(%s),0) FROM %s", lay.id(), lay.id(), table))
		if err != nil {
			return AuditReport{}, fmt.Errorf("verify: read id range of %s: %w", table, err)
		}
		lo, _ = r.GetUint(0, 0)
		hi, _ = r.GetUint(0, 1)
		if o.SinceID > 0 {
			lo = o.SinceID
		}
		if o.UntilID > 0 {
			hi = o.UntilID
		}
		if hi < lo {
			return AuditReport{}, fmt.Errorf("verify: empty id range %d … %d", lo, hi)
		}
	} else if o.SinceID > 0 || o.UntilID > 0 {
		return AuditReport{}, fmt.Errorf("verify: --since-id and --until-id need an integer id column; %s's id column %s is a string: every row is checked",
			tbl, lay.m.Name(lay.m.ID))
	}
	topics := o.Topics
	if len(topics) == 0 {
		if topics, err = topicsOf(conn, lay, lo, hi); err != nil {
			return AuditReport{}, err
		}
	}
	order := "order by " + lay.order
	if lay.order == "" {
		order = "order not checked (the mapping has no ordering column, or none published as a header)"
	}
	if lay.intID {
		fmt.Fprintf(o.Log, "verify: ids %d … %d of %s against topics %s; key %s, %s\n", lo, hi, table, strings.Join(topics, ", "), keyCols(lay.m), order)
	} else {
		fmt.Fprintf(o.Log, "verify: every row of %s (string ids) against topics %s; key %s, %s\n", table, strings.Join(topics, ", "), keyCols(lay.m), order)
	}

	audit := NewStringAudit()
	if lay.intID {
		audit = NewAudit(lo, hi)
	}
	audit.SetOrder(lay.order)
	consumers := make([]*Consumer, len(topics))
	for i, t := range topics {
		consumers[i] = NewConsumer(cfg.Kafka, t)
	}
	deadline := time.Now().Add(o.Wait)
	var read int64
	for {
		for i, c := range consumers {
			err := c.Each(ctx, func(rec Record) error {
				audit.Add(rec)
				read++
				if o.Progress != nil {
					o.Progress(read, fmt.Sprintf("%s/%d@%d", topics[i], rec.Partition, rec.Offset))
				}
				return nil
			})
			if err != nil {
				if errors.Is(err, kafka.UnknownTopicOrPartition) {
					return AuditReport{}, fmt.Errorf("read topic %s: %w; check the mapping's topic / router.topic (or --topic): the topic does not exist on %s", topics[i], err, strings.Join(cfg.Kafka.Brokers, ","))
				}
				return AuditReport{}, fmt.Errorf("read topic %s: %w", topics[i], err)
			}
		}
		// Rows are checked on a fresh audit copy each pass: only the
		// records accumulate.
		rep, err := checkRows(conn, lay, audit, lo, hi)
		if err != nil {
			return rep, err
		}
		if rep.Missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return rep, nil
		}
		fmt.Fprintf(o.Log, "verify: %d events missing so far; re-reading (until %s)\n", rep.Missing, deadline.Format(time.TimeOnly))
		select {
		case <-ctx.Done():
			return rep, nil
		case <-time.After(time.Second):
		}
	}
}

func keyCols(m *mapping.Mapping) string {
	names := make([]string, len(m.Key))
	for i, k := range m.Key {
		names[i] = m.Name(k)
	}
	return strings.Join(names, ":")
}

// checkRows streams the table's rows of the range and returns the report.
func checkRows(conn *client.Conn, lay layout, audit *Audit, lo, hi uint64) (AuditReport, error) {
	a := audit.Clone()
	var res mysql.Result
	q := fmt.Sprintf("SELECT %s FROM %s%s ORDER BY %s", lay.id(), lay.quoted, lay.where(lo, hi), lay.id())
	err := conn.ExecuteSelectStreaming(q, &res, func(row []mysql.FieldValue) error {
		if lay.intID {
			a.AddRow(Row{ID: row[0].AsUint64()})
		} else {
			a.AddRowID(string(row[0].AsString()))
		}
		return nil
	}, nil)
	if err != nil {
		return AuditReport{}, fmt.Errorf("verify: read %s: %w", lay.quoted, err)
	}
	return a.Report(), nil
}

// topicsOf returns the topics of the range's rows: the mapping's fixed
// topic; for a template (router.topic's {event_type} with the im preset,
// outbox.event.{aggregatetype}, ...) the distinct renderings over the
// rows; for a topic column its distinct values. Invalid names (poison
// records, dead-lettered) are left out.
func topicsOf(conn *client.Conn, lay layout, lo, hi uint64) ([]string, error) {
	m := lay.m
	var cols []int
	if m.TopicColumn >= 0 {
		cols = []int{m.TopicColumn}
	} else {
		if name, ok := m.Topic.Fixed(); ok {
			return []string{name}, nil
		}
		for _, p := range m.Topic.Parts {
			if p.Column != "" && !slices.Contains(cols, p.Slot) {
				cols = append(cols, p.Slot)
			}
		}
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = "`" + m.Name(c) + "`"
	}
	q := fmt.Sprintf("SELECT DISTINCT %s FROM %s%s", strings.Join(names, ", "), lay.quoted, lay.where(lo, hi))
	r, err := conn.Execute(q)
	if err != nil {
		return nil, fmt.Errorf("verify: topics of %s: %s: %w", lay.quoted, q, err)
	}
	var out []string
	vals := make([][]byte, len(m.Cols))
	for i := 0; i < r.RowNumber(); i++ {
		for j, c := range cols {
			vals[c] = nil
			if null, _ := r.IsNull(i, j); !null {
				s, _ := r.GetString(i, j)
				vals[c] = []byte(s)
			}
		}
		if m.IM && slices.ContainsFunc(cols, func(c int) bool { return len(vals[c]) == 0 }) {
			continue // an empty event_type: a poison record under the im preset
		}
		var t string
		if m.TopicColumn >= 0 {
			if vals[m.TopicColumn] == nil {
				continue
			}
			t = string(vals[m.TopicColumn])
		} else {
			b, ok := m.Topic.Append(nil, vals)
			if !ok {
				continue
			}
			t = string(b)
		}
		if router.ValidTopic(t) != nil || slices.Contains(out, t) {
			continue
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("verify: no topics for the rows of %s in range; give --topic", lay.quoted)
	}
	slices.Sort(out)
	return out, nil
}
