package binlog

import (
	"context"
	"reflect"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// readAll reads paths for table with the fast rows decoder or, with slow,
// with go-mysql's decoding only; it returns the transactions and how many
// rows events the fast path decoded.
func readAll(t *testing.T, paths []string, table string, slow bool) ([]Txn, int64) {
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
