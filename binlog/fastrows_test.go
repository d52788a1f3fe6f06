package binlog

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// readAll reads paths for table with the fast rows decoder or, with slow,
// with go-mysql's decoding only; it returns the transactions and how many
// rows events the fast path decoded.
func readAll(t testing.TB, paths []string, table string, slow bool) ([]Txn, int64) {
	t.Helper()
	fr, err := NewFileReader(paths, FileConfig{Schema: "im", Table: table}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fr.slowRows = slow
	done := make(chan error, 1)
	go func() { done <- fr.Run(context.Background()) }()
	var txns []Txn
	for txn := range fr.Txns() {
		txns = append(txns, txn)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var hits int64
	for _, d := range fr.decoders {
		hits += d.hits.Load()
	}
	return txns, hits
}

// The fast rows decoder gives exactly the Events of go-mysql's decoding,
// on MariaDB binlogs (testdata/types/types.sql) with every column type it
// reads or skips: DATETIME(6) and TIMESTAMP(3) created_at (the latter
// written in a +09:00 session), NULLs, VARCHAR with a 2-byte length, a
// 70,000-byte MEDIUMTEXT, BIGINT UNSIGNED ids above 2^63; and it leaves to
// go-mysql what it does not read itself (a CHAR or DECIMAL column, a
// created_at before 1970 or a zero date).
func TestFastRowsMatchGoMySQL(t *testing.T) {
	types := []string{"testdata/types/mariadb-bin.000023"}
	for _, c := range []struct {
		paths  []string
		table  string
		events int
		fast   bool
	}{
		{fxFiles, "fx_outbox", 7, true},
		{types, "ty_dt6", 5, true},
		{types, "ty_ts3", 3, true},
		{types, "ty_char", 1, false},
	} {
		t.Run(c.table, func(t *testing.T) {
			slow, slowHits := readAll(t, c.paths, c.table, true)
			fast, hits := readAll(t, c.paths, c.table, false)
			if slowHits != 0 {
				t.Fatalf("slow read used the fast path %d times", slowHits)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("fast path differs from go-mysql's:\nfast %+v\nslow %+v", fast, slow)
			}
			n := 0
			for _, txn := range fast {
				n += len(txn.Events)
			}
			if n != c.events {
				t.Errorf("%d events, want %d", n, c.events)
			}
			if (hits > 0) != c.fast {
				t.Errorf("fast path decoded %d rows events; want it used: %v", hits, c.fast)
			}
		})
	}
}

// Values as the server shows them (SELECT on the server that wrote the
// file), for the rows the fast path decodes.
func TestFastRowsValues(t *testing.T) {
	txns, _ := readAll(t, []string{"testdata/types/mariadb-bin.000023"}, "ty_ts3", false)
	var got []Event
	for _, txn := range txns {
		got = append(got, txn.Events...)
	}
	if len(got) != 3 {
		t.Fatalf("%d events", len(got))
	}
	// TIMESTAMP(3) '2026-11-29 19:00:00.5' in a +09:00 session is 10:00:00.500 UTC.
	want := []struct {
		id        uint64
		sender    int64
		payload   string
		createdAt string
	}{
		{18446744073709551615, 21, `{"max":"id"}`, "2026-11-29 10:00:00.500"},
		{9223372036854775808, 22, "not json at all", "2026-11-29 10:00:00.001"},
		{1, -1, `{"neg":true}`, "1970-01-01 00:00:01.000"},
	}
	for i, w := range want {
		e := got[i]
		if e.ID != w.id || e.SenderID != w.sender || string(e.Payload) != w.payload || e.CreatedAt != w.createdAt {
			t.Errorf("event %d = id %d sender %d payload %s created_at %q; want %+v", i, e.ID, e.SenderID, e.Payload, e.CreatedAt, w)
		}
	}
}

// The fast decoder leaves MariaDB compressed rows events to go-mysql by
// reading RowsEvent's unexported "compressed" flag: a go-mysql upgrade that
// renames it must fail here, not silently send compressed bodies to the
// fast path.
func TestCompressedFlagFound(t *testing.T) {
	if compressedField < 0 {
		t.Fatal("replication.RowsEvent has no bool field \"compressed\" any more: update isCompressed in fastrows.go")
	}
	var e replication.RowsEvent
	if isCompressed(&e) {
		t.Fatal("a zero RowsEvent reads as compressed")
	}
}

// mysqlOutboxBinlog was written by MySQL 9.7.4 (binlog_row_metadata=FULL):
// 30 INSERTs of 10 rows each into schema/mysql.sql's im_event_outbox,
// payloads alternating the bench workload's shape (500 bytes, one long
// string) and an IM message snapshot (nested object, arrays, a double,
// non-ASCII text). binlog.000002.seq11.txt is `SELECT payload` of seq_no
// 11 on that server.
const mysqlOutboxBinlog = "testdata/json/binlog.000002"

// The fast path decodes MySQL outbox rows (binary JSON payload) without
// go-mysql, giving go-mysql's Events but for the payload, which is
// MySQL's own text (equal to go-mysql's as JSON).
func TestFastRowsMySQLJSON(t *testing.T) {
	slow, slowHits := readAll(t, []string{mysqlOutboxBinlog}, "im_event_outbox", true)
	fast, hits := readAll(t, []string{mysqlOutboxBinlog}, "im_event_outbox", false)
	if slowHits != 0 || hits != 30 {
		t.Fatalf("fast path decoded %d (slow read %d) rows events, want 30 (0)", hits, slowHits)
	}
	want, err := os.ReadFile(mysqlOutboxBinlog + ".seq11.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(fast) != len(slow) || len(fast) != 30 {
		t.Fatalf("%d and %d transactions, want 30", len(fast), len(slow))
	}
	n := 0
	for i := range fast {
		if len(fast[i].Events) != len(slow[i].Events) {
			t.Fatalf("txn %d: %d and %d events", i, len(fast[i].Events), len(slow[i].Events))
		}
		for k, fe := range fast[i].Events {
			se := slow[i].Events[k]
			if err := sameJSON(fe.Payload, se.Payload); err != nil {
				t.Errorf("seq %d: payload differs from go-mysql's as JSON: %v", fe.SeqNo, err)
			}
			if fe.SeqNo == 11 && !bytes.Equal(fe.Payload, want) {
				t.Errorf("seq 11: payload\n%s\nwant (SELECT payload)\n%s", fe.Payload, want)
			}
			if cap(fe.Payload) != len(fe.Payload) {
				t.Errorf("seq %d: payload capacity %d beyond its %d bytes (an append would overwrite the next row's)", fe.SeqNo, cap(fe.Payload), len(fe.Payload))
			}
			fe.Payload, se.Payload = nil, nil
			if !reflect.DeepEqual(fe, se) {
				t.Errorf("event differs from go-mysql's:\nfast %+v\nslow %+v", fe, se)
			}
			n++
		}
		fast[i].Events, slow[i].Events = nil, nil
		if !reflect.DeepEqual(fast[i], slow[i]) {
			t.Errorf("txn %d differs: %+v / %+v", i, fast[i], slow[i])
		}
	}
	if n != 300 {
		t.Errorf("%d events, want 300", n)
	}
}

// BenchmarkMySQLOutboxDecode reads mysqlOutboxBinlog (300 outbox rows)
// with the FileReader: "go-mysql" decodes the rows as before json.go
// (go-mysql's DecodeData, []any per row, its JSON rendering), "fast" with
// the fast rows decoder and appendMySQLJSON. ns/op per file; see the
// ns/event metric.
func BenchmarkMySQLOutboxDecode(b *testing.B) {
	for _, slow := range []bool{true, false} {
		name := "fast"
		if slow {
			name = "go-mysql"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				readAll(b, []string{mysqlOutboxBinlog}, "im_event_outbox", slow)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/300, "ns/event")
		})
	}
}

// A MySQL rows event the fast path leaves to go-mysql for another column
// (created_at before 1970, written by MySQL 9.7.4 in testdata/json/
// binlog.000005 with a 2026 row in the same event) still carries MySQL's
// own text of the binary JSON payload (patchJSON), as SELECT printed it.
func TestSlowRowsMySQLJSONPatched(t *testing.T) {
	txns, hits := readAll(t, []string{"testdata/json/binlog.000005"}, "im_event_outbox", false)
	if hits != 0 {
		t.Fatalf("fast path decoded %d rows events, want 0 (created_at 1969 is go-mysql's)", hits)
	}
	var got []string
	for _, txn := range txns {
		for _, e := range txn.Events {
			got = append(got, string(e.Payload)+" @ "+e.CreatedAt)
		}
	}
	want := []string{`{"a": 1e20, "b": [1, 2]} @ 1969-07-20 20:17:40`, `{"c": "<&>"} @ 2026-01-01 00:00:00`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}
