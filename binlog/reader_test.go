package binlog

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"
)

const (
	file1 = "mariadb-bin.000001"
	file2 = "mariadb-bin.000002"
	ts    = 1764410400 // 2025-11-29 10:00:00 UTC
	uuidA = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
)

var tsTime = time.Unix(ts, 0).UTC()

// Synthetic events, as go-mysql's parser produces them.

func ev(t replication.EventType, logPos uint32, e replication.Event) *replication.BinlogEvent {
	return &replication.BinlogEvent{Header: &replication.EventHeader{EventType: t, LogPos: logPos, Timestamp: ts}, Event: e}
}

// opened is p with the creation time of the test events' format
// description events.
func opened(p Position) Position {
	p.Opened = time.Unix(int64(ts), 0).UTC()
	return p
}

func rotate(next string, pos uint64) *replication.BinlogEvent {
	return ev(replication.ROTATE_EVENT, 0, &replication.RotateEvent{Position: pos, NextLogName: []byte(next)})
}

func mariaGTID(logPos uint32, seq uint64, flags byte) *replication.BinlogEvent {
	return ev(replication.MARIADB_GTID_EVENT, logPos, &replication.MariadbGTIDEvent{
		GTID: mysql.MariadbGTID{DomainID: 0, ServerID: 1, SequenceNumber: seq}, Flags: flags})
}

func mysqlGTID(logPos uint32, sid string, gno int64) *replication.BinlogEvent {
	u, err := hex.DecodeString(strings.ReplaceAll(sid, "-", ""))
	if err != nil || len(u) != 16 {
		panic("bad uuid " + sid)
	}
	return ev(replication.GTID_EVENT, logPos, &replication.GTIDEvent{SID: u, GNO: gno})
}

func query(logPos uint32, q string) *replication.BinlogEvent {
	return ev(replication.QUERY_EVENT, logPos, &replication.QueryEvent{Schema: []byte("im"), Query: []byte(q)})
}

func xid(logPos uint32) *replication.BinlogEvent {
	return ev(replication.XID_EVENT, logPos, &replication.XIDEvent{XID: 77})
}

func tableMap(id uint64, schema, table string, names []string) *replication.TableMapEvent {
	tm := &replication.TableMapEvent{TableID: id, Schema: []byte(schema), Table: []byte(table), ColumnCount: uint64(len(names))}
	for _, n := range names {
		tm.ColumnName = append(tm.ColumnName, []byte(n))
	}
	return tm
}

func tableMapEv(logPos uint32, tm *replication.TableMapEvent) *replication.BinlogEvent {
	return ev(replication.TABLE_MAP_EVENT, logPos, tm)
}

func rowsEv(t replication.EventType, logPos uint32, tm *replication.TableMapEvent, rows ...[]any) *replication.BinlogEvent {
	return ev(t, logPos, &replication.RowsEvent{TableID: tm.TableID, Table: tm, ColumnCount: tm.ColumnCount, Rows: rows})
}

func row(id int64) []any {
	return outboxRow(id, "message.created", int64(1001), id*10, id, int64(5), int64(6), []byte(`{"id":`+itoa(id)+`}`), "2026-11-29 10:00:00")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// event is the Event decoded from row(id) at pos.
func event(id int64, pos Position) Event {
	return Event{ID: uint64(id), EventType: "message.created", ConversationID: 1001, MessageID: id * 10, SeqNo: id,
		SenderID: 5, ReceiverID: 6, Payload: []byte(`{"id":` + itoa(id) + `}`), CreatedAt: "2026-11-29 10:00:00", Pos: pos}
}

var (
	outboxTM  = tableMap(33, "im", "im_event_outbox", outboxColumns)
	messageTM = tableMap(34, "im", "im_message", outboxColumns)
	otherDBTM = tableMap(35, "other", "im_event_outbox", outboxColumns)
	noNamesTM = &replication.TableMapEvent{TableID: 36, Schema: []byte("im"), Table: []byte("im_event_outbox"), ColumnCount: uint64(len(outboxColumns))}
	wideTM    = &replication.TableMapEvent{TableID: 37, Schema: []byte("im"), Table: []byte("im_event_outbox"), ColumnCount: uint64(len(outboxColumns) + 1)}
	lackingTM = tableMap(38, "im", "im_event_outbox", []string{"id", "event_type", "payload"})
)

func newState(t *testing.T, flavor, gtidSet string) *state {
	t.Helper()
	gset, err := mysql.ParseGTIDSet(flavor, gtidSet)
	if err != nil {
		t.Fatal(err)
	}
	r := &Reader{
		cfg: Config{Schema: "im", Table: "im_event_outbox"}, flavor: flavor, columns: outboxColumns,
		log: zap.NewNop(), tables: defaultTables(Config{Schema: "im", Table: "im_event_outbox"}),
	}
	return &state{r: r, pos: Position{File: file1, Pos: 4, GTIDSet: gtidSet}, gset: gset}
}

func TestStateHandle(t *testing.T) {
	const (
		flags = replication.BINLOG_MARIADB_FL_TRANSACTIONAL // an InnoDB transaction
		ddl   = replication.BINLOG_MARIADB_FL_STANDALONE | replication.BINLOG_MARIADB_FL_DDL
	)
	at := func(file string, pos uint32, gtid string) Position { return Position{File: file, Pos: pos, GTID: gtid} }
	end := func(file string, pos uint32, gtid, set string) Position {
		return Position{File: file, Pos: pos, GTID: gtid, GTIDSet: set, Time: tsTime}
	}
	cases := []struct {
		name    string
		flavor  string
		gset    string
		events  []*replication.BinlogEvent
		want    []Txn    // transactions out, in order
		wantPos Position // st.pos after the last event
		wantErr string   // ErrDecode error containing this; want then lists the txns before it
	}{
		{
			name: "MariaDB transaction with two outbox rows",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, outboxTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM, row(1), row(2)),
				xid(731),
			},
			want: []Txn{{
				Events: []Event{event(1, at(file1, 700, "0-1-5")), event(2, at(file1, 700, "0-1-5"))},
				End:    end(file1, 731, "0-1-5", "0-1-5"),
			}},
			wantPos: end(file1, 731, "0-1-5", "0-1-5"),
		},
		{
			name:   "MySQL transaction: GTID, BEGIN, rows v2, XID",
			flavor: mysql.MySQLFlavor,
			gset:   uuidA + ":1-5",
			events: []*replication.BinlogEvent{
				mysqlGTID(300, uuidA, 6),
				query(380, "BEGIN"),
				tableMapEv(450, outboxTM),
				rowsEv(replication.WRITE_ROWS_EVENTv2, 600, outboxTM, row(3)),
				xid(631),
			},
			want: []Txn{{
				Events: []Event{event(3, at(file1, 600, uuidA+":6"))},
				End:    end(file1, 631, uuidA+":6", uuidA+":1-6"),
			}},
			wantPos: end(file1, 631, uuidA+":6", uuidA+":1-6"),
		},
		{
			name:   "MySQL GTID of another server is added to the set",
			flavor: mysql.MySQLFlavor,
			gset:   uuidA + ":1-5",
			events: []*replication.BinlogEvent{
				mysqlGTID(300, "00000000-0000-0000-0000-0000000000b1", 9),
				query(380, "BEGIN"),
				xid(431),
			},
			want:    []Txn{{End: end(file1, 431, "00000000-0000-0000-0000-0000000000b1:9", "00000000-0000-0000-0000-0000000000b1:9,"+uuidA+":1-5")}},
			wantPos: end(file1, 431, "00000000-0000-0000-0000-0000000000b1:9", "00000000-0000-0000-0000-0000000000b1:9,"+uuidA+":1-5"),
		},
		{
			name: "UPDATE and DELETE rows of the outbox table are ignored",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, outboxTM),
				rowsEv(replication.UPDATE_ROWS_EVENTv1, 700, outboxTM, row(1), row(1)),
				rowsEv(replication.DELETE_ROWS_EVENTv1, 800, outboxTM, row(1)),
				rowsEv(replication.UPDATE_ROWS_EVENTv2, 900, outboxTM, row(2), row(2)),
				rowsEv(replication.DELETE_ROWS_EVENTv2, 1000, outboxTM, row(2)),
				xid(1031),
			},
			want:    []Txn{{End: end(file1, 1031, "0-1-5", "0-1-5")}},
			wantPos: end(file1, 1031, "0-1-5", "0-1-5"),
		},
		{
			name: "rows of another table or another schema are ignored",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, messageTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, messageTM, row(1)),
				tableMapEv(780, otherDBTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 900, otherDBTM, row(2)),
				xid(931),
			},
			want:    []Txn{{End: end(file1, 931, "0-1-5", "0-1-5")}},
			wantPos: end(file1, 931, "0-1-5", "0-1-5"),
		},
		{
			name: "insert and delete of the same row in one transaction: the insert is published",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, outboxTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM, row(1)),
				rowsEv(replication.DELETE_ROWS_EVENTv1, 800, outboxTM, row(1)),
				xid(831),
			},
			want: []Txn{{
				Events: []Event{event(1, at(file1, 700, "0-1-5"))},
				End:    end(file1, 831, "0-1-5", "0-1-5"),
			}},
			wantPos: end(file1, 831, "0-1-5", "0-1-5"),
		},
		{
			name: "MariaDB compressed write rows event is an insert",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, outboxTM),
				rowsEv(replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1, 700, outboxTM, row(1)),
				xid(731),
			},
			want: []Txn{{
				Events: []Event{event(1, at(file1, 700, "0-1-5"))},
				End:    end(file1, 731, "0-1-5", "0-1-5"),
			}},
			wantPos: end(file1, 731, "0-1-5", "0-1-5"),
		},
		{
			name: "MariaDB DDL: standalone GTID and a query make an empty transaction",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, ddl),
				query(520, "ALTER TABLE im_message ADD COLUMN x INT"),
			},
			want:    []Txn{{End: end(file1, 520, "0-1-5", "0-1-5")}},
			wantPos: end(file1, 520, "0-1-5", "0-1-5"),
		},
		{
			name:   "MySQL DDL: GTID and a query make an empty transaction",
			flavor: mysql.MySQLFlavor,
			gset:   uuidA + ":1-5",
			events: []*replication.BinlogEvent{
				mysqlGTID(300, uuidA, 6),
				query(420, "CREATE TABLE t (id INT)"),
			},
			want:    []Txn{{End: end(file1, 420, uuidA+":6", uuidA+":1-6")}},
			wantPos: end(file1, 420, uuidA+":6", uuidA+":1-6"),
		},
		{
			name: "DDL between transactions",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, outboxTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM, row(1)),
				xid(731),
				mariaGTID(800, 6, ddl),
				query(900, "TRUNCATE TABLE im_message"),
				mariaGTID(980, 7, flags),
				tableMapEv(1050, outboxTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 1200, outboxTM, row(2)),
				xid(1231),
			},
			want: []Txn{
				{Events: []Event{event(1, at(file1, 700, "0-1-5"))}, End: end(file1, 731, "0-1-5", "0-1-5")},
				{End: end(file1, 900, "0-1-6", "0-1-6")},
				{Events: []Event{event(2, at(file1, 1200, "0-1-7"))}, End: end(file1, 1231, "0-1-7", "0-1-7")},
			},
			wantPos: end(file1, 1231, "0-1-7", "0-1-7"),
		},
		{
			name: "Query COMMIT ends a non-transactional (MyISAM) event group",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, 0),
				tableMapEv(480, outboxTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM, row(1)),
				query(780, "COMMIT"),
			},
			want: []Txn{{
				Events: []Event{event(1, at(file1, 700, "0-1-5"))},
				End:    end(file1, 780, "0-1-5", "0-1-5"),
			}},
			wantPos: end(file1, 780, "0-1-5", "0-1-5"),
		},
		{
			name: "statements inside a transaction do not end it",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, outboxTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM, row(1)),
				query(750, "SAVEPOINT `s1`"),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 850, outboxTM, row(2)),
				xid(881),
			},
			want: []Txn{{
				Events: []Event{event(1, at(file1, 700, "0-1-5")), event(2, at(file1, 850, "0-1-5"))},
				End:    end(file1, 881, "0-1-5", "0-1-5"),
			}},
			wantPos: end(file1, 881, "0-1-5", "0-1-5"),
		},
		{
			name: "rotate between transactions moves the position to the new file",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, outboxTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM, row(1)),
				xid(731),
				rotate(file2, 4),
				ev(replication.FORMAT_DESCRIPTION_EVENT, 0, &replication.FormatDescriptionEvent{}),
				mariaGTID(300, 6, flags),
				tableMapEv(380, outboxTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 500, outboxTM, row(2)),
				xid(531),
			},
			want: []Txn{
				{Events: []Event{event(1, at(file1, 700, "0-1-5"))}, End: end(file1, 731, "0-1-5", "0-1-5")},
				{Events: []Event{event(2, at(file2, 500, "0-1-6"))}, End: opened(end(file2, 531, "0-1-6", "0-1-6"))},
			},
			wantPos: opened(end(file2, 531, "0-1-6", "0-1-6")),
		},
		{
			name: "rotate alone moves the resumable position to the start of the new file",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				xid(431),
				rotate(file2, 4),
			},
			want:    []Txn{{End: end(file1, 431, "0-1-5", "0-1-5")}},
			wantPos: end(file2, 4, "0-1-5", "0-1-5"),
		},
		{
			name: "fake rotate to the current file at connect keeps the position",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				rotate(file1, 4),
				mariaGTID(400, 5, flags),
				xid(431),
			},
			want:    []Txn{{End: end(file1, 431, "0-1-5", "0-1-5")}},
			wantPos: end(file1, 431, "0-1-5", "0-1-5"),
		},
		{
			name:   "TransactionPayloadEvent: inner events make the transaction, at the outer event's end",
			flavor: mysql.MySQLFlavor,
			gset:   uuidA + ":1-5",
			events: []*replication.BinlogEvent{
				mysqlGTID(300, uuidA, 6),
				ev(replication.TRANSACTION_PAYLOAD_EVENT, 1500, &replication.TransactionPayloadEvent{Events: []*replication.BinlogEvent{
					query(0, "BEGIN"),
					tableMapEv(0, outboxTM),
					rowsEv(replication.WRITE_ROWS_EVENTv2, 0, outboxTM, row(1), row(2)),
					xid(0),
				}}),
			},
			want: []Txn{{
				Events: []Event{event(1, at(file1, 1500, uuidA+":6")), event(2, at(file1, 1500, uuidA+":6"))},
				End:    end(file1, 1500, uuidA+":6", uuidA+":1-6"),
			}},
			wantPos: end(file1, 1500, uuidA+":6", uuidA+":1-6"),
		},
		{
			name: "table map without column names: the reader's columns are used",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, noNamesTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, noNamesTM, row(1)),
				xid(731),
			},
			want: []Txn{{
				Events: []Event{event(1, at(file1, 700, "0-1-5"))},
				End:    end(file1, 731, "0-1-5", "0-1-5"),
			}},
			wantPos: end(file1, 731, "0-1-5", "0-1-5"),
		},
		{
			name: "column count of the table map differs from the known columns",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				xid(431),
				mariaGTID(500, 6, flags),
				tableMapEv(580, wideTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, wideTM, append(row(1), int32(0))),
			},
			want:    []Txn{{End: end(file1, 431, "0-1-5", "0-1-5")}},
			wantErr: "has 15 columns but 14 names are known",
			wantPos: end(file1, 431, "0-1-5", "0-1-5"),
		},
		{
			name: "table map lacking required columns",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, lackingTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, lackingTM, []any{int64(1), "e", []byte("{}")}),
			},
			wantErr: "lacks column(s) conversation_id, message_id, seq_no, sender_id, receiver_id, created_at",
			wantPos: Position{File: file1, Pos: 4, GTIDSet: "0-1-4"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			flavor := c.flavor
			if flavor == "" {
				flavor = mysql.MariaDBFlavor
			}
			st := newState(t, flavor, c.gset)
			var got []Txn
			var err error
			for _, e := range c.events {
				var txn *Txn
				txn, err = st.handle(e, e.Header)
				if err != nil {
					break
				}
				if txn != nil {
					got = append(got, *txn)
				}
			}
			if c.wantErr != "" {
				if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("err = %v, want ErrDecode containing %q", err, c.wantErr)
				}
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("transactions:\n got %+v\nwant %+v", got, c.want)
			}
			if !reflect.DeepEqual(st.pos, c.wantPos) {
				t.Errorf("position = %+v, want %+v", st.pos, c.wantPos)
			}
		})
	}
}

// A row that cannot be decoded (NULL payload) does not stop the reader: it
// is an event with Err set (naming the column and the row event's start),
// in its transaction, with the fields that could be decoded (the id), so
// that the sink handles it as a poison record. Event.Pos is where the row
// event starts (end_log_pos minus its size).
func TestStateUndecodableRowIsPoisonEvent(t *testing.T) {
	st := newState(t, mysql.MariaDBFlavor, "0-1-4")
	rows := rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM,
		row(1), outboxRow(int64(2), "e", int64(1), int64(1), int64(1), int64(1), int64(1), nil, "x"))
	rows.Header.EventSize = 120
	var got []Txn
	for _, e := range []*replication.BinlogEvent{mariaGTID(400, 5, replication.BINLOG_MARIADB_FL_TRANSACTIONAL), tableMapEv(480, outboxTM), rows, xid(731)} {
		txn, err := st.handle(e, e.Header)
		if err != nil {
			t.Fatalf("the reader stopped on an undecodable row: %v", err)
		}
		if txn != nil {
			got = append(got, *txn)
		}
	}
	if len(got) != 1 || len(got[0].Events) != 2 {
		t.Fatalf("transactions %+v", got)
	}
	good, bad := got[0].Events[0], got[0].Events[1]
	if good.Err != nil || good.Pos != (Position{File: file1, Pos: 580, GTID: "0-1-5"}) {
		t.Errorf("good row: %+v", good)
	}
	if !errors.Is(bad.Err, ErrDecode) || !strings.Contains(bad.Err.Error(), "column payload: NULL") || !strings.Contains(bad.Err.Error(), file1+":580") {
		t.Errorf("bad row's Err = %v, want ErrDecode naming column payload and the row event at %s:580", bad.Err, file1)
	}
	if bad.ID != 2 || bad.Pos.Pos != 580 {
		t.Errorf("bad row: %+v", bad)
	}
	if got[0].End.Pos != 731 || got[0].End.GTID != "0-1-5" {
		t.Errorf("end %+v", got[0].End)
	}
}

// MySQL: a fragment's own end is the GTID event's start plus its
// transaction_length, with no lookup.
func TestStateFragmentOwnEndMySQL(t *testing.T) {
	st := newState(t, mysql.MySQLFlavor, uuidA+":1-5")
	st.chunk, st.chunkBytes = 1, 1<<20
	g := mysqlGTID(379, uuidA, 6)
	g.Header.EventSize = 79
	g.Event.(*replication.GTIDEvent).TransactionLength = 700
	var frags []Txn
	for _, e := range []*replication.BinlogEvent{g, query(420, "BEGIN"), tableMapEv(480, outboxTM),
		rowsEv(replication.WRITE_ROWS_EVENTv2, 600, outboxTM, row(1)), rowsEv(replication.WRITE_ROWS_EVENTv2, 800, outboxTM, row(2))} {
		if _, err := st.handle(e, e.Header); err != nil {
			t.Fatal(err)
		}
		frags = append(frags, st.ready...)
		st.ready = st.ready[:0]
	}
	want := Position{File: file1, Pos: 1000, GTID: uuidA + ":6", GTIDSet: uuidA + ":1-6"}
	if len(frags) != 2 || frags[0].Own() != want || frags[1].Own() != want {
		t.Fatalf("fragments %+v, want both to end at %+v", frags, want)
	}
}

// A row event of the outbox table caches its column map per table id: a
// later table map for the same id is not looked at again, a new id is.
func TestStateColumnMapPerTableID(t *testing.T) {
	st := newState(t, mysql.MariaDBFlavor, "0-1-4")
	steps := []*replication.BinlogEvent{
		mariaGTID(400, 5, 0),
		rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM, row(1)),
		xid(731),
		// After ALTER TABLE the server assigns a new table id; its table map
		// lacks columns: a decode error, not a stale map.
		mariaGTID(800, 6, 0),
		rowsEv(replication.WRITE_ROWS_EVENTv1, 900, lackingTM, []any{int64(1), "e", []byte("{}")}),
	}
	var n int
	for i, e := range steps {
		txn, err := st.handle(e, e.Header)
		if i == len(steps)-1 {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("last step: err = %v, want ErrDecode", err)
			}
			break
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if txn != nil {
			n += len(txn.Events)
		}
	}
	if n != 1 {
		t.Errorf("published %d events, want 1", n)
	}
}

// With MySQL gtid_mode=OFF every transaction starts with an
// ANONYMOUS_GTID_EVENT, which go-mysql decodes as a *GTIDEvent with a zero
// SID and GNO 0. It is not a GTID: it must not appear in the position.
func TestStateAnonymousGTID(t *testing.T) {
	st := newState(t, mysql.MySQLFlavor, "")
	steps := []*replication.BinlogEvent{
		ev(replication.ANONYMOUS_GTID_EVENT, 300, &replication.GTIDEvent{SID: make([]byte, 16), GNO: 0}),
		query(380, "BEGIN"),
		tableMapEv(450, outboxTM),
		rowsEv(replication.WRITE_ROWS_EVENTv2, 600, outboxTM, row(1)),
		xid(631),
	}
	var txn *Txn
	for _, e := range steps {
		got, err := st.handle(e, e.Header)
		if err != nil {
			t.Fatal(err)
		}
		if got != nil {
			txn = got
		}
	}
	if txn == nil || len(txn.Events) != 1 || txn.End.File != file1 || txn.End.Pos != 631 {
		t.Fatalf("txn = %+v, want one event ending at %s:631", txn, file1)
	}
	if txn.End.GTID != "" || txn.End.GTIDSet != "" {
		t.Fatalf("anonymous GTID recorded: GTID %q, GTIDSet %q",
			txn.End.GTID, txn.End.GTIDSet)
	}
}

// MySQL 8.4 tagged GTIDs (gtid_next='AUTOMATIC:tag') arrive as
// GTID_TAGGED_LOG_EVENT, decoded by go-mysql as *GtidTaggedLogEvent (which
// embeds GTIDEvent but is a different type). The GTID must still be tracked.
func TestStateTaggedGTID(t *testing.T) {
	st := newState(t, mysql.MySQLFlavor, uuidA+":1-5")
	sid, _ := hex.DecodeString(strings.ReplaceAll(uuidA, "-", ""))
	steps := []*replication.BinlogEvent{
		ev(replication.GTID_TAGGED_LOG_EVENT, 300, &replication.GtidTaggedLogEvent{GTIDEvent: replication.GTIDEvent{SID: sid, GNO: 6, Tag: mysql.NewTag("tag1")}}),
		query(380, "BEGIN"),
		tableMapEv(450, outboxTM),
		rowsEv(replication.WRITE_ROWS_EVENTv2, 600, outboxTM, row(1)),
		xid(631),
	}
	var txn *Txn
	for _, e := range steps {
		got, err := st.handle(e, e.Header)
		if err != nil {
			t.Fatal(err)
		}
		if got != nil {
			txn = got
		}
	}
	if txn == nil || len(txn.Events) != 1 || txn.End.Pos != 631 {
		t.Fatalf("txn = %+v, want one event ending at 631", txn)
	}
	if txn.End.GTID != uuidA+":tag1:6" || !strings.Contains(txn.End.GTIDSet, "tag1:6") {
		t.Fatalf("tagged GTID not tracked: GTID %q, GTIDSet %q",
			txn.End.GTID, txn.End.GTIDSet)
	}
}

// xaPrepareEv is an XA_PREPARE_LOG_EVENT for the XID (gtrid, "", 1).
func xaPrepareEv(pos uint32, gtrid string, onePhase bool) *replication.BinlogEvent {
	body := make([]byte, 13, 13+len(gtrid))
	if onePhase {
		body[0] = 1
	}
	binary.LittleEndian.PutUint32(body[1:], 1)
	binary.LittleEndian.PutUint32(body[5:], uint32(len(gtrid)))
	body = append(body, gtrid...)
	return ev(replication.XA_PREPARE_LOG_EVENT, pos, &replication.GenericEvent{Data: body})
}

// XA transactions: one without outbox rows passes as an event group ending
// at XA_PREPARE_LOG_EVENT; outbox rows inside one are held until its XA
// COMMIT (published then, in its place) or XA ROLLBACK (dropped), and the
// resumable position of what is emitted meanwhile stays before the held
// one; XA COMMIT ONE PHASE commits at the prepare event.
func TestStateXA(t *testing.T) {
	st := newState(t, mysql.MySQLFlavor, "")
	start := st.pos
	step := func(steps ...*replication.BinlogEvent) *Txn {
		t.Helper()
		var txn *Txn
		for _, e := range steps {
			got, err := st.handle(e, e.Header)
			if err != nil {
				t.Fatal(err)
			}
			if got != nil {
				txn = got
			}
		}
		return txn
	}
	txn := step(mysqlGTID(100, uuidA, 1), query(200, "XA START X'7831',X'',1"), tableMapEv(250, messageTM),
		rowsEv(replication.WRITE_ROWS_EVENTv2, 300, messageTM, row(1)), query(350, "XA END X'7831',X'',1"), xaPrepareEv(400, "x1", false))
	if txn == nil || len(txn.Events) != 0 || txn.End.Pos != 400 {
		t.Fatalf("XA without outbox rows: txn %+v", txn)
	}
	if txn = step(mysqlGTID(410, uuidA, 2), query(420, "XA COMMIT X'7831',X'',1")); txn == nil || len(txn.Events) != 0 || txn.End.Pos != 420 {
		t.Fatalf("XA COMMIT without outbox rows: txn %+v", txn)
	}
	before := st.pos
	// x2 prepared with an outbox row: nothing published, position held
	txn = step(mysqlGTID(500, uuidA, 3), query(510, "XA START X'7832',X'',1"), tableMapEv(520, outboxTM),
		rowsEv(replication.WRITE_ROWS_EVENTv2, 530, outboxTM, row(2)), query(540, "XA END X'7832',X'',1"), xaPrepareEv(550, "x2", false))
	if txn == nil || len(txn.Events) != 0 || txn.End.Pos != before.Pos {
		t.Fatalf("XA PREPARE with outbox rows: txn %+v, want no events, end %s", txn, before.FilePos())
	}
	// a regular transaction in between: published, resumable position still before x2
	txn = step(mysqlGTID(600, uuidA, 4), query(610, "BEGIN"), tableMapEv(620, outboxTM),
		rowsEv(replication.WRITE_ROWS_EVENTv2, 630, outboxTM, row(3)), xid(640))
	if txn == nil || len(txn.Events) != 1 || txn.Events[0].ID != 3 || txn.End.Pos != before.Pos || txn.End.GTIDSet != before.GTIDSet {
		t.Fatalf("transaction after a held XA: txn %+v, want row 3 ending at %+v", txn, before)
	}
	// x3 prepared with a row, then rolled back: nothing
	step(mysqlGTID(700, uuidA, 5), query(710, "XA START 'x3'"), tableMapEv(720, outboxTM),
		rowsEv(replication.WRITE_ROWS_EVENTv2, 730, outboxTM, row(4)), query(740, "XA END 'x3'"), xaPrepareEv(750, "x3", false))
	if txn = step(mysqlGTID(800, uuidA, 6), query(810, "XA ROLLBACK X'7833',X'',1")); txn == nil || len(txn.Events) != 0 || txn.End.Pos != before.Pos {
		t.Fatalf("XA ROLLBACK: txn %+v, want no events, position still held for x2", txn)
	}
	// x2 committed: its row goes out, the position moves on
	txn = step(mysqlGTID(900, uuidA, 7), query(910, "XA COMMIT X'7832',X'',1"))
	if txn == nil || len(txn.Events) != 1 || txn.Events[0].ID != 2 || txn.End.Pos != 910 || !strings.Contains(txn.End.GTIDSet, uuidA+":1-7") {
		t.Fatalf("XA COMMIT: txn %+v, want row 2 ending at 910 with GTIDs 1-7", txn)
	}
	// one phase: committed at the prepare event
	txn = step(mysqlGTID(1000, uuidA, 8), query(1010, "XA START 'x4'"), tableMapEv(1020, outboxTM),
		rowsEv(replication.WRITE_ROWS_EVENTv2, 1030, outboxTM, row(5)), query(1040, "XA END 'x4'"), xaPrepareEv(1050, "x4", true))
	if txn == nil || len(txn.Events) != 1 || txn.Events[0].ID != 5 || txn.End.Pos != 1050 {
		t.Fatalf("XA COMMIT ONE PHASE: txn %+v, want row 5 ending at 1050", txn)
	}
	if len(st.prepared) != 0 || len(st.emptyXA) != 0 || start.Pos == 0 {
		t.Fatalf("state left: prepared %v, emptyXA %v", st.prepared, st.emptyXA)
	}
}

func TestParseXAEnd(t *testing.T) {
	for _, tc := range []struct {
		q          string
		xid        string
		commit, ok bool
	}{
		{"XA COMMIT X'7831',X'',1", "7831,,1", true, true},
		{"XA ROLLBACK X'7831',X'6232',7", "7831,6232,7", false, true},
		{"xa commit 'x1'", "7831,,1", true, true},
		{"XA COMMIT 'x1','b2'", "7831,6232,1", true, true},
		{"XA COMMIT 'x1' ONE PHASE", "7831,,1", true, true},
		{"XA START 'x1'", "", false, false},
		{"XA COMMIT X'zz',X'',1", "", false, false},
		{"XA COMMIT 'x1", "", false, false},
	} {
		xid, commit, ok := parseXAEnd([]byte(tc.q))
		if xid != tc.xid || commit != tc.commit || ok != tc.ok {
			t.Errorf("parseXAEnd(%q) = %q, %v, %v; want %q, %v, %v", tc.q, xid, commit, ok, tc.xid, tc.commit, tc.ok)
		}
	}
	if _, _, err := parseXAPrepare([]byte{0, 1, 0, 0, 0, 200, 0, 0, 0, 0, 0, 0, 0}); !errors.Is(err, ErrCorruptEvent) {
		t.Errorf("parseXAPrepare of a short body: %v, want ErrCorruptEvent", err)
	}
}

// Without column names in the table map (binlog_row_metadata=MINIMAL), rows
// of the outbox table after a statement naming it are refused rather than
// mapped with the columns read at start; with names they decode.
func TestStateDDLWithoutColumnNames(t *testing.T) {
	st := newState(t, mysql.MariaDBFlavor, "")
	steps := []*replication.BinlogEvent{
		mariaGTID(100, 1, replication.BINLOG_MARIADB_FL_STANDALONE),
		query(200, "ALTER TABLE im_event_outbox MODIFY seq_no BIGINT NOT NULL FIRST"),
		mariaGTID(300, 2, 0),
		tableMapEv(350, noNamesTM),
		rowsEv(replication.WRITE_ROWS_EVENTv1, 400, noNamesTM, row(1)),
	}
	var err error
	for _, e := range steps {
		if _, err = st.handle(e, e.Header); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "binlog_row_metadata=FULL") {
		t.Fatalf("want ErrDecode naming binlog_row_metadata=FULL, got %v", err)
	}
	st = newState(t, mysql.MariaDBFlavor, "")
	steps[3], steps[4] = tableMapEv(350, outboxTM), rowsEv(replication.WRITE_ROWS_EVENTv1, 400, outboxTM, row(1))
	steps = append(steps, xid(450))
	var txn *Txn
	for _, e := range steps {
		got, err := st.handle(e, e.Header)
		if err != nil {
			t.Fatal(err)
		}
		if got != nil {
			txn = got
		}
	}
	if txn == nil || len(txn.Events) != 1 {
		t.Fatalf("with column names the row decodes: %+v", txn)
	}
}

// binlog_format or binlog_row_image changed under a running publisher: an
// outbox INSERT logged as a statement, or a row image without every column,
// stops the publisher with ErrServerConfig instead of being skipped.
func TestStateRefusesNonRowOrPartialImages(t *testing.T) {
	run := func(steps ...*replication.BinlogEvent) error {
		st := newState(t, mysql.MariaDBFlavor, "")
		for _, e := range steps {
			if _, err := st.handle(e, e.Header); err != nil {
				return err
			}
		}
		return nil
	}
	err := run(mariaGTID(100, 1, 0), query(200, "INSERT INTO im_event_outbox (event_type) VALUES ('x')"), xid(300))
	if !errors.Is(err, ErrServerConfig) || !strings.Contains(err.Error(), "binlog_format=ROW") {
		t.Fatalf("statement-logged outbox insert: got %v", err)
	}
	if err := run(mariaGTID(100, 1, 0), query(200, "INSERT INTO im_message (content) VALUES ('x')"), xid(300)); err != nil {
		t.Fatalf("a statement on another table is not ours to refuse: %v", err)
	}
	partial := rowsEv(replication.WRITE_ROWS_EVENTv1, 400, outboxTM, row(1))
	re := partial.Event.(*replication.RowsEvent)
	re.ColumnBitmap1 = make([]byte, (len(outboxColumns)+7)/8)
	for i := range re.ColumnBitmap1 {
		re.ColumnBitmap1[i] = 0xff
	}
	re.ColumnBitmap1[0] &^= 1 << 1 // column 2 missing
	err = run(mariaGTID(100, 1, 0), tableMapEv(350, outboxTM), partial, xid(450))
	if !errors.Is(err, ErrServerConfig) || !strings.Contains(err.Error(), "binlog_row_image=FULL") {
		t.Fatalf("partial row image: got %v", err)
	}
	re.ColumnBitmap1[0] |= 1 << 1
	if err := run(mariaGTID(100, 1, 0), tableMapEv(350, outboxTM), partial, xid(450)); err != nil {
		t.Fatalf("full image: %v", err)
	}
}

// A transaction larger than the chunk size goes out in Partial fragments
// whose End is the last complete transaction's end, then the final part.
func TestStateFragmentsLargeTransactions(t *testing.T) {
	st := newState(t, mysql.MariaDBFlavor, "")
	st.chunk, st.chunkBytes = 2, 1<<20
	before := st.pos
	// On MariaDB the reader looks the commit up on the source (SHOW
	// BINLOG EVENTS from the GTID event); here, in the events below.
	var looked []uint32
	st.r.findCommit = func(file string, start uint32) (uint32, error) {
		looked = append(looked, start)
		return 500, nil
	}
	gtidEv := mariaGTID(142, 7, 0)
	gtidEv.Header.EventSize = 42
	steps := []*replication.BinlogEvent{
		gtidEv, tableMapEv(150, outboxTM),
		rowsEv(replication.WRITE_ROWS_EVENTv1, 200, outboxTM, row(1)),
		rowsEv(replication.WRITE_ROWS_EVENTv1, 300, outboxTM, row(2), row(3)),
		rowsEv(replication.WRITE_ROWS_EVENTv1, 400, outboxTM, row(4)),
		xid(500),
	}
	var got []Txn
	for _, e := range steps {
		txn, err := st.handle(e, e.Header)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, st.ready...)
		st.ready = st.ready[:0]
		if txn != nil {
			got = append(got, *txn)
		}
	}
	if len(got) != 2 {
		t.Fatalf("want a fragment and the final part, got %d txns: %+v", len(got), got)
	}
	if !got[0].Partial || len(got[0].Events) != 3 || got[0].End != before {
		t.Fatalf("fragment = %+v, want 3 events ending at the previous end %v", got[0], before)
	}
	if got[1].Partial || len(got[1].Events) != 1 || got[1].End.Pos != 500 || got[1].Events[0].ID != 4 {
		t.Fatalf("final part = %+v", got[1])
	}
	// The fragment names the transaction's own end and GTID (for the
	// binlog_txn_end header and poison errors), not the previous one's.
	own := Position{File: file1, Pos: 500, GTID: "0-1-7", GTIDSet: "0-1-7"}
	if got[0].Own() != own || !reflect.DeepEqual(looked, []uint32{100}) {
		t.Fatalf("fragment's own end %+v (looked up from %v), want %+v (from the GTID event at 100)", got[0].Own(), looked, own)
	}
	if o := got[1].Own(); o.FilePos() != own.FilePos() || o.GTID != own.GTID || o.GTIDSet != own.GTIDSet {
		t.Fatalf("final part's own end %+v, want %+v", o, own)
	}
}

// A Gtid_list event (the GTID state before a MariaDB binlog file) adds the
// domains known only from history to the tracked set, and never moves a
// domain back.
func TestStateGTIDListKeepsHistory(t *testing.T) {
	st := newState(t, mysql.MariaDBFlavor, "0-1-4")
	list := ev(replication.MARIADB_GTID_LIST_EVENT, 299, &replication.MariadbGTIDListEvent{GTIDs: []mysql.MariadbGTID{
		{DomainID: 0, ServerID: 1, SequenceNumber: 2}, {DomainID: 5, ServerID: 1, SequenceNumber: 3}}})
	var got []Txn
	for _, e := range []*replication.BinlogEvent{list, mariaGTID(400, 5, replication.BINLOG_MARIADB_FL_TRANSACTIONAL), xid(500)} {
		txn, err := st.handle(e, e.Header)
		if err != nil {
			t.Fatal(err)
		}
		if txn != nil {
			got = append(got, *txn)
		}
	}
	if len(got) != 1 || got[0].End.GTIDSet != "0-1-5,5-1-3" {
		t.Fatalf("transactions %+v, want one ending with the set 0-1-5,5-1-3", got)
	}
}

// PositionAt's scan (noRows) frames transactions without decoding rows: a
// row that would not decode (here: a row image that does not match the
// table) does not fail it, and no event is produced.
func TestStateNoRows(t *testing.T) {
	st := newState(t, mysql.MariaDBFlavor, "0-1-4")
	st.r.noRows = true
	bad := rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM, []any{int64(1)})
	var got []Txn
	for _, e := range []*replication.BinlogEvent{mariaGTID(400, 5, replication.BINLOG_MARIADB_FL_TRANSACTIONAL), tableMapEv(480, outboxTM), bad, xid(731)} {
		txn, err := st.handle(e, e.Header)
		if err != nil {
			t.Fatalf("noRows decoded a row: %v", err)
		}
		if txn != nil {
			got = append(got, *txn)
		}
	}
	if len(got) != 1 || len(got[0].Events) != 0 || got[0].End.Pos != 731 {
		t.Fatalf("transactions %+v", got)
	}
}
