package binlog

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// Column names of the outbox table (schema/*.sql). Extra columns (status,
// retry_count, ...) are ignored.
const (
	ColID             = "id"
	ColEventType      = "event_type"
	ColConversationID = "conversation_id"
	ColMessageID      = "message_id"
	ColSeqNo          = "seq_no"
	ColSenderID       = "sender_id"
	ColReceiverID     = "receiver_id"
	ColPayload        = "payload"
	ColCreatedAt      = "created_at"
)

var requiredColumns = []string{ColID, ColEventType, ColConversationID, ColMessageID, ColSeqNo, ColSenderID, ColReceiverID, ColPayload, ColCreatedAt}

// columnMap holds, for each required column, its index in a row image.
type columnMap struct {
	id, eventType, conversationID, messageID, seqNo, senderID, receiverID, payload, createdAt int
	n                                                                                         int // number of columns in the row image
	// createdAtDec is the fractional-second digits of created_at
	// (DATETIME(n)/TIMESTAMP(n), from the table map's column metadata):
	// go-mysql decodes it to a time.Time (ParseTime), rendered with
	// exactly this many digits, as the server prints it.
	createdAtDec int
}

// setTable records what the table map tells about the mapped columns: the
// fractional-second digits of created_at (ColumnMeta of a DATETIME2 or
// TIMESTAMP2 column; the old DATETIME/TIMESTAMP types have none).
func (m *columnMap) setTable(t *replication.TableMapEvent) {
	m.createdAtDec = 0
	if t == nil || m.createdAt < 0 || m.createdAt >= len(t.ColumnType) || m.createdAt >= len(t.ColumnMeta) {
		return
	}
	switch t.ColumnType[m.createdAt] {
	case mysql.MYSQL_TYPE_DATETIME2, mysql.MYSQL_TYPE_TIMESTAMP2:
		m.createdAtDec = min(int(t.ColumnMeta[m.createdAt]), 6)
	}
}

// newColumnMap maps required column names to indexes. names are the
// table's columns in ordinal order.
func newColumnMap(names []string) (columnMap, error) {
	idx := make(map[string]int, len(names))
	for i, n := range names {
		idx[strings.ToLower(n)] = i
	}
	var missing []string
	get := func(c string) int {
		i, ok := idx[c]
		if !ok {
			missing = append(missing, c)
			return -1
		}
		return i
	}
	m := columnMap{
		id: get(ColID), eventType: get(ColEventType), conversationID: get(ColConversationID),
		messageID: get(ColMessageID), seqNo: get(ColSeqNo), senderID: get(ColSenderID),
		receiverID: get(ColReceiverID), payload: get(ColPayload), createdAt: get(ColCreatedAt),
		n: len(names),
	}
	if len(missing) > 0 {
		return columnMap{}, fmt.Errorf("%w: outbox table lacks column(s) %s (have %s); create it from schema/mariadb.sql or schema/mysql.sql",
			ErrDecode, strings.Join(missing, ", "), strings.Join(names, ", "))
	}
	return m, nil
}

// decodeRow turns one row image into an Event. A row image that does not
// match the table (a schema change) is an error; a value that cannot be
// decoded (NULL in an outbox column, a type or range the field cannot
// hold) leaves the Event with Err set (wrapping ErrDecode, naming the first
// such column) and every other field decoded: a poison event for the sink.
func (m *columnMap) decodeRow(row []any) (Event, error) {
	if len(row) != m.n {
		return Event{}, fmt.Errorf("%w: row has %d columns, the table has %d (schema changed under the publisher?)", ErrDecode, len(row), m.n)
	}
	var e Event
	field := func(col string, i int, f func(any) error) {
		if ferr := f(row[i]); ferr != nil && e.Err == nil {
			e.Err = fmt.Errorf("%w: column %s: %v", ErrDecode, col, ferr)
		}
	}
	field(ColID, m.id, func(v any) (err error) { e.ID, err = asUint64(v); return })
	field(ColEventType, m.eventType, func(v any) (err error) { e.EventType, err = asString(v); return })
	field(ColConversationID, m.conversationID, func(v any) error {
		if u, ok := v.(uint64); ok {
			// BIGINT UNSIGNED (signedness metadata): every value is a key.
			e.ConversationID, e.ConversationUnsigned = int64(u), true
			return nil
		}
		var err error
		e.ConversationID, err = asInt64(v)
		return err
	})
	field(ColMessageID, m.messageID, func(v any) (err error) { e.MessageID, err = asInt64(v); return })
	field(ColSeqNo, m.seqNo, func(v any) (err error) { e.SeqNo, err = asInt64(v); return })
	field(ColSenderID, m.senderID, func(v any) (err error) { e.SenderID, err = asInt64(v); return })
	field(ColReceiverID, m.receiverID, func(v any) (err error) { e.ReceiverID, err = asInt64(v); return })
	field(ColPayload, m.payload, func(v any) (err error) { e.Payload, err = asBytes(v); return })
	field(ColCreatedAt, m.createdAt, func(v any) (err error) { e.CreatedAt, err = asTimeString(v, m.createdAtDec); return })
	return e, nil
}

func asUint64(v any) (uint64, error) {
	switch x := v.(type) {
	case int64:
		// BIGINT UNSIGNED arrives as int64 when the table map carries no
		// signedness metadata; the bit pattern is the unsigned value.
		return uint64(x), nil
	case uint64:
		return x, nil
	case int32:
		return uint64(uint32(x)), nil
	case uint32:
		return uint64(x), nil
	case int8, int16, uint8, uint16, int:
		n, err := asInt64(v)
		return uint64(n), err
	case nil:
		return 0, fmt.Errorf("NULL")
	}
	return 0, fmt.Errorf("unexpected type %T", v)
}

func asInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%d does not fit a signed BIGINT", x)
		}
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case int:
		return int64(x), nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	case nil:
		return 0, fmt.Errorf("NULL")
	}
	return 0, fmt.Errorf("unexpected type %T", v)
}

func asString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case nil:
		return "", fmt.Errorf("NULL")
	}
	return "", fmt.Errorf("unexpected type %T", v)
}

func asBytes(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case string:
		return []byte(x), nil
	case nil:
		return nil, fmt.Errorf("NULL")
	}
	return nil, fmt.Errorf("unexpected type %T", v)
}

// asTimeString renders a DATETIME/TIMESTAMP value as the server prints it:
// "YYYY-MM-DD hh:mm:ss" plus dec fractional digits. go-mysql gives a
// time.Time (ParseTime; TIMESTAMP as an instant, rendered in UTC, DATETIME
// as wall-clock time in UTC) or, for zero dates and years before 1970, text.
func asTimeString(v any, dec int) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case time.Time:
		var b [32]byte
		return string(appendTime(b[:0], x.UTC(), dec)), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("unexpected type %T", v)
}

// appendTime appends t as appendDatetime does.
func appendTime(b []byte, t time.Time, dec int) []byte {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return appendDatetime(b, y, int(mo), d, h, mi, s, t.Nanosecond()/1000, dec)
}

// appendDatetime appends "YYYY-MM-DD hh:mm:ss[.f{dec}]": dec (0 to 6)
// digits of the microseconds usec, truncated as MySQL stores them. No fmt:
// this runs for every row of a drain.
func appendDatetime(b []byte, y, mo, d, h, mi, s, usec, dec int) []byte {
	pad := func(b []byte, v, width int) []byte {
		var d [10]byte
		i := len(d)
		for v > 0 || i > len(d)-width {
			i--
			d[i] = byte('0' + v%10)
			v /= 10
		}
		return append(b, d[i:]...)
	}
	b = pad(b, y, 4)
	b = append(b, '-')
	b = pad(b, mo, 2)
	b = append(b, '-')
	b = pad(b, d, 2)
	b = append(b, ' ')
	b = pad(b, h, 2)
	b = append(b, ':')
	b = pad(b, mi, 2)
	b = append(b, ':')
	b = pad(b, s, 2)
	if dec > 0 {
		dec = min(dec, 6)
		for i := dec; i < 6; i++ {
			usec /= 10
		}
		b = append(b, '.')
		b = pad(b, usec, dec)
	}
	return b
}

// genMap maps the row images of a table with a mapping other than the im
// preset to the mapping's slots (go-mysql's decoded rows; the fast path
// is rowPlan's generic plan).
type genMap struct {
	tbl *Table
	idx []int // slot → column index
	dec []int // slot → fractional digits of a DATETIME2/TIMESTAMP2 column
	n   int   // columns in the row image
}

// newGenMap maps tbl's slots to the columns names (ordinal order) of table
// map t.
func newGenMap(tbl *Table, names []string, t *replication.TableMapEvent) (genMap, error) {
	m := tbl.Mapping
	g := genMap{tbl: tbl, idx: make([]int, len(m.Cols)), dec: make([]int, len(m.Cols)), n: len(names)}
	for s, c := range m.Cols {
		g.idx[s] = -1
		for i, n := range names {
			if strings.EqualFold(n, c) {
				g.idx[s] = i
				break
			}
		}
		if g.idx[s] < 0 {
			return genMap{}, fmt.Errorf("%w: table %s lacks mapped column %s (have %s): add it back, or change the mapping and restart",
				ErrDecode, tbl, c, strings.Join(names, ", "))
		}
		if i := g.idx[s]; t != nil && i < len(t.ColumnType) && i < len(t.ColumnMeta) {
			switch t.ColumnType[i] {
			case mysql.MYSQL_TYPE_DATETIME2, mysql.MYSQL_TYPE_TIMESTAMP2:
				g.dec[s] = min(int(t.ColumnMeta[i]), 6)
			}
		}
	}
	return g, nil
}

// decodeRow turns one row image into an Event with Vals (see Event). A
// NULL in a required column (mapping.Mapping.Required) sets Err: a poison
// record.
func (g *genMap) decodeRow(row []any) (Event, error) {
	if len(row) != g.n {
		return Event{}, fmt.Errorf("%w: row of %s has %d columns, the table has %d (schema changed under the publisher?)", ErrDecode, g.tbl, len(row), g.n)
	}
	m := g.tbl.Mapping
	e := Event{Table: g.tbl, Vals: make([][]byte, len(m.Cols))}
	for s, i := range g.idx {
		v, err := textValue(row[i], g.dec[s])
		if err != nil && e.Err == nil {
			e.Err = fmt.Errorf("%w: table %s, column %s: %v", ErrDecode, g.tbl, m.Cols[s], err)
		}
		e.Vals[s] = v
	}
	if id := row[g.idx[m.ID]]; m.Kinds[m.ID] == mapping.KindInteger || isInt(id) {
		e.ID, _ = asUint64(id)
	}
	e.Payload = e.Vals[m.Payload]
	if e.Err == nil {
		e.Err = nullRequired(g.tbl, e.Vals)
	}
	return e, nil
}

// NullRequired returns the poison error (wrapping ErrDecode) of a mapped
// row with a NULL in a required column (mapping.Mapping.Required: the id,
// a key, the topic's columns, the payload) of vals (by slot), or nil: what
// the reader sets as Event.Err.
func NullRequired(t *Table, vals [][]byte) error { return nullRequired(t, vals) }

// nullRequired returns the poison error of a row with a NULL in a
// required column, or nil.
func nullRequired(t *Table, vals [][]byte) error {
	for _, s := range t.Mapping.Required {
		if vals[s] == nil {
			return fmt.Errorf("%w: table %s, column %s is NULL (%s): a row needs an id, a key, a topic and a payload",
				ErrDecode, t, t.Mapping.Cols[s], role(t.Mapping, s))
		}
	}
	return nil
}

func role(m *mapping.Mapping, s int) string {
	switch {
	case s == m.ID:
		return "the event id"
	case slices.Contains(m.Key, s):
		return "the key"
	case s == m.Payload:
		return "the payload"
	}
	return "the topic"
}

func isInt(v any) bool {
	switch v.(type) {
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, int:
		return true
	}
	return false
}

// textValue renders a value decoded by go-mysql as the fast path does:
// integers in decimal (unsigned ones arrive as uint*), strings and bytes
// as stored, times as asTimeString; nil for NULL.
func textValue(v any, dec int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		if x == nil {
			return []byte{}, nil
		}
		return x, nil
	case string:
		if x == "" {
			return []byte{}, nil
		}
		return []byte(x), nil
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	case int32:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case int8:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case int:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(nil, x, 10), nil
	case uint32:
		return strconv.AppendUint(nil, uint64(x), 10), nil
	case uint16:
		return strconv.AppendUint(nil, uint64(x), 10), nil
	case uint8:
		return strconv.AppendUint(nil, uint64(x), 10), nil
	case time.Time:
		return appendTime(nil, x.UTC(), dec), nil
	case float32, float64:
		return fmt.Appendf(nil, "%v", x), nil
	}
	return []byte(fmt.Sprint(v)), nil
}
