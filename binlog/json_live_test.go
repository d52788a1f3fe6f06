//go:build integration

package binlog

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"
)

var updateJSONCorpus = flag.Bool("update-json-corpus", false, "rewrite "+jsonCorpusFile+" from the live MySQL server")

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// liveCase is one corpus value: expr is the INSERT's payload expression
// (with ? for args, as JSON text parsed by the server).
type liveCase struct {
	name string
	expr string
	args []any
}

func liveJSONCases(tsTable string) []liveCase {
	r := rand.New(rand.NewPCG(13, 13))
	var dbl []string
	for len(dbl) < 300 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		dbl = append(dbl, fmt.Sprint(f))
	}
	for e := -330; e <= 310; e += 7 {
		dbl = append(dbl, fmt.Sprintf("%de%d", 1+r.IntN(9), e), fmt.Sprintf("-%d.%de%d", 1+r.IntN(9), r.IntN(1000), e))
	}
	deep := strings.Repeat(`{"a": [`, 50) + `"bottom"` + strings.Repeat(`]}`, 50)
	im := `{"msg_id": 918273645546372819, "conversation_id": 4400012, "seq_no": 1882, "type": "text",
	  "sender": {"id": 10001, "name": "Zoë Ångström", "avatar": "https://cdn.example.com/a/10001.png?s=64&v=3"},
	  "receiver_id": 20002, "text": "see you at <b>8</b> tonight & bring the 📦 — ok?", "mentions": [20002, 30003],
	  "attachments": [{"kind": "image", "url": "https://cdn.example.com/i/77.jpg", "w": 1280, "h": 960, "bytes": 183422}],
	  "client_ts": 1764410400123, "edited": false, "reply_to": null, "score": 0.75, "lang": "en"}`
	return []liveCase{
		{"spacing", "?", []any{`{"a":1,"b":[1,2]}`}},
		{"im_payload", "?", []any{im}},
		{"nested", "?", []any{`{"a":{"b":{"c":[1,2,[3,{"d":null}]]}},"e":[],"f":{}, "g": [[], {}, [[]]]}`}},
		{"key_order", "?", []any{`{"bb": 1, "a": 2, "ccc": 3, "b": 4, "": 5, "aa": 6}`}},
		{"unicode", "?", []any{`{"t": "hello 😀🎉 𝄞 中文 é", "family": "👨‍👩‍👧", "k😀": "v"}`}},
		{"line_separators", "?", []any{`["\u2028", "a\u2029b", "\ufeff"]`}},
		{"html", "?", []any{`{"h": "<b>&amp;</b> <script>alert('x')</script>"}`}},
		{"escapes", "?", []any{`{"q": "quote \" backslash \\ slash \/ nl \n tab \t cr \r bs \b ff \f", "k\"\n": 1}`}},
		{"control_chars", "?", []any{`"\u0000\u0001\u0002\u0007\u000b\u000e\u001a\u001f\u007f\u0080"`}},
		{"integers", "?", []any{`[0, -1, 1, 32767, 32768, -32768, -32769, 65535, 65536, 2147483647, 2147483648, -2147483648, -2147483649, 4294967295, 4294967296, 9223372036854775807, -9223372036854775808, 9223372036854775808, 18446744073709551615]`}},
		{"object_of_integers", "?", []any{`{"i16": -5, "u16": 40000, "i32": -70000, "u32": 3000000000, "i64": -9223372036854775808, "u64": 18446744073709551615}`}},
		{"doubles_text", "?", []any{`[1e20, 1e300, 1e-7, 0.1, -0.0, 3.0, 1.5, -2.5e-300, 1e15, 1e14, 1.7976931348623157e308, 5e-324, 2.2250738585072014e-308, 0.000001, 1e-15, 1e-16, 123456789012345678901, 1.0e16, 0.30000000000000004, 100.0, -1e-5]`}},
		{"doubles_cast", "JSON_ARRAY(CAST(1e20 AS DOUBLE), 1e300, 1e-7, 0.1e0, -0.0e0, 3.0e0, CAST(0.1 AS FLOAT), PI())", nil},
		{"double_scalar", "CAST(1e20 AS JSON)", nil},
		{"doubles_random", "?", []any{"[" + strings.Join(dbl, ", ") + "]"}},
		{"decimals", "JSON_ARRAY(CAST(12345678901234567890123456789.123456789 AS DECIMAL(65,30)), CAST(-0.5 AS DECIMAL(3,1)), CAST(0 AS DECIMAL(10,0)), " +
			"1.50, -0.001, 99999999999999999999999999999999999.999999999999999999999999999999, CAST(-123456789 AS DECIMAL(9,0)), " +
			"CAST(0.000000001 AS DECIMAL(30,30)), CAST(-99999999999999999999999999999999999999999999999999999999999999999 AS DECIMAL(65,0)), 0.0, 7.0)", nil},
		{"decimal_scalar", "CAST(CAST(-1234.5600 AS DECIMAL(12,4)) AS JSON)", nil},
		{"literals", "?", []any{`[true, false, null, {"t": true, "f": false, "n": null}]`}},
		{"scalar_true", "?", []any{`true`}},
		{"scalar_null", "?", []any{`null`}},
		{"scalar_string", "?", []any{`"just a string"`}},
		{"scalar_int", "?", []any{`-42`}},
		{"scalar_double", "?", []any{`-1.5`}},
		{"empty_object", "?", []any{`{}`}},
		{"empty_array", "?", []any{`[]`}},
		{"empty_string", "?", []any{`""`}},
		{"temporal", "JSON_ARRAY(CAST('2020-01-02' AS DATE), CAST('12:34:56.789' AS TIME(3)), CAST('-838:59:59' AS TIME), CAST('838:59:58.999999' AS TIME(6)), " +
			"CAST('2020-01-02 03:04:05.123456' AS DATETIME(6)), CAST('1000-01-01 00:00:00' AS DATETIME), CAST('00:00:00' AS TIME), " +
			"CAST('9999-12-31 23:59:59.999999' AS DATETIME(6)), CAST('-00:00:01.5' AS TIME(1)), CAST('1969-07-20 20:17:40' AS DATETIME))", nil},
		{"temporal_scalar_date", "CAST(CAST('2026-11-29' AS DATE) AS JSON)", nil},
		{"temporal_scalar_time", "CAST(CAST('-12:00:00.25' AS TIME(2)) AS JSON)", nil},
		{"temporal_object", "JSON_OBJECT('d', CAST('2012-03-18' AS DATE), 'dt', CAST('2012-03-18 11:30:45' AS DATETIME), 't', CAST('87:31:46.654321' AS TIME(6)))", nil},
		{"timestamp", "(SELECT JSON_OBJECT('ts', ts, 'ts0', ts0) FROM " + tsTable + ")", nil},
		{"opaque", "JSON_ARRAY(CAST(x'00ff10' AS BINARY), b'101', x'', CAST('abc' AS BINARY), UNHEX('DEADBEEF'), CAST(REPEAT('z', 100) AS BINARY), CAST(REPEAT(x'F0', 300) AS BINARY))", nil},
		{"opaque_scalar", "CAST(CAST(REPEAT('ab', 60) AS BINARY) AS JSON)", nil},
		{"geometry", "JSON_OBJECT('p', ST_GeomFromText('POINT(1 1.5)'))", nil},
		{"long_strings", "JSON_ARRAY(REPEAT('x', 127), REPEAT('y', 128), REPEAT('é', 9000), REPEAT('z', 16384))", nil},
		{"large_array", "JSON_ARRAY(REPEAT('x', 66000), 1, 70000, -70000, 4294967295, -2147483648, true, false, null, 1.5, 'end')", nil},
		{"large_object", "JSON_OBJECT('big', REPEAT('y', 66000), 'n', 1, 'i32', 100000, 'u32', 4000000000, 'neg', -100000, 't', true, 'nested', JSON_OBJECT('a', JSON_ARRAY(1, 2)))", nil},
		{"deep", "?", []any{deep}},
		{"deepest", "?", []any{strings.Repeat("[", 100) + strings.Repeat("]", 100)}},
		{"many_members", "?", []any{manyMembers(300)}},
	}
}

func manyMembers(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"key%d": [%d, "v%d", %d.5]`, i, i, i, i)
	}
	b.WriteString("}")
	return b.String()
}

// TestMySQLJSONCorpusLive inserts the corpus into an outbox table of
// schema/mysql.sql's shape on a real MySQL server, reads the binlog back
// (the binary JSON as the row events carry it) and checks that
// appendMySQLJSON renders every value byte for byte as `SELECT payload`
// returns it, and that the Reader's Events carry those bytes (the fast
// path decodes the MySQL outbox rows). -update-json-corpus records the
// values in testdata/json/corpus.json.gz for TestMySQLJSONCorpus.
//
// The server: CDC_MYSQL_ADDR, CDC_MYSQL_USER, CDC_MYSQL_PASSWORD,
// CDC_MYSQL_DB (the integration suite's variables); it needs
// binlog_format=ROW and binlog_row_metadata=FULL. On MariaDB (JSON is
// text there) the test is skipped.
func TestMySQLJSONCorpusLive(t *testing.T) {
	addr := envOr("CDC_MYSQL_ADDR", "127.0.0.1:33306")
	user, db := envOr("CDC_MYSQL_USER", "root"), envOr("CDC_MYSQL_DB", "im")
	pass, ok := os.LookupEnv("CDC_MYSQL_PASSWORD") // set and empty: no password
	if !ok {
		pass = "root" // the dev stack's
	}
	c, err := client.Connect(addr, user, pass, db)
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	defer c.Close()
	r, err := c.Execute("SELECT VERSION()")
	if err != nil {
		t.Fatal(err)
	}
	version, _ := r.GetString(0, 0)
	if strings.Contains(strings.ToLower(version), "mariadb") {
		t.Skipf("%s is MariaDB %s: JSON is text there; point CDC_MYSQL_ADDR at MySQL", addr, version)
	}
	table := fmt.Sprintf("jc_%d", time.Now().UnixNano()%1e9)
	ddl, err := os.ReadFile("../schema/mysql.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range strings.Split(string(ddl), ";") {
		if i := strings.Index(stmt, "CREATE TABLE IF NOT EXISTS im_event_outbox"); i >= 0 {
			if _, err := c.Execute(strings.Replace(stmt[i:], "im_event_outbox", table, 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tsTable := table + "_ts"
	for _, q := range []string{
		"SET time_zone = '+00:00'",
		"CREATE TABLE " + tsTable + " (ts TIMESTAMP(6) NOT NULL, ts0 TIMESTAMP NOT NULL)",
		"INSERT INTO " + tsTable + " VALUES ('2038-01-19 03:14:07.499999', '1970-01-01 00:00:01')",
	} {
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { _, _ = c.Execute("DROP TABLE IF EXISTS " + table + ", " + tsTable) })
	from, err := latest(c.Execute, FlavorMySQL)
	if err != nil {
		t.Fatal(err)
	}
	cases := liveJSONCases(tsTable)
	for i, lc := range cases {
		q := fmt.Sprintf("INSERT INTO %s (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('json', 1, %d, %d, 2, 3, %s)", table, i, i, lc.expr)
		if _, err := c.Execute(q, lc.args...); err != nil {
			t.Fatalf("%s: %v", lc.name, err)
		}
	}
	r, err = c.Execute("SELECT seq_no, payload FROM " + table + " ORDER BY seq_no")
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(cases))
	for i := range cases {
		texts[i], _ = r.GetString(i, 1)
	}

	// The binary values, as the binlog carries them, through the fast
	// path's plan for the outbox table.
	raws, hits := liveBinaries(t, addr, user, pass, db, table, from, len(cases))
	if hits == 0 {
		t.Errorf("the fast path decoded none of the MySQL outbox rows events")
	}
	var out []jsonCase
	for i, lc := range cases {
		got, err := appendMySQLJSON(nil, raws[i])
		if err != nil {
			t.Errorf("%s: %v", lc.name, err)
		} else if string(got) != texts[i] {
			t.Errorf("%s: rendered differs from SELECT payload:\n got %.300q\nwant %.300q", lc.name, got, texts[i])
		}
		sql := lc.expr
		if len(lc.args) > 0 {
			sql = fmt.Sprintf("%.200s", lc.args[0])
		}
		out = append(out, jsonCase{Name: lc.name, SQL: sql, Binary: hex.EncodeToString(raws[i]), Text: texts[i], Version: version})
	}

	// The Reader's Events carry the same bytes.
	rd := NewReader(Config{Addr: addr, User: user, Password: pass, ServerID: 7000 + uint32(time.Now().UnixNano()%1000),
		Schema: db, Table: table, PositionMode: ModeFile, HeartbeatPeriod: time.Second, ReadTimeout: 10 * time.Second, TxnBuffer: 16},
		FlavorMySQL, nil, from, zap.NewNop())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rd.Run(ctx) }()
	var evs []Event
	for txn := range rd.Txns() {
		evs = append(evs, txn.Events...)
		if len(evs) >= len(cases) {
			cancel()
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(cases) {
		t.Fatalf("reader: %d events, want %d", len(evs), len(cases))
	}
	for _, e := range evs {
		if string(e.Payload) != texts[e.SeqNo] {
			t.Errorf("reader, %s: payload differs from SELECT payload:\n got %.300q\nwant %.300q", cases[e.SeqNo].name, e.Payload, texts[e.SeqNo])
		}
	}
	if *updateJSONCorpus && !t.Failed() {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		_, _ = zw.Write(append(b, '\n'))
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(jsonCorpusFile, z.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// liveBinaries reads n outbox rows' raw payload values from the binlog at
// from, through the rows decoder's plan (so it also reports how many rows
// events the fast path decoded).
func liveBinaries(t *testing.T, addr, user, pass, db, table string, from Position, n int) ([][]byte, int64) {
	t.Helper()
	ts, err := NewTableSet(Config{Schema: db, Table: table}, "im.events")
	if err != nil {
		t.Fatal(err)
	}
	d := newRowsDecoder(ts)
	var raws [][]byte
	host, port, _ := strings.Cut(addr, ":")
	var p uint64
	fmt.Sscan(port, &p)
	s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: 7500 + uint32(time.Now().UnixNano()%1000), Flavor: FlavorMySQL, Host: host, Port: uint16(p), User: user, Password: pass,
		RowsEventDecodeFunc: func(e *replication.RowsEvent, data []byte) error {
			if err := d.decode(e, data); err != nil {
				return err
			}
			if e.Table == nil || string(e.Table.Table) != table || e.Type() != replication.EnumRowsEventTypeInsert {
				return nil
			}
			pos, err := e.DecodeHeader(data)
			if err != nil {
				return err
			}
			if !d.plan(e.Table).walkRows(data[pos:], func(vals *[9][]byte, _ int) bool {
				raws = append(raws, append([]byte(nil), vals[7]...))
				return true
			}) {
				t.Errorf("rows event at %d: the row data does not walk", e.Table.TableID)
			}
			return nil
		},
	})
	defer s.Close()
	st, err := s.StartSync(mysql.Position{Name: from.File, Pos: from.Pos})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(raws) < n {
		if _, err := st.GetEvent(ctx); err != nil {
			t.Fatalf("binlog: %v (%d of %d rows)", err, len(raws), n)
		}
	}
	return raws, d.hits.Load()
}
