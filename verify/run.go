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
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// Source is what verify reads of a source's configuration: the source
// (its database and outbox tables), router.topic (the mappings' default
// topic) and the Kafka cluster.
type Source struct {
	Source binlog.Config
	Topic  string
	Kafka  sink.Config
}

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

// pickTables returns the tables of the source verify checks: the one
// want names, or every one (want "").
func pickTables(tables []*binlog.Table, want, schema string) ([]*binlog.Table, error) {
	if len(tables) == 0 {
		return nil, errors.New("verify: the source has no outbox table")
	}
	if want == "" {
		return tables, nil
	}
	if !strings.Contains(want, ".") {
		want = schema + "." + want
	}
	for _, t := range tables {
		if strings.EqualFold(t.String(), want) {
			return []*binlog.Table{t}, nil
		}
	}
	return nil, fmt.Errorf("verify: --table %s is not an outbox table of this source (it reads %s)", want, tableNames(tables))
}

func tableNames(tables []*binlog.Table) string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	return strings.Join(names, ", ")
}

// TableReport is the audit of one outbox table.
type TableReport struct {
	Table string // "schema.table"
	AuditReport
}

// plan is what verify checks of one table: its layout, the id range (an
// integer id column) and the topics its rows went to.
type plan struct {
	tbl    *binlog.Table
	lay    layout
	lo, hi uint64
	topics []string
	audit  *Audit
}

// errNoTopics: no row of the range names a topic (an empty table under a
// topic template or column).
var errNoTopics = errors.New("no topics for the rows in range")

// planTable reads tbl's id range and topics (o.Topics when given).
func planTable(conn *binlog.Conn, tbl *binlog.Table, o Options) (plan, error) {
	p := plan{tbl: tbl, lay: newLayout(tbl)}
	lay := p.lay
	if lay.intID {
		r, err := conn.Execute(fmt.Sprintf("SELECT COALESCE(MIN(%s),0), COALESCE(MAX(%s),0) FROM %s", lay.id(), lay.id(), lay.quoted))
		if err != nil {
			return p, fmt.Errorf("verify: read id range of %s: %w", lay.quoted, err)
		}
		p.lo, _ = r.GetUint(0, 0)
		p.hi, _ = r.GetUint(0, 1)
		if o.SinceID > 0 {
			p.lo = o.SinceID
		}
		if o.UntilID > 0 {
			p.hi = o.UntilID
		}
		if p.hi < p.lo {
			return p, fmt.Errorf("verify: %s: empty id range %d … %d", tbl, p.lo, p.hi)
		}
	} else if o.SinceID > 0 || o.UntilID > 0 {
		return p, fmt.Errorf("verify: --since-id and --until-id need an integer id column; %s's id column %s is a string: every row is checked",
			tbl, lay.m.Name(lay.m.ID))
	}
	p.topics = o.Topics
	if len(p.topics) == 0 {
		var err error
		if p.topics, err = topicsOf(conn, lay, p.lo, p.hi); err != nil {
			return p, err
		}
	}
	order := "order by " + lay.order
	if lay.order == "" {
		order = "order not checked (the mapping has no ordering column, or none published as a header)"
	}
	if lay.intID {
		fmt.Fprintf(o.Log, "verify: ids %d … %d of %s against topics %s; key %s, %s\n", p.lo, p.hi, lay.quoted, strings.Join(p.topics, ", "), keyCols(lay.m), order)
	} else {
		fmt.Fprintf(o.Log, "verify: every row of %s (string ids) against topics %s; key %s, %s\n", lay.quoted, strings.Join(p.topics, ", "), keyCols(lay.m), order)
	}
	p.audit = NewStringAudit()
	if lay.intID {
		p.audit = NewAudit(p.lo, p.hi)
	}
	p.audit.SetOrder(lay.order)
	return p, nil
}

// Run compares the topics with the outbox table's rows of the id range
// (see the verify command), for the table o.Table names or, without it,
// for each outbox table of the source: one report per table, in the
// order of source.tables. Records are read once from the beginning of each
// topic (the union of the tables' topics) and each is audited for every
// table whose topics hold it; rows are streamed from each table; with
// Wait, missing events are re-checked until they arrive or Wait passes.
// Each table's mapping says which column is the id, which header holds
// the ordering column and which topics the records went to.
//
// Records name no table, so with several tables two that publish to one
// topic must not share an event id (a record would count for both): Run
// checks this first (sharedID) and refuses, naming the tables, the id and
// the fixes. A table without rows (no topics under a template) gets an
// empty report.
func Run(ctx context.Context, cfg Source, o Options) ([]TableReport, error) {
	src := cfg.Source
	srv, err := binlog.Connect(ctx, src, zap.NewNop())
	if err != nil {
		return nil, fmt.Errorf("verify: connect to %s: %w", src.Addr, err)
	}
	defer srv.Close()
	ts, err := binlog.NewTableSet(src, cfg.Topic)
	if err != nil {
		return nil, err
	}
	tables, err := ts.Check(srv)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	picked, err := pickTables(tables, o.Table, src.Schema)
	if err != nil {
		return nil, err
	}
	conn, err := binlog.Dial(ctx, src, src.Schema)
	if err != nil {
		return nil, fmt.Errorf("verify: connect to %s: %w", src.Addr, err)
	}
	defer conn.Close()
	plans := make([]plan, 0, len(picked))
	for _, tbl := range picked {
		p, err := planTable(conn, tbl, o)
		if errors.Is(err, errNoTopics) && len(picked) > 1 {
			// One table of several has nothing to check yet (an empty shard).
			fmt.Fprintf(o.Log, "verify: no row of %s in range names a topic: nothing to check there\n", p.lay.quoted)
			p.audit = NewStringAudit()
			if p.lay.intID {
				p.audit = NewAudit(p.lo, p.hi)
			}
		} else if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	if len(plans) > 1 {
		if err := checkDisjoint(conn, plans); err != nil {
			return nil, err
		}
	}
	var topics []string
	for _, p := range plans {
		for _, t := range p.topics {
			if !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	consumers := make([]*Consumer, len(topics))
	for i, t := range topics {
		consumers[i] = NewConsumer(cfg.Kafka, t)
	}
	// audits[i]: the audits of the tables publishing to topics[i].
	audits := make([][]*Audit, len(topics))
	for i, t := range topics {
		for _, p := range plans {
			if slices.Contains(p.topics, t) {
				audits[i] = append(audits[i], p.audit)
			}
		}
	}
	deadline := time.Now().Add(o.Wait)
	var read int64
	for {
		for i, c := range consumers {
			err := c.Each(ctx, func(rec Record) error {
				for _, a := range audits[i] {
					a.Add(rec)
				}
				read++
				if o.Progress != nil {
					o.Progress(read, fmt.Sprintf("%s/%d@%d", topics[i], rec.Partition, rec.Offset))
				}
				return nil
			})
			if err != nil {
				if errors.Is(err, kafka.UnknownTopicOrPartition) {
					return nil, fmt.Errorf("read topic %s: %w; check the mapping's topic / router.topic (or --topic): the topic does not exist on %s", topics[i], err, strings.Join(cfg.Kafka.Brokers, ","))
				}
				return nil, fmt.Errorf("read topic %s: %w", topics[i], err)
			}
		}
		// Rows are checked on a fresh audit copy each pass: only the
		// records accumulate.
		reps := make([]TableReport, len(plans))
		missing := 0
		for i, p := range plans {
			rep := p.audit.Clone().Report()
			if len(p.topics) > 0 {
				if rep, err = checkRows(conn, p.lay, p.audit, p.lo, p.hi); err != nil {
					return nil, err
				}
			}
			reps[i] = TableReport{Table: p.tbl.String(), AuditReport: rep}
			missing += rep.Missing
		}
		if missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return reps, nil
		}
		fmt.Fprintf(o.Log, "verify: %d events missing so far; re-reading (until %s)\n", missing, deadline.Format(time.TimeOnly))
		select {
		case <-ctx.Done():
			return reps, nil
		case <-time.After(time.Second):
		}
	}
}

// ErrSharedID: two tables verified together publish to one topic and
// share an event id, so their records cannot be told apart.
var ErrSharedID = errors.New("verify: tables share a topic and an event id")

// checkDisjoint returns an ErrSharedID error when two of the plans share
// a topic and an event id (sharedID), naming the fixes.
func checkDisjoint(conn *binlog.Conn, plans []plan) error {
	var done [][]int
	for _, t := range allTopics(plans) {
		var group []int
		for i, p := range plans {
			if slices.Contains(p.topics, t) {
				group = append(group, i)
			}
		}
		if len(group) < 2 || slices.ContainsFunc(done, func(g []int) bool { return slices.Equal(g, group) }) {
			continue
		}
		done = append(done, group)
		ps := make([]plan, len(group))
		for j, i := range group {
			ps[j] = plans[i]
		}
		a, b, id, err := sharedID(conn, ps)
		if err != nil {
			return err
		}
		if id != "" {
			return fmt.Errorf("%w: %s and %s both publish to topic %s and both hold event id %s: records name no table, so a record would count for both "+
				"(and hide a missing event of one): give the tables distinct ids (a global id, auto_increment_offset / auto_increment_increment, "+
				"or each its own AUTO_INCREMENT start) or each its own topic; --table checks one table alone, counting the other's records with its ids as its own",
				ErrSharedID, a, b, t, id)
		}
	}
	return nil
}

func allTopics(plans []plan) []string {
	var out []string
	for _, p := range plans {
		for _, t := range p.topics {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// sharedID returns an event id two of ps hold within their ranges, and
// their names; "" when none does. Integer id ranges that do not overlap
// need no query; otherwise one query groups the ids of every table
// (UNION ALL, each within its range).
func sharedID(conn *binlog.Conn, ps []plan) (a, b, id string, err error) {
	if !rangesOverlap(ps) {
		return "", "", "", nil
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmt.Sprintf("SELECT CAST(%s AS CHAR) AS id, %d AS t FROM %s%s", p.lay.id(), i, p.lay.quoted, p.lay.where(p.lo, p.hi))
	}
	q := "SELECT id, MIN(t), MAX(t) FROM (" + strings.Join(parts, " UNION ALL ") + ") u GROUP BY id HAVING MIN(t) <> MAX(t) LIMIT 1"
	r, err := conn.Execute(q)
	if err != nil {
		return "", "", "", fmt.Errorf("verify: check that the tables sharing a topic share no event id: %w", err)
	}
	if r.RowNumber() == 0 {
		return "", "", "", nil
	}
	id, _ = r.GetString(0, 0)
	i, _ := r.GetInt(0, 1)
	j, _ := r.GetInt(0, 2)
	return ps[i].tbl.String(), ps[j].tbl.String(), id, nil
}

// rangesOverlap reports whether ids of two of ps may coincide: a string id
// column, or two integer ranges that overlap.
func rangesOverlap(ps []plan) bool {
	for i, p := range ps {
		if !p.lay.intID {
			return true
		}
		for _, q := range ps[i+1:] {
			if !q.lay.intID || p.lo <= q.hi && q.lo <= p.hi {
				return true
			}
		}
	}
	return false
}

func keyCols(m *mapping.Mapping) string {
	names := make([]string, len(m.Key))
	for i, k := range m.Key {
		names[i] = m.Name(k)
	}
	return strings.Join(names, ":")
}

// checkRows streams the table's rows of the range and returns the report.
func checkRows(conn *binlog.Conn, lay layout, audit *Audit, lo, hi uint64) (AuditReport, error) {
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
func topicsOf(conn *binlog.Conn, lay layout, lo, hi uint64) ([]string, error) {
	all, _, err := binlog.RoutedTopics(conn.Execute, lay.quoted, lay.where(lo, hi), lay.m, 0)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	var out []string
	for _, t := range all {
		if router.ValidTopic(t) == nil {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("verify: %w of %s; give --topic", errNoTopics, lay.quoted)
	}
	slices.Sort(out)
	return out, nil
}
