package binlog

import (
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
				{Events: []Event{event(2, at(file2, 500, "0-1-6"))}, End: end(file2, 531, "0-1-6", "0-1-6")},
			},
			wantPos: end(file2, 531, "0-1-6", "0-1-6"),
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
		{
			name: "undecodable row names the row event's position",
			gset: "0-1-4",
			events: []*replication.BinlogEvent{
				mariaGTID(400, 5, flags),
				tableMapEv(480, outboxTM),
				rowsEv(replication.WRITE_ROWS_EVENTv1, 700, outboxTM, outboxRow(int64(1), "e", int64(1), int64(1), int64(1), int64(1), int64(1), nil, "x")),
			},
			wantErr: "column payload: NULL (row event at " + file1 + ":700)",
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

// XA transactions: one without outbox rows passes as an event group ending
// at XA_PREPARE_LOG_EVENT; outbox rows inside one are refused with
// ErrDecode rather than published before the XA outcome is known.
func TestStateXA(t *testing.T) {
	xaPrepare := func(pos uint32) *replication.BinlogEvent {
		return ev(replication.XA_PREPARE_LOG_EVENT, pos, &replication.GenericEvent{})
	}
	run := func(steps ...*replication.BinlogEvent) (*Txn, error) {
		st := newState(t, mysql.MySQLFlavor, "")
		var txn *Txn
		for _, e := range steps {
			got, err := st.handle(e, e.Header)
			if err != nil {
				return txn, err
			}
			if got != nil {
				txn = got
			}
		}
		return txn, nil
	}
	txn, err := run(mysqlGTID(100, uuidA, 1), query(200, "XA START 'x1'"), tableMapEv(250, messageTM),
		rowsEv(replication.WRITE_ROWS_EVENTv2, 300, messageTM, row(1)), query(350, "XA END 'x1'"), xaPrepare(400))
	if err != nil || txn == nil || len(txn.Events) != 0 || txn.End.Pos != 400 {
		t.Fatalf("XA without outbox rows: txn %+v, err %v", txn, err)
	}
	_, err = run(mysqlGTID(100, uuidA, 1), query(200, "XA START 'x2'"), tableMapEv(250, outboxTM),
		rowsEv(replication.WRITE_ROWS_EVENTv2, 300, outboxTM, row(1)), query(350, "XA END 'x2'"), xaPrepare(400))
	if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "XA") {
		t.Fatalf("XA with outbox rows: want ErrDecode naming XA, got %v", err)
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
	steps := []*replication.BinlogEvent{
		mariaGTID(100, 7, 0), tableMapEv(150, outboxTM),
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
}
