package binlog

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// TableConfig is one entry of source.tables: a table, or a pattern over
// "schema.table" (a Go regexp matched against the whole name, e.g.
// `im\.im_event_outbox_[0-9]+`), with its mapping (empty: source.mapping).
type TableConfig struct {
	// Schema of Table; default source.schema.
	Schema string `yaml:"schema" doc:"The table's database; empty: source.schema." rule:"-"`
	// Table is one table's name.
	Table string `yaml:"table" doc:"One table's name." rule:"table or pattern, not both"`
	// Pattern matches "schema.table" (anchored at both ends). Tables
	// created later that match are picked up from their table map events.
	Pattern string `yaml:"pattern" doc:"A regular expression matched against the whole schema.table; tables created later that match are picked up." rule:"a valid Go regular expression; table or pattern, not both"`
	// Mapping of the table(s); default source.mapping.
	Mapping mapping.Config `yaml:"mapping" doc:"The table's mapping; empty: source.mapping."`
}

// Table is one outbox table of a source, with its compiled mapping. It is
// immutable; a table whose columns change gets a new *Table.
type Table struct {
	Schema, Name string
	Mapping      *mapping.Mapping
	// Setting is the configuration key of the table's entry
	// (source.mapping, or source.tables[i]), for messages.
	Setting string
	label   string // "schema.table", computed once
}

// String returns "schema.table", the per-table metrics label.
func (t *Table) String() string { return t.Schema + "." + t.Name }

// OutboxTable returns "schema.table" without allocating (computed by
// Compile): the table label of the metrics, read from the records'
// WriterData (see router.Route).
func (t *Table) OutboxTable() string {
	if t.label == "" {
		return t.String()
	}
	return t.label
}

type tableEntry struct {
	schema, name string // a literal table
	re           *regexp.Regexp
	pattern      string
	mention      *regexp.Regexp // the pattern's table part, unanchored, case-insensitive
	lname        []byte         // the literal name, lower case
	cfg          mapping.Config
	field        string // the config field, for errors
}

// TableSet is the set of outbox tables one source reads from its binlog
// stream (one checkpoint for all): the configured tables and patterns,
// each with its mapping. It is safe for concurrent use.
type TableSet struct {
	entries      []tableEntry
	defaultTopic string
	// legacy: the single source.schema/source.table with the im preset;
	// its Events carry no Table (exactly as before mappings existed).
	legacy bool

	mu    sync.Mutex
	match map[string]map[string]int // schema → table → entry index, -1: not an outbox table
	tms   map[uint64]*tmTable       // by table id
}

// NewTableSet returns the TableSet of a validated Config: source.tables
// when set, else source.schema/source.table with source.mapping.
// defaultTopic is router.topic (the im preset's topic).
func NewTableSet(cfg Config, defaultTopic string) (*TableSet, error) {
	ts := &TableSet{defaultTopic: defaultTopic, match: map[string]map[string]int{}}
	if len(cfg.Tables) == 0 {
		ts.entries = []tableEntry{{schema: cfg.Schema, name: cfg.Table, cfg: cfg.Mapping, field: "source.mapping"}}
		ts.entries[0].lname = []byte(strings.ToLower(cfg.Table))
		ts.legacy = cfg.Mapping.IsIM()
		return ts, nil
	}
	for i, t := range cfg.Tables {
		e := tableEntry{schema: t.Schema, name: t.Table, cfg: t.Mapping, pattern: t.Pattern, field: fmt.Sprintf("source.tables[%d]", i)}
		if e.schema == "" {
			e.schema = cfg.Schema
		}
		if e.cfg.IsZero() {
			e.cfg = cfg.Mapping
		}
		if t.Pattern != "" {
			re, err := regexp.Compile(`^(?:` + t.Pattern + `)$`)
			if err != nil {
				return nil, fmt.Errorf("%s.pattern: %q: %v", e.field, t.Pattern, err)
			}
			e.re = re
			_, tp, _ := strings.Cut(t.Pattern, `\.`)
			if tp == "" {
				tp = t.Pattern
			}
			if e.mention, err = regexp.Compile("(?i)" + tp); err != nil {
				e.mention = re
			}
		}
		e.lname = []byte(strings.ToLower(e.name))
		ts.entries = append(ts.entries, e)
	}
	return ts, nil
}

// Legacy reports whether the set is the single im table of before
// mappings (Events without Table).
func (ts *TableSet) Legacy() bool { return ts.legacy }

// DefaultTopic returns router.topic as given to NewTableSet.
func (ts *TableSet) DefaultTopic() string { return ts.defaultTopic }

// entry returns the index of the entry a table belongs to, or -1.
func (ts *TableSet) entry(schema, table []byte) int {
	if len(ts.entries) == 1 && ts.entries[0].re == nil {
		e := &ts.entries[0]
		if string(table) == e.name && string(schema) == e.schema {
			return 0
		}
		return -1
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if i, ok := ts.match[string(schema)][string(table)]; ok {
		return i
	}
	i := ts.lookup(string(schema), string(table))
	m := ts.match[string(schema)]
	if m == nil {
		m = map[string]int{}
		ts.match[string(schema)] = m
	}
	if len(m) > 4096 {
		clear(m) // many short-lived tables of other applications
	}
	m[string(table)] = i
	return i
}

func (ts *TableSet) lookup(schema, table string) int {
	full := schema + "." + table
	for i := range ts.entries {
		e := &ts.entries[i]
		if e.re != nil && e.re.MatchString(full) || e.re == nil && e.name == table && e.schema == schema {
			return i
		}
	}
	return -1
}

// Has reports whether schema.table is one of the set's outbox tables.
func (ts *TableSet) Has(schema, table string) bool {
	return ts.entry([]byte(schema), []byte(table)) >= 0
}

// Mentions reports whether a statement's text names one of the tables (or
// could name a table of a pattern): used to spot statement-based logging
// and DDL on an outbox table.
func (ts *TableSet) Mentions(q []byte) bool {
	var lq []byte
	for i := range ts.entries {
		e := &ts.entries[i]
		if e.re != nil {
			if e.mention.Match(q) {
				return true
			}
			continue
		}
		if lq == nil {
			lq = bytes.ToLower(q)
		}
		if bytes.Contains(lq, e.lname) {
			return true
		}
	}
	return false
}

// Compile compiles the mapping of table schema.table (an entry of the set)
// against cols.
func (ts *TableSet) Compile(schema, table string, cols []mapping.Column) (*Table, error) {
	i := ts.entry([]byte(schema), []byte(table))
	if i < 0 {
		return nil, fmt.Errorf("%w: %s.%s is not an outbox table of this source", ErrDecode, schema, table)
	}
	m, err := mapping.Compile(ts.entries[i].cfg, ts.defaultTopic, schema+"."+table, cols)
	if err != nil {
		// Each problem names the setting (one line each in check's report).
		var errs []error
		for _, e := range mapping.Problems(err) {
			errs = append(errs, fmt.Errorf("%s: %w", ts.entries[i].field, e))
		}
		return nil, errors.Join(errs...)
	}
	return &Table{Schema: schema, Name: table, Mapping: m, Setting: ts.entries[i].field, label: schema + "." + table}, nil
}

// Lister reads the server's catalogue for Check.
type Lister interface {
	// TableNames returns the base tables of schema.
	TableNames(schema string) ([]string, error)
	// TableColumns returns a table's columns in ordinal order; none when
	// the table does not exist.
	TableColumns(schema, table string) ([]mapping.Column, error)
}

// Check validates the set against the server at start: every table exists
// and its mapping compiles against its columns (information_schema), every
// pattern matches at least one table. It returns the tables found, and
// all problems joined, each naming the table, the column and the fix.
func (ts *TableSet) Check(l Lister) ([]*Table, error) {
	var errs []error
	var out []*Table
	for i := range ts.entries {
		e := &ts.entries[i]
		names := []string{e.name}
		if e.re != nil {
			schema := e.schema
			if s, _, ok := strings.Cut(e.pattern, `\.`); ok && regexp.QuoteMeta(s) == s {
				schema = s
			}
			all, err := l.TableNames(schema)
			if err != nil {
				return nil, err
			}
			names = names[:0]
			for _, n := range all {
				if e.re.MatchString(schema + "." + n) {
					names = append(names, n)
				}
			}
			if len(names) == 0 {
				errs = append(errs, fmt.Errorf("%w: %s.pattern %q matches no table of schema %s (it has %d tables): create the tables first, or fix the pattern (it is matched against the whole \"schema.table\")",
					ErrServerConfig, e.field, e.pattern, schema, len(all)))
				continue
			}
			e.schema = schema
		}
		for _, n := range names {
			cols, err := l.TableColumns(e.schema, n)
			if err != nil {
				return nil, err
			}
			if len(cols) == 0 {
				errs = append(errs, fmt.Errorf("%w: table %s.%s (%s) does not exist: create it, or fix the table name", ErrServerConfig, e.schema, n, e.field))
				continue
			}
			t, err := ts.Compile(e.schema, n, cols)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, t)
		}
	}
	return out, errors.Join(errs...)
}

// SelectList returns the SELECT list of the mapped columns in slot order
// (quoted), rendered by the server as the reader renders them (integers
// and DATETIME/TIMESTAMP as text; TIMESTAMP in UTC when the session's
// time_zone is +00:00), for reading rows into Events with EventFromText:
// the backfill and dead-letter republish.
func (t *Table) SelectList() string {
	m := t.Mapping
	sel := make([]string, len(m.Cols))
	for i, c := range m.Cols {
		switch m.Kinds[i] {
		case mapping.KindInteger, mapping.KindTime:
			sel[i] = "CAST(`" + c + "` AS CHAR)"
		default:
			sel[i] = "`" + c + "`"
		}
	}
	return strings.Join(sel, ", ")
}

// IDColumn returns the mapping's id column, quoted.
func (t *Table) IDColumn() string { return "`" + t.Mapping.Name(t.Mapping.ID) + "`" }

// Quoted returns `schema`.`table`.
func (t *Table) Quoted() string { return "`" + t.Schema + "`.`" + t.Name + "`" }

// EventFromText returns the Event of a row read with SelectList (vals by
// slot, nil for NULL), as the reader decodes it: Vals, ID for an integer
// id column, Payload, and Err (wrapping ErrDecode) for a NULL in a
// required column.
func (t *Table) EventFromText(vals [][]byte) Event {
	m := t.Mapping
	e := Event{Table: t, Vals: vals, Payload: vals[m.Payload]}
	if m.Kinds[m.ID] == mapping.KindInteger && vals[m.ID] != nil {
		if id, err := strconv.ParseUint(string(vals[m.ID]), 10, 64); err == nil {
			e.ID = id
		}
	}
	e.Err = nullRequired(t, vals)
	return e
}

// tableMapColumns returns what a table map event tells of the columns
// (binlog_row_metadata=FULL: names; types, signedness and nullability
// always), for compiling a mapping when a table (new, or changed by DDL)
// is first seen in the stream. names overrides the table map's names when
// it has none.
func tableMapColumns(t *replication.TableMapEvent, names []string) []mapping.Column {
	if len(t.ColumnName) > 0 {
		names = t.ColumnNameString()
	}
	unsigned := t.UnsignedMap()
	cols := make([]mapping.Column, 0, len(names))
	for i, n := range names {
		c := mapping.Column{Name: n}
		if i < len(t.ColumnType) {
			c.DataType = tableMapType(t.ColumnType[i], t.ColumnMeta[i])
		}
		c.Unsigned = unsigned[i]
		if ok, null := t.Nullable(i); ok {
			c.Nullable = null
		}
		cols = append(cols, c)
	}
	return cols
}

// tableMapType names a binlog column type as information_schema's
// DATA_TYPE would, as far as the mapping's kinds go (TEXT and BLOB are
// alike in the binlog: both taken as text).
func tableMapType(tp byte, meta uint16) string {
	switch tp {
	case mysql.MYSQL_TYPE_TINY:
		return "tinyint"
	case mysql.MYSQL_TYPE_SHORT:
		return "smallint"
	case mysql.MYSQL_TYPE_INT24:
		return "mediumint"
	case mysql.MYSQL_TYPE_LONG:
		return "int"
	case mysql.MYSQL_TYPE_LONGLONG:
		return "bigint"
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		return "varchar"
	case mysql.MYSQL_TYPE_STRING:
		if rt := byte(meta >> 8); meta >= 256 && (rt == mysql.MYSQL_TYPE_ENUM || rt == mysql.MYSQL_TYPE_SET) {
			return "enum"
		}
		return "char"
	case mysql.MYSQL_TYPE_BLOB:
		return "longtext"
	case mysql.MYSQL_TYPE_JSON:
		return "json"
	case mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_DATETIME2:
		return "datetime"
	case mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIMESTAMP2:
		return "timestamp"
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		return "decimal"
	case mysql.MYSQL_TYPE_FLOAT:
		return "float"
	case mysql.MYSQL_TYPE_DOUBLE:
		return "double"
	}
	return "other"
}

// tmTable caches the *Table compiled for one table map.
type tmTable struct {
	tm    *replication.TableMapEvent
	types []byte
	meta  []uint16
	names []string
	tbl   *Table
	err   error
}

// forTableMap returns the *Table of an outbox table's table map event,
// compiling its mapping against the columns the table map describes
// (names: the fallback without binlog_row_metadata=FULL), or the error of
// a mapped column the table lacks or that has an unsupported type now (a
// DDL while running): ErrDecode, fatal. It returns nil, nil for the legacy
// set (the im path of before mappings, columnMap). Results are cached by
// table id while the table map is unchanged.
func (ts *TableSet) forTableMap(t *replication.TableMapEvent, names []string) (*Table, error) {
	if ts.legacy {
		return nil, nil
	}
	ts.mu.Lock()
	if c := ts.tms[t.TableID]; c != nil && (c.tm == t || bytes.Equal(c.types, t.ColumnType) && slicesEqual(c.meta, t.ColumnMeta) && namesEqual(c.names, t.ColumnName)) {
		c.tm = t
		ts.mu.Unlock()
		return c.tbl, c.err
	}
	ts.mu.Unlock()
	c := &tmTable{tm: t, types: bytes.Clone(t.ColumnType), meta: append([]uint16(nil), t.ColumnMeta...), names: t.ColumnNameString()}
	if len(t.ColumnName) == 0 && (len(names) == 0 || len(ts.entries) != 1 || ts.entries[0].re != nil) {
		c.err = fmt.Errorf("%w: the table map of %s.%s carries no column names (binlog_row_metadata=MINIMAL): a mapping other than the im preset, and source.tables, need binlog_row_metadata=FULL on the server",
			ErrServerConfig, t.Schema, t.Table)
	} else {
		c.tbl, c.err = ts.Compile(string(t.Schema), string(t.Table), tableMapColumns(t, names))
		if c.err != nil {
			c.err = fmt.Errorf("%w: the table %s.%s changed while running (DDL), or its mapping does not fit it: %w; fix the table or the mapping, then restart",
				ErrDecode, t.Schema, t.Table, c.err)
		}
	}
	ts.mu.Lock()
	if ts.tms == nil || len(ts.tms) > 1024 {
		ts.tms = map[uint64]*tmTable{}
	}
	ts.tms[t.TableID] = c
	ts.mu.Unlock()
	return c.tbl, c.err
}

func slicesEqual(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func namesEqual(a []string, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != string(b[i]) {
			return false
		}
	}
	return true
}

// Variable reports whether a mapping of the set routes by a template over
// columns or a topic column: its topics are known only from the rows.
func (ts *TableSet) Variable() bool {
	for i := range ts.entries {
		r, _ := mapping.Resolve(ts.entries[i].cfg)
		if r.TopicColumn != "" {
			return true
		}
		topic := cmpOr(r.Topic, ts.defaultTopic)
		if t, err := mapping.ParseTemplate(topic); err == nil {
			if _, ok := t.Fixed(); !ok {
				return true
			}
		}
	}
	return false
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// FixedTopics returns the fixed topics (no placeholders, no topic column)
// of the set's mappings, sorted and distinct.
func (ts *TableSet) FixedTopics() []string {
	var out []string
	for i := range ts.entries {
		r, _ := mapping.Resolve(ts.entries[i].cfg)
		if r.TopicColumn != "" {
			continue
		}
		topic := r.Topic
		if topic == "" {
			topic = ts.defaultTopic
		}
		if t, err := mapping.ParseTemplate(topic); err == nil {
			if name, ok := t.Fixed(); ok && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}
