package verify

import (
	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/mapping"
)

// Target is one outbox table as verify reads it, for the continuous audit
// (package audit) that reuses verify's reading of the mapping: the id
// column, the ordering header and the payload column.
type Target struct {
	lay layout
	// Table is "schema.table"; Quoted is `schema`.`table`.
	Table, Quoted string
	// IDColumn is the quoted id column; IntID reports an integer id
	// column (a range and a bitmap; string ids have no range).
	IDColumn string
	IntID    bool
	// Order is the header holding the ordering column's value ("" none).
	Order string
	// Payload is the quoted payload column when the record value is its
	// bytes unchanged (envelope raw), "" otherwise (a CloudEvents envelope
	// renders it: the payload is not compared).
	Payload string
}

// NewTarget reads t's mapping.
func NewTarget(t *binlog.Table) Target {
	l := newLayout(t)
	tg := Target{lay: l, Table: t.String(), Quoted: l.quoted, IDColumn: l.id(), IntID: l.intID, Order: l.order}
	if m := t.Mapping; m.Payload >= 0 && !m.CloudEvents {
		tg.Payload = "`" + m.Name(m.Payload) + "`"
	}
	return tg
}

// Topics returns the topics the rows of ids lo … hi went to (the mapping's
// fixed topic, or a template's or topic column's renderings over those
// rows), as verify reads them.
func (tg Target) Topics(conn *binlog.Conn, lo, hi uint64) ([]string, error) {
	return topicsOf(conn, tg.lay, lo, hi)
}

// Mapping is the table's compiled mapping.
func (tg Target) Mapping() *mapping.Mapping { return tg.lay.m }

// ErrNoTopics: no row of the range names a topic (an empty range under a
// topic template or column).
var ErrNoTopics = errNoTopics
