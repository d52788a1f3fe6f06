package binlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// fakeExec answers queries from a table; a missing query is a parse error
// (ERROR 1064), as SHOW BINARY LOG STATUS is on servers before MySQL 8.2.
type fakeExec map[string]*mysql.Result

func (f fakeExec) exec(q string, _ ...any) (*mysql.Result, error) {
	if r, ok := f[q]; ok {
		return r, nil
	}
	return nil, &mysql.MyError{Code: codeParse, Message: "You have an error in your SQL syntax near '" + q + "'"}
}

// list is listEvents over the canned results, as streamEvents reads them.
func (f fakeExec) list(q string, each func(eventRow) bool) error {
	r, err := f.exec(q)
	if err != nil {
		return err
	}
	for i := range r.RowNumber() {
		var ev eventRow
		ev.Pos, _ = r.GetUintByName(i, "Pos")
		ev.End, _ = r.GetUintByName(i, "End_log_pos")
		ev.Type, _ = r.GetStringByName(i, "Event_type")
		info, _ := r.GetStringByName(i, "Info")
		ev.Info = []byte(info)
		if each(ev) {
			break
		}
	}
	return nil
}

func result(t *testing.T, names []string, rows ...[]any) *mysql.Result {
	t.Helper()
	rs, err := mysql.BuildSimpleTextResultset(names, rows)
	if err != nil {
		t.Fatal(err)
	}
	// As the client does after reading a result: decode the rows, index the names.
	for _, rd := range rs.RowDatas {
		vals, err := rd.Parse(rs.Fields, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs.Values = append(rs.Values, vals)
	}
	for i, n := range names {
		rs.FieldNames[n] = i
	}
	return &mysql.Result{Resultset: rs}
}

// SHOW BINARY LOG STATUS (MySQL 8.2+, required from 8.4; MariaDB 10.5.2+)
// with SHOW MASTER STATUS as the fallback for older servers, and the GTID
// set from Executed_Gtid_Set (MySQL, newlines removed) or
// @@gtid_binlog_pos (MariaDB).
func TestLatestFlavors(t *testing.T) {
	const a, b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4f22fb58-82db-22f2-af44-d91bb0530673"
	cols := []string{"File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB", "Executed_Gtid_Set"}
	status := result(t, cols, []any{"binlog.000012", uint64(157), "", "", a + ":1-100,\n" + b + ":1-5"})
	mysql84 := fakeExec{"SHOW BINARY LOG STATUS": status}
	mysql80 := fakeExec{"SHOW MASTER STATUS": status}
	mariadb := fakeExec{
		"SHOW BINARY LOG STATUS":   result(t, cols[:4], []any{"mariadb-bin.000003", uint64(360), "", ""}),
		"SELECT @@gtid_binlog_pos": result(t, []string{"@@gtid_binlog_pos"}, []any{"0-1-1,7-1-1"}),
	}
	for name, c := range map[string]struct {
		exec   fakeExec
		flavor string
		want   Position
	}{
		"MySQL 8.4":        {mysql84, FlavorMySQL, Position{File: "binlog.000012", Pos: 157, GTIDSet: a + ":1-100," + b + ":1-5"}},
		"MySQL 8.0 (5.7)":  {mysql80, FlavorMySQL, Position{File: "binlog.000012", Pos: 157, GTIDSet: a + ":1-100," + b + ":1-5"}},
		"MariaDB 10.5.2+":  {mariadb, FlavorMariaDB, Position{File: "mariadb-bin.000003", Pos: 360, GTIDSet: "0-1-1,7-1-1"}},
		"no binlog at all": {fakeExec{"SHOW MASTER STATUS": result(t, cols)}, FlavorMySQL, Position{}},
	} {
		got, err := latest(c.exec.exec, c.flavor)
		if c.want.File == "" {
			if !errors.Is(err, ErrServerConfig) {
				t.Errorf("%s: err = %v, want ErrServerConfig (log_bin)", name, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: latest = %+v, %v; want %+v", name, got, err, c.want)
		}
	}
	// Another error than a parse error is not retried with the old syntax.
	denied := func(string, ...any) (*mysql.Result, error) {
		return nil, &mysql.MyError{Code: codeSpecificAccess, Message: "Access denied; you need the BINLOG MONITOR privilege"}
	}
	if _, err := latest(denied, FlavorMariaDB); err == nil || !strings.Contains(err.Error(), "BINLOG MONITOR") {
		t.Errorf("access denied: %v", err)
	}
}

// MySQL 8 binary JSON (fixtures written by MySQL 8.0.22 and 9.0.1) is
// rendered by appendMySQLJSON as MySQL prints it: keys in MySQL's order,
// ", " and ": " separators, DOUBLE, DECIMAL and opaque values in MySQL's
// text form. (go-mysql's RenderJSONAsMySQLText, the fallback, printed
// these compactly: {"age":24,...}.)
func TestBinaryJSONAsText(t *testing.T) {
	want := map[string][]string{
		"json.binlog.000001": {`{"age": 24, "data": "xxxxxxxxxx", "name": "Joe"}`, `{"age": 32, "data": "yyyyyyyyyy", "name": "Sue"}`},
		"json-opaque.binlog": {`{"a": "base64:type15:VQ=="}`, `{"b": "2012-03-18"}`, `{"c": "2012-03-18 11:30:45.000000"}`,
			`{"c": "87:31:46.654321"}`, `{"d": 123.456}`, `{"e": 9.00}`, `{"e": [0, 1, true, false]}`, `{"e": null}`},
	}
	for file, texts := range want {
		p := (&fileRun{r: &FileReader{slowRows: true}, flavor: FlavorMySQL}).newParser()
		var got []string
		p.SetRowsEventDecodeFunc(func(e *replication.RowsEvent, data []byte) error {
			pos, err := e.DecodeHeader(data)
			if err != nil || e.Type() != replication.EnumRowsEventTypeInsert || !allBits(e.ColumnBitmap1, int(e.ColumnCount)) {
				return err
			}
			rp := &rowPlan{types: e.Table.ColumnType, meta: e.Table.ColumnMeta}
			data = data[pos:]
			for len(data) > 0 {
				at := (len(rp.types) + 7) / 8
				for i, tp := range rp.types {
					if data[i/8]&(1<<(i%8)) != 0 {
						continue
					}
					v, n, err := rp.value(data[at:], i)
					if err != nil {
						return err
					}
					if tp == mysql.MYSQL_TYPE_JSON {
						s, err := appendMySQLJSON(nil, v)
						if err != nil {
							return err
						}
						got = append(got, string(s))
					}
					at += n
				}
				data = data[at:]
			}
			return nil
		})
		if err := p.ParseFile("testdata/binlogs/"+file, 0, func(*replication.BinlogEvent) error { return nil }); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(got) < len(texts) {
			t.Fatalf("%s: JSON values %q, want at least %q", file, got, texts)
		}
		for i, w := range texts {
			if got[i] != w {
				t.Errorf("%s: JSON value %d = %s, want %s", file, i, got[i], w)
			}
		}
	}
}

// rawEvent frames a v4 event body with its header and CRC32.
func rawEvent(typ replication.EventType, body []byte) []byte {
	b := make([]byte, 19, 19+len(body)+4)
	binary.LittleEndian.PutUint32(b[0:], 1764410400)
	b[4] = byte(typ)
	binary.LittleEndian.PutUint32(b[5:], 1)
	binary.LittleEndian.PutUint32(b[9:], uint32(19+len(body)+4))
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// tableMapBody: columns BIGINT UNSIGNED id, TIMESTAMP ts, DATETIME(6) dt;
// with signedness, the optional metadata marks id UNSIGNED (as
// binlog_row_metadata=MINIMAL or FULL on MySQL 8 does).
func tableMapBody(id byte, signedness bool) []byte {
	b := []byte{id, 0, 0, 0, 0, 0, 1, 0, 2, 'i', 'm', 0, 1, 't', 0, 3,
		mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_TIMESTAMP2, mysql.MYSQL_TYPE_DATETIME2,
		2, 0, 6, // metadata: TIMESTAMP fsp 0, DATETIME fsp 6
		0} // null bitmap
	if signedness {
		b = append(b, 1, 1, 0x80) // SIGNEDNESS: the first numeric column is unsigned
	}
	return b
}

func rowsBody(tableID byte, id uint64, ts uint32, dt time.Time, micros uint32) []byte {
	b := []byte{tableID, 0, 0, 0, 0, 0, 1, 0, 2, 0, 3, 0x07, 0x00}
	b = binary.LittleEndian.AppendUint64(b, id)
	b = binary.BigEndian.AppendUint32(b, ts)
	ym := uint64(dt.Year()*13 + int(dt.Month()))
	packed := ym<<22 | uint64(dt.Day())<<17 | uint64(dt.Hour())<<12 | uint64(dt.Minute())<<6 | uint64(dt.Second())
	packed += 0x8000000000
	b = append(b, byte(packed>>32), byte(packed>>24), byte(packed>>16), byte(packed>>8), byte(packed))
	return append(b, byte(micros>>16), byte(micros>>8), byte(micros))
}

// decodeRow parses one crafted table map and rows event with the parser
// the FileReader uses (the Reader's BinlogSyncer gets the same options).
func decodeCrafted(t *testing.T, p *replication.BinlogParser, tableID byte, signedness bool, id uint64) []any {
	t.Helper()
	// A MySQL 8.0.26 file sets the parser's format description (CRC32).
	if err := p.ParseFile("testdata/binlogs/mysql_type_bit.000001", 0, func(*replication.BinlogEvent) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(rawEvent(replication.TABLE_MAP_EVENT, tableMapBody(tableID, signedness))); err != nil {
		t.Fatal(err)
	}
	e, err := p.Parse(rawEvent(replication.WRITE_ROWS_EVENTv2,
		rowsBody(tableID, id, 1764410400, time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), 123456)))
	if err != nil {
		t.Fatal(err)
	}
	return e.Event.(*replication.RowsEvent).Rows[0]
}

// TIMESTAMP columns render as UTC text whatever the host's time zone
// (an instant: go-mysql would use time.Local); DATETIME(6) as the stored
// wall-clock text, all six digits kept; the digits come from the table
// map's column metadata.
func TestTimestampUTCWhateverTZ(t *testing.T) {
	saved := time.Local
	t.Cleanup(func() { time.Local = saved })
	for _, zone := range []*time.Location{time.UTC, time.FixedZone("UTC+9", 9*3600), time.FixedZone("UTC-7", -7*3600)} {
		time.Local = zone // as TZ=Asia/Tokyo etc. would set it
		p := (&fileRun{r: &FileReader{slowRows: true}, flavor: FlavorMySQL}).newParser()
		row := decodeCrafted(t, p, 60, true, 1)
		if s, err := asTimeString(row[1], 0); err != nil || s != "2025-11-29 10:00:00" {
			t.Errorf("TZ %s: TIMESTAMP = %q, %v, want 2025-11-29 10:00:00 (UTC)", zone, s, err)
		}
		var m columnMap
		m.createdAt = 2
		m.setTable(craftedTable(t, p, 60))
		if m.createdAtDec != 6 {
			t.Errorf("created_at digits from the table map = %d, want 6", m.createdAtDec)
		}
		if s, err := asTimeString(row[2], m.createdAtDec); err != nil || s != "2026-11-29 10:00:00.123456" {
			t.Errorf("TZ %s: created_at = %q, %v, want 2026-11-29 10:00:00.123456", zone, s, err)
		}
	}
}

// craftedTable returns the table map decodeCrafted registered under id.
func craftedTable(t *testing.T, p *replication.BinlogParser, id byte) *replication.TableMapEvent {
	t.Helper()
	e, err := p.Parse(rawEvent(replication.TABLE_MAP_EVENT, tableMapBody(id, true)))
	if err != nil {
		t.Fatal(err)
	}
	return e.Event.(*replication.TableMapEvent)
}

// created_at renders exactly as the server prints DATETIME(n): n digits,
// trailing zeros kept, digits beyond n truncated; zero dates and years
// before 1970 come from go-mysql as text and pass through.
func TestAsTimeString(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 120_000_000, time.UTC)
	for _, c := range []struct {
		v    any
		dec  int
		want string
	}{
		{at, 0, "2026-01-02 03:04:05"},
		{at, 1, "2026-01-02 03:04:05.1"},
		{at, 3, "2026-01-02 03:04:05.120"},
		{at, 6, "2026-01-02 03:04:05.120000"},
		{time.Date(2026, 12, 31, 23, 59, 59, 999_999_000, time.UTC), 6, "2026-12-31 23:59:59.999999"},
		{time.Date(2026, 12, 31, 23, 59, 59, 999_999_000, time.UTC), 2, "2026-12-31 23:59:59.99"},
		{time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), 0, "9999-12-31 00:00:00"},
		{time.Date(2026, 1, 2, 12, 0, 0, 0, time.FixedZone("UTC+9", 9*3600)), 0, "2026-01-02 03:00:00"},
		{"0000-00-00 00:00:00", 0, "0000-00-00 00:00:00"},
		{"1969-07-20 20:17:40.000000", 6, "1969-07-20 20:17:40.000000"},
		{nil, 0, ""},
	} {
		if got, err := asTimeString(c.v, c.dec); err != nil || got != c.want {
			t.Errorf("asTimeString(%v, %d) = %q, %v; want %q", c.v, c.dec, got, err, c.want)
		}
	}
}

// BIGINT UNSIGNED ids above 2^63: go-mysql returns uint64 when the table
// map says UNSIGNED (signedness metadata) and the int64 bit pattern when
// it does not; both decode to the same id.
func TestBigintUnsignedAbove2to63(t *testing.T) {
	for _, id := range []uint64{1, math.MaxInt64, 1 << 63, math.MaxUint64 - 1, math.MaxUint64} {
		for _, signedness := range []bool{true, false} {
			row := decodeCrafted(t, (&fileRun{r: &FileReader{slowRows: true}, flavor: FlavorMySQL}).newParser(), 70, signedness, id)
			got, err := asUint64(row[0])
			if err != nil || got != id {
				t.Errorf("id %d (signedness metadata %v): go-mysql gave %T %v, decoded %d, %v", id, signedness, row[0], row[0], got, err)
			}
		}
	}
	// A signed column (conversation_id etc.) refuses a value that does not fit.
	if _, err := asInt64(uint64(1 << 63)); err == nil {
		t.Error("asInt64 accepted 2^63")
	}
}

// MySQL GTID sets with several source UUIDs: a transaction of each source
// extends that source's interval, a new source is added, and the stored
// set compares (Contain) as MySQL's does.
func TestStateMySQLMultiSourceGTIDSet(t *testing.T) {
	const b = "4f22fb58-82db-22f2-af44-d91bb0530673"
	const c = "5a33ac69-93ec-33a3-b055-ea2cc1641784"
	st := newState(t, mysql.MySQLFlavor, uuidA+":1-100,"+b+":1-5")
	var ends []Position
	for i, g := range []struct {
		sid string
		gno int64
	}{{b, 6}, {uuidA, 101}, {c, 1}, {uuidA, 103}} {
		base := uint32(1000 * (i + 1))
		for _, e := range []*replication.BinlogEvent{mysqlGTID(base, g.sid, g.gno), query(base+80, "BEGIN"),
			tableMapEv(base+150, outboxTM), rowsEv(replication.WRITE_ROWS_EVENTv2, base+300, outboxTM, row(int64(i+1))), xid(base + 331)} {
			txn, err := st.handle(e, e.Header)
			if err != nil {
				t.Fatal(err)
			}
			if txn != nil {
				ends = append(ends, txn.End)
			}
		}
	}
	want := []string{
		uuidA + ":1-100," + b + ":1-6",
		uuidA + ":1-101," + b + ":1-6",
		uuidA + ":1-101," + b + ":1-6," + c + ":1",
		uuidA + ":1-101:103," + b + ":1-6," + c + ":1",
	}
	if len(ends) != len(want) {
		t.Fatalf("%d transactions, want %d", len(ends), len(want))
	}
	for i, w := range want {
		if ends[i].GTIDSet != w {
			t.Errorf("after transaction %d: set %s, want %s", i+1, ends[i].GTIDSet, w)
		}
	}
	if ends[1].GTID != uuidA+":101" {
		t.Errorf("GTID %q", ends[1].GTID)
	}
	parse := func(s string) mysql.GTIDSet {
		g, err := mysql.ParseGTIDSet(mysql.MySQLFlavor, s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	last := parse(ends[3].GTIDSet)
	if !last.Contain(parse(uuidA+":1-100,"+b+":1-5")) || !last.Contain(parse(ends[2].GTIDSet)) {
		t.Error("the last set does not contain the earlier ones")
	}
	if last.Contain(parse(uuidA + ":102")) {
		t.Error("the gap uuidA:102 is contained")
	}
	if parse(ends[0].GTIDSet).Contain(last) {
		t.Error("an earlier set contains the last one")
	}
	// The stored text parses back to an equal set (checkpoint round trip).
	if !parse(last.String()).Equal(last) {
		t.Errorf("round trip of %s", last)
	}
}

// Resuming by GTID after a server restart: the server's fake rotate
// (log_pos 0) names the file it found the GTID in, which may be a newer
// file than the checkpoint's; positions continue from there. A fake
// rotate to the checkpoint's own file (file mode) keeps the position.
func TestStateFakeRotateOnGTIDResume(t *testing.T) {
	st := newState(t, mysql.MariaDBFlavor, "0-1-4")
	st.pos = Position{File: file1, Pos: 731, GTIDSet: "0-1-4"} // the checkpoint
	for _, e := range []*replication.BinlogEvent{rotate(file2, 4), ev(replication.FORMAT_DESCRIPTION_EVENT, 0, &replication.FormatDescriptionEvent{})} {
		if _, err := st.handle(e, e.Header); err != nil {
			t.Fatal(err)
		}
	}
	if st.pos.File != file2 || st.pos.Pos != 4 || st.pos.GTIDSet != "0-1-4" {
		t.Fatalf("after the fake rotate: %+v", st.pos)
	}
	var txn *Txn
	for _, e := range []*replication.BinlogEvent{mariaGTID(400, 5, replication.BINLOG_MARIADB_FL_TRANSACTIONAL), tableMapEv(480, outboxTM),
		rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM, row(1)), xid(731)} {
		got, err := st.handle(e, e.Header)
		if err != nil {
			t.Fatal(err)
		}
		if got != nil {
			txn = got
		}
	}
	if txn == nil || txn.End.File != file2 || txn.End.Pos != 731 || txn.End.GTIDSet != "0-1-5" || txn.Events[0].Pos.File != file2 {
		t.Fatalf("transaction after the fake rotate: %+v", txn)
	}
	// Multi-domain MariaDB set: a domain-2 transaction updates only domain 2.
	st2 := newState(t, mysql.MariaDBFlavor, "0-1-4,2-1-9")
	g := ev(replication.MARIADB_GTID_EVENT, 400, &replication.MariadbGTIDEvent{GTID: mysql.MariadbGTID{DomainID: 2, ServerID: 1, SequenceNumber: 10}})
	for _, e := range []*replication.BinlogEvent{g, xid(500)} {
		if txn, _ = st2.handle(e, e.Header); txn != nil && txn.End.GTIDSet != "0-1-4,2-1-10" {
			t.Fatalf("multi-domain set %s, want 0-1-4,2-1-10", txn.End.GTIDSet)
		}
	}
}

// MySQL's GTID set at a file:pos: the file's Previous_gtids (several
// UUIDs, newline-separated as SHOW BINLOG EVENTS prints them) plus the GTIDs
// of the transactions starting before pos, tagged ones and compressed ones
// (whose embedded events are listed at the payload's end) included.
func TestMySQLGTIDSetAt(t *testing.T) {
	const a, b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4f22fb58-82db-22f2-af44-d91bb0530673"
	cols := []string{"Log_name", "Pos", "Event_type", "Server_id", "End_log_pos", "Info"}
	ev := func(pos uint64, typ string, end uint64, info string) []any {
		return []any{"binlog.000007", pos, typ, uint64(1), end, info}
	}
	gtid := func(g string) string { return "SET @@SESSION.GTID_NEXT= '" + g + "'" }
	rows := [][]any{
		ev(4, "Format_desc", 127, "Server ver: 9.7.4, Binlog ver: 4"),
		ev(127, "Previous_gtids", 198, a+":1-10,\n"+b+":1-3"),
		ev(198, "Gtid", 277, gtid(a+":11")),
		ev(277, "Query", 352, "BEGIN"),
		ev(352, "Xid", 383, "COMMIT /* xid=1 */"),
		ev(383, "Gtid_tagged_log_event", 467, gtid(a+":tenant_a:1")),
		ev(467, "Query", 560, "CREATE TABLE t (a INT)"),
		ev(560, "Gtid", 637, gtid(a+":12")),
		ev(637, "Transaction_payload", 807, "compression='ZSTD', decompressed_size=184 bytes"),
		ev(807, "Query", 807, "BEGIN"),
		ev(807, "Write_rows", 807, "table_id: 269 flags: STMT_END_F"),
		ev(807, "Xid", 807, "COMMIT /* xid=2 */"),
		ev(807, "Gtid", 884, gtid(a+":13")),
		ev(884, "Query", 959, "BEGIN"),
		ev(959, "Xid", 990, "COMMIT /* xid=3 */"),
	}
	exec := fakeExec{fmt.Sprintf("SHOW BINLOG EVENTS IN 'binlog.000007' FROM 4 LIMIT %d", commitLookupBatch): result(t, cols, rows...)}
	for _, c := range []struct {
		pos  uint32
		want string
	}{
		{4, ""},
		{198, a + ":1-10," + b + ":1-3"},
		{383, a + ":1-11," + b + ":1-3"},
		{560, a + ":1-11:tenant_a:1," + b + ":1-3"},
		{807, a + ":1-12:tenant_a:1," + b + ":1-3"}, // after the compressed transaction
		{990, a + ":1-13:tenant_a:1," + b + ":1-3"}, // the end of the file
	} {
		got, err := mysqlGTIDSetAt(exec.list, Position{File: "binlog.000007", Pos: c.pos})
		if err != nil {
			t.Fatalf("at %d: %v", c.pos, err)
		}
		want, _ := mysql.ParseMysqlGTIDSet(c.want)
		if g, _ := mysql.ParseMysqlGTIDSet(got); (c.want == "" && got != "") || (c.want != "" && !g.Equal(want)) {
			t.Errorf("at %d: %q, want %q", c.pos, got, c.want)
		}
	}
	bad := fakeExec{fmt.Sprintf("SHOW BINLOG EVENTS IN 'binlog.000007' FROM 4 LIMIT %d", commitLookupBatch): result(t, cols, ev(4, "Gtid", 83, "SET @@SESSION.GTID_NEXT= garbled"))}
	if _, err := mysqlGTIDSetAt(bad.list, Position{File: "binlog.000007", Pos: 990}); err == nil || !strings.Contains(err.Error(), "no GTID in") {
		t.Fatalf("a Gtid event without a GTID: %v", err)
	}
}

// The commit of a transaction listed by MariaDB 11.4+ (binlog_legacy_event_pos
// OFF: End_log_pos 0 inside the transaction), over more than one page of
// SHOW BINLOG EVENTS: pages go on from the last event's Pos, and the
// commit's own End_log_pos is the answer.
func TestFindCommitZeroEndLogPos(t *testing.T) {
	cols := []string{"Log_name", "Pos", "Event_type", "Server_id", "End_log_pos", "Info"}
	ev := func(pos uint64, typ string, end uint64, info string) []any {
		return []any{"mariadb-bin.000004", pos, typ, uint64(1), end, info}
	}
	const n = commitLookupBatch + 500 // rows events: the commit is on the second page
	rows := [][]any{ev(344, "Gtid", 4096, "BEGIN GTID 0-1-21"), ev(4096, "Annotate_rows", 0, "INSERT ..."), ev(18882, "Table_map", 0, "table_id: 30")}
	at := uint64(19147)
	for range n {
		rows = append(rows, ev(at, "Write_rows_v1", 0, "table_id: 30"))
		at += 8166
	}
	commit := at
	rows = append(rows, ev(commit, "Xid", commit+31, "COMMIT /* xid=2755 */"), ev(commit+31, "Rotate", commit+80, "mariadb-bin.000005;pos=4"))
	exec := fakeExec{}
	q := "SHOW BINLOG EVENTS IN 'mariadb-bin.000004' FROM %d LIMIT %d"
	for i := 0; i < len(rows); i++ {
		pos := rows[i][1].(uint64)
		exec[fmt.Sprintf(q, pos, commitLookupBatch)] = result(t, cols, rows[i:min(i+commitLookupBatch, len(rows))]...)
	}
	got, err := findCommit(exec.list, "mariadb-bin.000004", 344)
	if err != nil || got != uint32(commit+31) {
		t.Fatalf("findCommit = %d, %v; want %d", got, err, commit+31)
	}
}

// MariaDB 11.4+ events inside a transaction carry end_log_pos 0 in the
// stream; fillPos gives each the previous event's end plus its size, and
// leaves artificial events and events outside a transaction alone.
func TestFillPos(t *testing.T) {
	st := &state{}
	h := func(logPos, size uint32, flags uint16) *replication.EventHeader {
		return &replication.EventHeader{LogPos: logPos, EventSize: size, Flags: flags}
	}
	fake := h(0, 40, replication.LOG_EVENT_ARTIFICIAL_F) // the rotate a dump starts with
	st.fillPos(fake)
	gtid := h(4096, 3752, 0)
	st.fillPos(gtid)
	st.inTxn = true
	annotate, tm, rows := h(0, 14786, 0), h(0, 265, 0), h(0, 8166, 0)
	for _, x := range []*replication.EventHeader{annotate, tm, rows} {
		st.fillPos(x)
	}
	artificial := h(0, 30, replication.LOG_EVENT_ARTIFICIAL_F)
	st.fillPos(artificial)
	xid := h(27209+31, 31, 0)
	st.fillPos(xid)
	if fake.LogPos != 0 || annotate.LogPos != 18882 || tm.LogPos != 19147 || rows.LogPos != 27313 || artificial.LogPos != 0 || st.next != xid.LogPos {
		t.Fatalf("positions %d %d %d %d %d, next %d", fake.LogPos, annotate.LogPos, tm.LogPos, rows.LogPos, artificial.LogPos, st.next)
	}
	if eventStart(rows) != 19147 {
		t.Fatalf("rows event starts at %d, want 19147", eventStart(rows))
	}
}
