package binlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// The rows decoder: go-mysql's RowsEventDecodeFunc hook for the Reader's
// syncer and the FileReader's parser. go-mysql decodes every column of
// every row of every table into a []any (boxing each value, rendering
// dates with fmt, rebuilding the table's signedness map per row): most of a
// drain's decoding time. Here:
//
//   - rows events of other tables, and UPDATE and DELETE rows of the outbox
//     table, are not decoded at all (nothing reads them);
//   - WRITE_ROWS of the outbox table are decoded straight into Events when
//     the table map carries column names and every column has a type whose
//     length is known here (integers, VARCHAR, BLOB/TEXT — MariaDB's JSON —,
//     MySQL's binary JSON, DATETIME2, TIMESTAMP2, DATE, ...): only the
//     outbox's columns are read, the others skipped by length. MySQL's
//     binary JSON payload is rendered by appendMySQLJSON (json.go) into one
//     buffer per rows event, byte-equal to what `SELECT payload` prints;
//   - anything else (CHAR/ENUM/SET/DECIMAL columns, no column names, a
//     partial row image, a MariaDB compressed rows event, binary JSON the
//     renderer rejects, or row data the fast path cannot account for
//     exactly) goes through go-mysql's own DecodeData, then decodeRow, as
//     before. When only a value other than the payload sent it there (a
//     created_at before 1970, ...), the binary JSON payloads that go-mysql
//     rendered are replaced by appendMySQLJSON's rendering (patchJSON), so
//     that both paths give the same bytes.
//
// Both paths give the same Events (TestFastRowsMatchGoMySQL). The result
// travels in RowsEvent.Rows as [][]any{{*fastRows}} so that it needs no
// shared state with the goroutine that frames transactions.
//
// Row image layout: MySQL source libbinlogevents/include/rows_event.h
// ("Rows_event" body: per row a null bitmap over the present columns, then
// the non-NULL values in column order) and the Internals manual, "Binary
// Protocol Value" lengths per MYSQL_TYPE_*.

// fastRows carries the Events decoded from one WRITE_ROWS event.
type fastRows struct{ events []Event }

// fromFast returns the Events of a rows event decoded by the fast path.
func fromFast(e *replication.RowsEvent) ([]Event, bool) {
	if len(e.Rows) != 1 || len(e.Rows[0]) != 1 {
		return nil, false
	}
	f, ok := e.Rows[0][0].(*fastRows)
	if !ok {
		return nil, false
	}
	return f.events, true
}

// rowsDecoder is the decode hook; one per Reader or FileReader run. It is
// safe for concurrent use (go-mysql may decode the events of a MySQL
// transaction payload event concurrently).
type rowsDecoder struct {
	set *TableSet

	mu    sync.Mutex
	plans map[uint64]*rowPlan // by table id

	hits atomic.Int64 // rows events decoded by the fast path (tests)
}

func newRowsDecoder(set *TableSet) *rowsDecoder {
	return &rowsDecoder{set: set, plans: map[uint64]*rowPlan{}}
}

// compressedField is the index of RowsEvent's unexported "compressed"
// flag (a MariaDB *_ROWS_COMPRESSED_EVENT_V1, whose body go-mysql inflates
// in DecodeData), or -1 if this go-mysql version has none: the fast path
// then leaves MariaDB events to go-mysql only when it cannot parse them.
var compressedField = func() int {
	f, ok := reflect.TypeFor[replication.RowsEvent]().FieldByName("compressed")
	if !ok || f.Type.Kind() != reflect.Bool {
		return -1
	}
	return f.Index[0]
}()

func isCompressed(e *replication.RowsEvent) bool {
	if compressedField < 0 {
		return false
	}
	return reflect.ValueOf(e).Elem().Field(compressedField).Bool()
}

// decode is the RowsEventDecodeFunc of the Reader's syncer.
func (d *rowsDecoder) decode(e *replication.RowsEvent, data []byte) error {
	return d.decodeWith(e, data, func(pos int) error { return e.DecodeData(pos, data) })
}

// decodeWith decodes e's header, then its rows as described above; slow
// decodes the rows from data[pos:] with go-mysql (DecodeData, or the
// FileReader's guarded variant).
func (d *rowsDecoder) decodeWith(e *replication.RowsEvent, data []byte, slow func(pos int) error) error {
	pos, err := e.DecodeHeader(data)
	if err != nil {
		return err
	}
	if e.Table == nil || e.Type() != replication.EnumRowsEventTypeInsert || d.set.entry(e.Table.Schema, e.Table.Table) < 0 {
		return nil // not read by anyone: not decoded
	}
	var p *rowPlan
	if !isCompressed(e) && allBits(e.ColumnBitmap1, int(e.ColumnCount)) {
		if p = d.plan(e.Table); p.ok {
			decode := p.decodeRows
			if p.gen != nil {
				decode = p.decodeGeneric
			}
			if evs, ok := decode(data[pos:]); ok {
				e.Rows = [][]any{{&fastRows{events: evs}}}
				d.hits.Add(1)
				return nil
			}
		}
	}
	if err := slow(pos); err != nil {
		return err
	}
	if p != nil && p.ok && p.gen == nil && p.payloadJSON {
		p.patchJSON(e, data[pos:])
	}
	return nil
}

// allBits reports whether the first n bits of bitmap are all set (a full
// row image).
func allBits(bitmap []byte, n int) bool {
	if len(bitmap) < (n+7)/8 {
		return false
	}
	for i := 0; i < n; i++ {
		if bitmap[i>>3]&(1<<(uint(i)&7)) == 0 {
			return false
		}
	}
	return true
}

// plan returns the decoding plan of a table map, reusing the previous one
// of the same table id when the table's columns are unchanged.
func (d *rowsDecoder) plan(t *replication.TableMapEvent) *rowPlan {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.plans[t.TableID]
	if p != nil && (p.tm == t || p.same(t)) {
		p.tm = t
		return p
	}
	p = newRowPlan(t, d.set)
	if len(d.plans) > 64 {
		clear(d.plans) // table ids of dropped or re-opened tables
	}
	d.plans[t.TableID] = p
	return p
}

// rowPlan says how to read the rows of one table map.
type rowPlan struct {
	tm        *replication.TableMapEvent
	types     []byte
	meta      []uint16
	names     [][]byte
	signed    []byte
	ok        bool // the fast path applies
	cm        columnMap
	unsigned  []bool
	createdTS bool // created_at is a TIMESTAMP2 (an instant), not a DATETIME2
	// payloadJSON: the payload is MySQL's binary JSON (MYSQL_TYPE_JSON),
	// rendered by appendMySQLJSON; else MariaDB's JSON text (a LONGTEXT
	// BLOB), taken as is.
	payloadJSON bool
	// cols are the outbox columns' indexes in requiredColumns order, want
	// the reverse: column index -> index in cols, or -1.
	cols [9]int
	want []int8
	// gen is set for a table whose mapping is not the im preset: want
	// then maps column indexes to the mapping's slots.
	gen *genPlan
}

// genPlan is the fast path of a mapping other than the im preset: each
// mapped column is rendered as text into one buffer per rows event (or,
// for strings, taken as is), by slot.
type genPlan struct {
	tbl   *Table
	col   []int  // slot → column index
	kind  []byte // slot → the column's MYSQL_TYPE_*
	dec   []int  // slot → fractional digits of DATETIME2/TIMESTAMP2
	uns   []bool // slot → UNSIGNED
	intID bool   // the id column is an integer: Event.ID is set
}

func (p *rowPlan) same(t *replication.TableMapEvent) bool {
	return bytes.Equal(p.types, t.ColumnType) && slices.Equal(p.meta, t.ColumnMeta) &&
		bytes.Equal(p.signed, t.SignednessBitmap) && slices.EqualFunc(p.names, t.ColumnName, bytes.Equal)
}

func newRowPlan(t *replication.TableMapEvent, set *TableSet) *rowPlan {
	p := &rowPlan{tm: t, types: bytes.Clone(t.ColumnType), meta: slices.Clone(t.ColumnMeta),
		signed: bytes.Clone(t.SignednessBitmap)}
	for _, n := range t.ColumnName {
		p.names = append(p.names, bytes.Clone(n))
	}
	n := int(t.ColumnCount)
	if len(t.ColumnName) != n || len(t.ColumnType) != n || len(t.ColumnMeta) != n {
		return p
	}
	tbl, err := set.forTableMap(t, nil)
	if err != nil {
		return p // the reader reports it
	}
	if tbl != nil && !tbl.Mapping.IM {
		p.initGeneric(t, tbl)
		return p
	}
	cm, err := newColumnMap(t.ColumnNameString())
	if err != nil {
		return p // go-mysql's path reports it
	}
	cm.setTable(t)
	p.cm = cm
	p.cols = [9]int{cm.id, cm.eventType, cm.conversationID, cm.messageID, cm.seqNo, cm.senderID, cm.receiverID, cm.payload, cm.createdAt}
	p.want = make([]int8, n)
	for i := range p.want {
		p.want[i] = -1
	}
	for k, c := range p.cols {
		p.want[c] = int8(k)
	}
	p.unsigned = make([]bool, n)
	for i, u := range t.UnsignedMap() {
		if i < n {
			p.unsigned[i] = u
		}
	}
	for i := 0; i < n; i++ {
		if _, ok := fixedLen(t.ColumnType[i], t.ColumnMeta[i]); !ok && !varLen(t.ColumnType[i], t.ColumnMeta[i]) {
			return p
		}
	}
	for _, i := range []int{cm.id, cm.conversationID, cm.messageID, cm.seqNo, cm.senderID, cm.receiverID} {
		if t.ColumnType[i] != mysql.MYSQL_TYPE_LONGLONG {
			return p
		}
	}
	if ty := t.ColumnType[cm.eventType]; ty != mysql.MYSQL_TYPE_VARCHAR && ty != mysql.MYSQL_TYPE_VAR_STRING {
		return p
	}
	switch t.ColumnType[cm.payload] {
	case mysql.MYSQL_TYPE_BLOB: // MariaDB JSON (LONGTEXT)
	case mysql.MYSQL_TYPE_JSON: // MySQL binary JSON
		p.payloadJSON = true
	default:
		return p
	}
	switch t.ColumnType[cm.createdAt] {
	case mysql.MYSQL_TYPE_DATETIME2:
	case mysql.MYSQL_TYPE_TIMESTAMP2:
		p.createdTS = true
	default:
		return p
	}
	p.ok = true
	return p
}

// fixedLen returns the stored length of a fixed-size type.
func fixedLen(tp byte, meta uint16) (int, bool) {
	switch tp {
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_YEAR:
		return 1, true
	case mysql.MYSQL_TYPE_SHORT:
		return 2, true
	case mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_TIME:
		return 3, true
	case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_TIMESTAMP:
		return 4, true
	case mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_DOUBLE, mysql.MYSQL_TYPE_DATETIME:
		return 8, true
	case mysql.MYSQL_TYPE_TIMESTAMP2:
		return 4 + int(meta+1)/2, meta <= 6
	case mysql.MYSQL_TYPE_DATETIME2:
		return 5 + int(meta+1)/2, meta <= 6
	case mysql.MYSQL_TYPE_TIME2:
		return 3 + int(meta+1)/2, meta <= 6
	}
	return 0, false
}

// varLen reports whether a type is stored as a length prefix and bytes
// that this decoder can skip: VARCHAR (1-byte prefix up to 255 bytes of
// declared length, else 2), CHAR and BINARY (the same, by charLen; not
// ENUM and SET, which share its type code), BLOB/TEXT and MySQL's JSON
// (meta = prefix bytes, 1 to 4; JSON's is 4).
func varLen(tp byte, meta uint16) bool {
	switch tp {
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		return true
	case mysql.MYSQL_TYPE_STRING:
		_, ok := charLen(meta)
		return ok
	case mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_JSON:
		return meta >= 1 && meta <= 4
	}
	return false
}

// charLen returns the declared byte length of a CHAR/BINARY column from
// its table map metadata (real type in the high byte, the length's low
// byte in the low one; lengths above 255 keep two more bits in the real
// type's bits 4-5, inverted: MySQL's Field_string::do_save_field_metadata,
// as go-mysql's decodeValue reads it); false for ENUM and SET.
func charLen(meta uint16) (int, bool) {
	if meta < 256 {
		return int(meta), true
	}
	b0, b1 := byte(meta>>8), byte(meta)
	if b0&0x30 != 0x30 {
		return int(uint16(b1) | uint16((b0&0x30)^0x30)<<4), true
	}
	if b0 == mysql.MYSQL_TYPE_ENUM || b0 == mysql.MYSQL_TYPE_SET {
		return 0, false
	}
	return int(b1), true
}

var errShort = errors.New("short row image")

// value returns the stored bytes of column i at data (for a variable
// length type, without its length prefix) and the bytes it takes.
func (p *rowPlan) value(data []byte, i int) (v []byte, n int, err error) {
	tp, meta := p.types[i], p.meta[i]
	if l, ok := fixedLen(tp, meta); ok {
		if len(data) < l {
			return nil, 0, errShort
		}
		return data[:l], l, nil
	}
	var pre, l int
	switch tp {
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		if meta < 256 {
			pre = 1
		} else {
			pre = 2
		}
	case mysql.MYSQL_TYPE_STRING:
		if n, _ := charLen(meta); n < 256 {
			pre = 1
		} else {
			pre = 2
		}
	default: // BLOB, JSON
		pre = int(meta)
	}
	if len(data) < pre {
		return nil, 0, errShort
	}
	for k := pre - 1; k >= 0; k-- {
		l = l<<8 | int(data[k])
	}
	if l > len(data)-pre {
		return nil, 0, errShort
	}
	return data[pre : pre+l], pre + l, nil
}

// walkRows reads every row image of a full-image WRITE_ROWS body and calls
// f with each row's outbox values (in requiredColumns order; a nil
// created_at is NULL) and the bytes left after the row. It returns false
// when the data does not parse into whole rows exactly, when an outbox
// column other than created_at is NULL, or when f returns false.
func (p *rowPlan) walkRows(data []byte, f func(vals *[9][]byte, rest int) bool) bool {
	n := len(p.types)
	nullBytes := (n + 7) / 8
	var vals [9][]byte // the outbox columns of one row, in requiredColumns order
	rows := 0
	for len(data) > 0 {
		if len(data) < nullBytes {
			return false
		}
		nulls := data[:nullBytes]
		pos := nullBytes
		vals = [9][]byte{}
		for i := 0; i < n; i++ {
			if nulls[i>>3]&(1<<(uint(i)&7)) != 0 {
				if k := p.want[i]; k >= 0 && k != 8 { // 8: created_at may be NULL
					return false // NULL in a NOT NULL outbox column: go-mysql's path reports it
				}
				continue
			}
			v, l, err := p.value(data[pos:], i)
			if err != nil {
				return false
			}
			if k := p.want[i]; k >= 0 {
				vals[k] = v
			}
			pos += l
		}
		data = data[pos:]
		if !f(&vals, len(data)) {
			return false
		}
		rows++
	}
	return rows > 0
}

// decodeRows decodes every row image of a full-image WRITE_ROWS body. It
// returns false (leaving the event to go-mysql) when walkRows does, or a
// value is one decodeRow would reject, or a binary JSON payload one
// appendMySQLJSON rejects. MySQL's payloads are rendered into one buffer
// shared by the event's rows, each Payload capped to its own bytes.
func (p *rowPlan) decodeRows(data []byte) ([]Event, bool) {
	var evs []Event
	var buf []byte
	size := len(data)
	ok := p.walkRows(data, func(vals *[9][]byte, rest int) bool {
		if p.payloadJSON {
			if buf == nil {
				buf = make([]byte, 0, size+size/4+64) // text is about the binary's size
			}
			start := len(buf)
			var err error
			if buf, err = appendMySQLJSON(buf, vals[7]); err != nil {
				return false
			}
			vals[7] = buf[start:len(buf):len(buf)]
		}
		e, ok := p.event(vals)
		if !ok {
			return false
		}
		if evs == nil {
			evs = make([]Event, 0, 1+rest/max(size-rest, 1))
		}
		evs = append(evs, e)
		return true
	})
	return evs, ok
}

// patchJSON replaces the binary JSON payloads that go-mysql's DecodeData
// rendered into e.Rows by appendMySQLJSON's rendering, when the row data
// can be walked here (the fast path left the event for another reason). A
// payload the renderer rejects keeps go-mysql's rendering.
func (p *rowPlan) patchJSON(e *replication.RowsEvent, data []byte) {
	var raw [][]byte
	if !p.walkRows(data, func(vals *[9][]byte, _ int) bool { raw = append(raw, vals[7]); return true }) || len(raw) != len(e.Rows) {
		return
	}
	for i, row := range e.Rows {
		if p.cm.payload >= len(row) {
			return
		}
		if out, err := appendMySQLJSON(nil, raw[i]); err == nil {
			row[p.cm.payload] = out
		}
	}
}

// event builds the Event of one row's outbox values (vals in
// requiredColumns order; a nil created_at is NULL).
func (p *rowPlan) event(vals *[9][]byte) (Event, bool) {
	var e Event
	var ok bool
	u := binary.LittleEndian.Uint64(vals[0])
	e.ID = u // BIGINT UNSIGNED or the bit pattern of a signed one, as asUint64
	e.EventType = string(vals[1])
	e.ConversationUnsigned = p.unsigned[p.cols[2]] // decodeRow: every BIGINT UNSIGNED value is a key
	for k, dst := range [...]*int64{&e.ConversationID, &e.MessageID, &e.SeqNo, &e.SenderID, &e.ReceiverID} {
		v := binary.LittleEndian.Uint64(vals[2+k])
		if k > 0 && p.unsigned[p.cols[2+k]] && v > math.MaxInt64 {
			return Event{}, false // asInt64 refuses it: let go-mysql's path report it
		}
		*dst = int64(v)
	}
	e.Payload = vals[7]
	if vals[8] != nil {
		if e.CreatedAt, ok = p.createdAt(vals[8]); !ok {
			return Event{}, false
		}
	}
	return e, true
}

// createdAt renders a DATETIME2 or TIMESTAMP2 value as asTimeString does
// go-mysql's; false for what go-mysql renders itself (zero dates, years
// before 1970), left to its path.
func (p *rowPlan) createdAt(b []byte) (string, bool) {
	var buf [32]byte
	out, ok := appendTemporal(buf[:0], b, p.cm.createdAtDec, p.createdTS)
	if !ok {
		return "", false
	}
	return string(out), true
}

// appendTemporal appends a DATETIME2 (ts false) or TIMESTAMP2 value of dec
// fractional digits as asTimeString renders go-mysql's; false for what
// go-mysql renders itself (zero dates, years before 1970).
func appendTemporal(dst, b []byte, dec int, ts bool) ([]byte, bool) {
	var frac int64
	switch {
	case dec == 1 || dec == 2:
		frac = int64(b[len(b)-1]) * 10000
	case dec == 3 || dec == 4:
		frac = int64(binary.BigEndian.Uint16(b[len(b)-2:])) * 100
	case dec == 5 || dec == 6:
		x := b[len(b)-3:]
		frac = int64(x[0])<<16 | int64(x[1])<<8 | int64(x[2])
	}
	if ts {
		sec := int64(binary.BigEndian.Uint32(b))
		if sec == 0 {
			return dst, false
		}
		return appendTime(dst, time.Unix(sec, frac*1000).UTC(), dec), true
	}
	// DATETIME2: 1 bit sign, 17 bits year*13+month, 5 day, 5 hour,
	// 6 minute, 6 second (MySQL's my_datetime_packed_from_binary).
	v := int64(b[0])<<32 | int64(b[1])<<24 | int64(b[2])<<16 | int64(b[3])<<8 | int64(b[4])
	v -= 0x8000000000
	const epoch = 107420450816 // 1970-01-01 00:00:00, as go-mysql's cut-off
	ym, day := v>>22, int(v>>17&31)
	if v < epoch || ym%13 == 0 || day == 0 {
		return dst, false
	}
	return appendDatetime(dst, int(ym/13), int(ym%13), day, int(v>>12&31), int(v>>6&63), int(v&63), int(frac), dec), true
}

// initGeneric prepares the fast path of tbl's mapping (not the im
// preset): every column skippable by length, every mapped column of a type
// rendered here (integers, VARCHAR, CHAR, BLOB/TEXT, MySQL's JSON, DATETIME2,
// TIMESTAMP2); otherwise go-mysql's path (genMap) decodes the rows.
func (p *rowPlan) initGeneric(t *replication.TableMapEvent, tbl *Table) {
	n := int(t.ColumnCount)
	m := tbl.Mapping
	if len(m.Cols) > 127 {
		return
	}
	for i := 0; i < n; i++ {
		if _, ok := fixedLen(t.ColumnType[i], t.ColumnMeta[i]); !ok && !varLen(t.ColumnType[i], t.ColumnMeta[i]) {
			return
		}
	}
	g := &genPlan{tbl: tbl, col: make([]int, len(m.Cols)), kind: make([]byte, len(m.Cols)), dec: make([]int, len(m.Cols)), uns: make([]bool, len(m.Cols))}
	p.want = make([]int8, n)
	for i := range p.want {
		p.want[i] = -1
	}
	unsigned := t.UnsignedMap()
	names := t.ColumnNameString()
	for s, c := range m.Cols {
		i := slices.IndexFunc(names, func(n string) bool { return strings.EqualFold(n, c) })
		if i < 0 {
			return
		}
		g.col[s], g.kind[s], g.uns[s] = i, t.ColumnType[i], unsigned[i]
		p.want[i] = int8(s)
		switch t.ColumnType[i] {
		case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG:
			if s == m.ID {
				g.intID = true
			}
		case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_JSON:
		case mysql.MYSQL_TYPE_DATETIME2, mysql.MYSQL_TYPE_TIMESTAMP2:
			g.dec[s] = min(int(t.ColumnMeta[i]), 6)
		default:
			return
		}
	}
	p.gen = g
	p.ok = true
}

// decodeGeneric decodes every row image of a full-image WRITE_ROWS body
// into Events with Vals (see Event). Strings are sub-slices of data, the
// other values rendered into one buffer shared by the event's rows, each
// capped to its own bytes. It returns false (leaving the event to
// go-mysql) when the data does not parse into whole rows, or a value is
// one rendered by go-mysql's path (a zero date, a year before 1970, binary
// JSON appendMySQLJSON rejects).
func (p *rowPlan) decodeGeneric(data []byte) ([]Event, bool) {
	g := p.gen
	m := g.tbl.Mapping
	ns := len(m.Cols)
	n := len(p.types)
	nullBytes := (n + 7) / 8
	size := len(data)
	var (
		evs  []Event
		buf  []byte
		pool [][]byte
	)
	for len(data) > 0 {
		if len(data) < nullBytes {
			return nil, false
		}
		nulls := data[:nullBytes]
		pos := nullBytes
		if len(pool) < ns {
			est := 1
			if len(evs) > 0 {
				est = 1 + len(data)/max((size-len(data))/len(evs), 1)
			}
			pool = make([][]byte, ns*est)
		}
		vals := pool[:ns:ns]
		pool = pool[ns:]
		var e Event
		for i := 0; i < n; i++ {
			if nulls[i>>3]&(1<<(uint(i)&7)) != 0 {
				continue
			}
			v, l, err := p.value(data[pos:], i)
			if err != nil {
				return nil, false
			}
			pos += l
			s := p.want[i]
			if s < 0 {
				continue
			}
			switch g.kind[s] {
			case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_BLOB:
				vals[s] = v[:len(v):len(v)]
				continue
			}
			if buf == nil {
				buf = make([]byte, 0, 64+size/2)
			}
			start := len(buf)
			switch g.kind[s] {
			case mysql.MYSQL_TYPE_JSON:
				if buf, err = appendMySQLJSON(buf, v); err != nil {
					return nil, false
				}
			case mysql.MYSQL_TYPE_DATETIME2, mysql.MYSQL_TYPE_TIMESTAMP2:
				var ok bool
				if buf, ok = appendTemporal(buf, v, g.dec[s], g.kind[s] == mysql.MYSQL_TYPE_TIMESTAMP2); !ok {
					return nil, false
				}
			default:
				u := intBits(v, g.uns[s])
				if int(s) == m.ID {
					e.ID = u
				}
				if g.uns[s] {
					buf = strconv.AppendUint(buf, u, 10)
				} else {
					buf = strconv.AppendInt(buf, int64(u), 10)
				}
			}
			vals[s] = buf[start:len(buf):len(buf)]
		}
		data = data[pos:]
		e.Table, e.Vals, e.Payload = g.tbl, vals, vals[m.Payload]
		e.Err = nullRequired(g.tbl, vals)
		if evs == nil {
			evs = make([]Event, 0, 1+len(data)/max(size-len(data), 1))
		}
		evs = append(evs, e)
	}
	return evs, len(evs) > 0
}

// intBits returns a little-endian integer of 1 to 8 bytes: sign-extended
// unless unsigned (as uint64: the bit pattern of an int64 when signed).
func intBits(v []byte, unsigned bool) uint64 {
	var u uint64
	for k := len(v) - 1; k >= 0; k-- {
		u = u<<8 | uint64(v[k])
	}
	if !unsigned && len(v) < 8 && v[len(v)-1]&0x80 != 0 {
		u |= ^uint64(0) << (8 * uint(len(v)))
	}
	return u
}
