package binlog

import (
	"context"
	"reflect"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/mapping"
)

// mappedFile holds Debezium-layout tables (testdata/mapped/mapped.sql):
// mp_char (CHAR(36) ids, a CHAR(12) key with trailing spaces, a CHAR(100)
// utf8mb4 column), mp_varchar (the same with VARCHAR ids and keys) and
// mp_enum (an ENUM column) — 200, 200 and 2 rows.
const mappedFile = "testdata/mapped/mariadb-bin.000004"

// readMapped reads table of mappedFile with the debezium preset, with the
// fast rows path or (slow) go-mysql's.
func readMapped(t testing.TB, table string, slow bool) ([]Txn, int64) {
	t.Helper()
	ts, err := NewTableSet(Config{Schema: "im", Table: table, Mapping: mapping.Config{Preset: mapping.PresetDebezium, Headers: map[string]string{"wide": "wide"}}}, "im.events")
	if err != nil {
		t.Fatal(err)
	}
	fr, err := NewFileReader([]string{mappedFile}, FileConfig{Schema: "im", Table: table, Tables: ts}, nil)
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

// The mapped fast path decodes CHAR columns (a string id, a key, a wide
// utf8mb4 CHAR with a 2-byte length) exactly as go-mysql's path does, and
// leaves an ENUM column's table to go-mysql.
func TestFastRowsMappedChar(t *testing.T) {
	for _, c := range []struct {
		table  string
		events int
		fast   bool
	}{
		{"mp_char", 200, true},
		{"mp_varchar", 200, true},
		{"mp_enum", 2, false},
	} {
		t.Run(c.table, func(t *testing.T) {
			slow, slowHits := readMapped(t, c.table, true)
			fast, hits := readMapped(t, c.table, false)
			if slowHits != 0 {
				t.Fatalf("slow read used the fast path %d times", slowHits)
			}
			n := 0
			for i := range fast {
				if len(fast[i].Events) != len(slow[i].Events) {
					t.Fatalf("txn %d: %d and %d events", i, len(fast[i].Events), len(slow[i].Events))
				}
				for k := range fast[i].Events {
					fe, se := fast[i].Events[k], slow[i].Events[k]
					if !reflect.DeepEqual(fe.Vals, se.Vals) || fe.ID != se.ID || fe.Err != se.Err || string(fe.Payload) != string(se.Payload) || fe.Pos != se.Pos {
						t.Fatalf("event %d differs from go-mysql's:\nfast %q %v\nslow %q %v", n, fe.Vals, fe.Err, se.Vals, se.Err)
					}
					n++
				}
			}
			if n != c.events {
				t.Errorf("%d events, want %d", n, c.events)
			}
			if (hits > 0) != c.fast {
				t.Errorf("fast path decoded %d rows events; want it used: %v", hits, c.fast)
			}
			if c.table == "mp_char" {
				var e Event
				for _, txn := range fast {
					if len(txn.Events) > 0 {
						e = txn.Events[0]
						break
					}
				}
				m := e.Table.Mapping
				if id := string(e.Vals[m.ID]); len(id) != 36 || string(e.Vals[m.Key[0]]) != "k0" {
					t.Fatalf("first row: id %q key %q (CHAR values as stored, trailing spaces trimmed)", id, e.Vals[m.Key[0]])
				}
			}
		})
	}
}

// BenchmarkMappedCharDecode reads mp_char (200 rows, a CHAR(36) id) of
// mappedFile with the mapped fast path and with go-mysql's; ns/event.
func BenchmarkMappedCharDecode(b *testing.B) {
	for _, table := range []string{"mp_char", "mp_varchar"} {
		for _, slow := range []bool{true, false} {
			name := table + "/fast"
			if slow {
				name = table + "/go-mysql"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					readMapped(b, table, slow)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200, "ns/event")
			})
		}
	}
}
