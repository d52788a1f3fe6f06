//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/go-mysql-org/go-mysql/client"
)

// Cases of the reader that only MySQL produces (binlog compression, tagged
// GTIDs, partial JSON updates, invisible columns and primary keys), and XA
// transactions, on every flavour.

// binlogEventTypes returns the Event_type column of SHOW BINLOG EVENTS from
// from up to the end of its file (at most limit events).
func (e *env) binlogEventTypes(from string, pos uint32, limit int) map[string]int {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	r, err := c.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT %d", from, pos, limit))
	if err != nil {
		e.t.Fatal(err)
	}
	types := map[string]int{}
	for i := 0; i < r.RowNumber(); i++ {
		s, _ := r.GetStringByName(i, "Event_type")
		types[s]++
	}
	return types
}

// killAndResume produces plan in the background on w, SIGKILLs the
// publisher once some of it is out, starts it again and checks that every
// event arrived in order. It returns the report and the new publisher.
func (e *env) killAndResume(p *publisher, w *workload.Writer, plan *workload.Plan, each func(i int) error) (verify.Report, *publisher) {
	e.t.Helper()
	done := make(chan error, 1)
	go func() {
		for i, txn := range plan.Txns {
			if each != nil {
				if err := each(i); err != nil {
					done <- err
					return
				}
			}
			if err := w.Txn(txn, false); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	e.waitPublished(plan, plan.Total/4, time.Minute)
	p.kill(e.t)
	if e.checkpoint() == nil {
		e.t.Fatal("no checkpoint before the kill")
	}
	p = e.start()
	if err := <-done; err != nil {
		e.t.Fatal(err)
	}
	rep := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(e.t, rep)
	return rep, p
}

// binlog_transaction_compression=ON (MySQL 8.0.20+): each transaction is
// one TRANSACTION_PAYLOAD_EVENT holding its events zstd-compressed. Events
// arrive in order across a SIGKILL and resume, by file:pos and by GTID.
func TestMySQLTransactionCompression(t *testing.T) {
	onlyMySQL(t, "binlog_transaction_compression is MySQL's")
	for _, mode := range []string{"file", "gtid"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			e.positionMode = mode
			start := e.binlogEnd()
			p := e.start()
			w := e.writer()
			if err := w.Exec("SET SESSION binlog_transaction_compression = ON"); err != nil {
				t.Fatal(err)
			}
			plan := workload.Generate(1301, 0, 50, 4000, 1, 100, 200)
			rep, _ := e.killAndResume(p, w, plan, nil)
			if n := e.binlogEventTypes(start.File, start.Pos, 200)["Transaction_payload"]; n == 0 {
				t.Fatalf("no Transaction_payload event in %s after %d: compression did not take effect", start.File, start.Pos)
			}
			if cp := e.checkpoint(); mode == "gtid" && (cp == nil || cp.GTIDSet == "") {
				t.Fatalf("gtid mode: checkpoint %+v has no GTID set", cp)
			}
			t.Logf("%s; duplicates after SIGKILL: %d", rep.String(), rep.Duplicates)
		})
	}
}

// Tagged GTIDs (MySQL 8.4+: SET gtid_next='AUTOMATIC:<tag>' gives
// uuid:1-N:tenant_a:1-M): transactions of a tag and untagged ones mixed,
// GTID position mode, SIGKILL and resume from the stored set; the stored
// set carries the tag, and `checkpoint set gtid:<set with a tag>` is taken
// and resumed from.
func TestMySQLTaggedGTID(t *testing.T) {
	onlyMySQL(t, "GTID tags are MySQL 8.4+'s")
	e := newEnv(t)
	e.positionMode = "gtid"
	p := e.start()
	w := e.writer()
	plan := workload.Generate(1401, 0, 50, 4000, 1, 80, 200)
	rep, p := e.killAndResume(p, w, plan, func(i int) error {
		next := "AUTOMATIC"
		if i%2 == 0 {
			next = "AUTOMATIC:tenant_a"
		}
		return w.Exec("SET SESSION gtid_next = '" + next + "'")
	})
	t.Logf("%s; duplicates after SIGKILL: %d", rep.String(), rep.Duplicates)
	end := e.binlogEnd()
	if !strings.Contains(end.GTIDSet, ":tenant_a:") {
		t.Fatalf("server GTID set %q has no tenant_a tag: the tags were not used", end.GTIDSet)
	}
	deadline := time.Now().Add(30 * time.Second)
	for cp := e.checkpoint(); cp == nil || cp.GTIDSet != end.GTIDSet; cp = e.checkpoint() {
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %+v never reached the server's GTID set %q", cp, end.GTIDSet)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// stop, set the checkpoint to the server's set by hand, write more, resume
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	if out, code := e.cli(nil, "checkpoint", "set", "gtid:"+end.GTIDSet); code != 0 {
		t.Fatalf("checkpoint set gtid:%s: exit %d\n%s", end.GTIDSet, code, out)
	}
	if cp := e.checkpoint(); cp == nil || cp.GTIDSet != end.GTIDSet {
		t.Fatalf("checkpoint after set: %+v, want gtid set %q", cp, end.GTIDSet)
	}
	more := workload.Generate(1402, 1000, 20, 500, 1, 20, 100)
	if err := w.Exec("SET SESSION gtid_next = 'AUTOMATIC:tenant_a'"); err != nil {
		t.Fatal(err)
	}
	if err := produce(w, more); err != nil {
		t.Fatal(err)
	}
	e.start()
	for k, v := range more.Last {
		plan.Last[k] = v
	}
	rep = e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
}

// binlog_row_value_options=PARTIAL_JSON: UPDATEs of the outbox table's JSON
// column through JSON_SET / JSON_REPLACE / JSON_REMOVE are logged as
// PARTIAL_UPDATE_ROWS_EVENT (binary diffs). The publisher ignores updates;
// they must not disturb the INSERTs around them, which arrive with their
// payload as inserted.
func TestMySQLPartialJSON(t *testing.T) {
	onlyMySQL(t, "binlog_row_value_options is MySQL's")
	e := newEnv(t)
	start := e.binlogEnd()
	e.start()
	w := e.writer()
	if err := w.Exec("SET SESSION binlog_row_value_options = 'PARTIAL_JSON'"); err != nil {
		t.Fatal(err)
	}
	plan := workload.Generate(1501, 0, 20, 2000, 1, 40, 150)
	for i, txn := range plan.Txns {
		if err := w.Txn(txn, false); err != nil {
			t.Fatal(err)
		}
		// every other transaction: partial updates of earlier rows, then
		// inserts in the same transaction
		if i%2 == 0 && i > 0 {
			for _, q := range []string{
				"BEGIN",
				fmt.Sprintf("UPDATE `%s` SET payload = JSON_SET(payload, '$.status', 'read') ORDER BY id DESC LIMIT 5", e.outbox),
				fmt.Sprintf("UPDATE `%s` SET payload = JSON_REPLACE(payload, '$.seq_no', -1) ORDER BY id DESC LIMIT 2", e.outbox),
				fmt.Sprintf("UPDATE `%s` SET payload = JSON_REMOVE(payload, '$.status'), status = 'SENT' ORDER BY id DESC LIMIT 1", e.outbox),
				"COMMIT",
			} {
				if err := w.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}
	}
	types := e.binlogEventTypes(start.File, start.Pos, 100000)
	if types["Update_rows_partial"] == 0 {
		t.Fatalf("no Update_rows_partial event logged (event types %v): PARTIAL_JSON did not take effect", types)
	}
	rep := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
	if rep.Records != plan.Total || rep.Duplicates != 0 {
		t.Fatalf("%d records, %d duplicates; want %d, 0 (updates published?)", rep.Records, rep.Duplicates, plan.Total)
	}
	// payloads as inserted (JSON-equal: the partial updates came later)
	for _, r := range mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)) {
		var conv int64
		fmt.Sscan(r.Key, &conv)
		jsonEqual(t, r.Value, workload.Payload(conv, r.SeqNo, 150))
	}
}

func jsonEqual(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("payload %.80q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("payload %.120s, want %.120s", got, want)
	}
}

// An outbox table with an invisible column in the middle and a generated
// invisible primary key (sql_generate_invisible_primary_key=ON adds
// my_row_id BIGINT UNSIGNED AUTO_INCREMENT INVISIBLE PRIMARY KEY as the
// first column): the binlog carries both, the columns are mapped by name,
// and every event arrives with the right fields.
func TestMySQLInvisibleColumns(t *testing.T) {
	onlyMySQL(t, "invisible columns and GIPK are MySQL 8.0.23+/8.0.30+'s")
	e := newEnv(t)
	c := e.sql()
	defer c.Close()
	for _, q := range []string{
		"DROP TABLE `" + e.outbox + "`",
		"SET SESSION sql_generate_invisible_primary_key = ON",
		"CREATE TABLE `" + e.outbox + "` (" +
			"id BIGINT NOT NULL, " +
			"trace_id VARCHAR(36) NOT NULL DEFAULT 'none' INVISIBLE, " +
			"event_type VARCHAR(32) NOT NULL, conversation_id BIGINT NOT NULL, message_id BIGINT NOT NULL, " +
			"seq_no BIGINT NOT NULL, sender_id BIGINT NOT NULL, receiver_id BIGINT NOT NULL, payload JSON NOT NULL, " +
			"status VARCHAR(16) NOT NULL DEFAULT 'PENDING', created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, " +
			"INDEX idx_id (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
		"SET SESSION sql_generate_invisible_primary_key = OFF",
	} {
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// information_schema shows the GIPK only when asked to (MySQL 8.0.30+)
	if _, err := c.Execute("SET SESSION show_gipk_in_create_table_and_information_schema = ON"); err != nil {
		t.Fatal(err)
	}
	r, err := c.Execute("SELECT COLUMN_NAME, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", mysqlDB, e.outbox)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := r.GetString(0, 0)
	extra, _ := r.GetString(0, 1)
	if first != "my_row_id" || !strings.Contains(strings.ToUpper(extra), "INVISIBLE") {
		t.Fatalf("first column %q (%s): no generated invisible primary key", first, extra)
	}
	e.start()
	// id has no AUTO_INCREMENT here (a unique NOT NULL key would be the
	// implicit primary key, and no GIPK generated): number the rows ourselves
	plan := workload.Generate(1601, 0, 20, 1000, 1, 30, 120)
	next := int64(1)
	for _, txn := range plan.Txns {
		var b strings.Builder
		var args []any
		fmt.Fprintf(&b, "INSERT INTO `%s` (id, trace_id, event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ", e.outbox)
		for i, row := range txn {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?,?,?,?,?,?,?)")
			args = append(args, next, fmt.Sprintf("trace-%d", next), "message.created", row.ConversationID,
				row.ConversationID*1_000_000+row.SeqNo, row.SeqNo, row.SenderID, row.ReceiverID, string(row.Payload))
			next++
		}
		if _, err := c.Execute(b.String(), args...); err != nil {
			t.Fatal(err)
		}
	}
	rep := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
	for _, rec := range mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)) {
		var conv int64
		fmt.Sscan(rec.Key, &conv)
		if rec.Headers["message_id"] != fmt.Sprint(conv*1_000_000+rec.SeqNo) || rec.Headers["event_type"] != "message.created" {
			t.Fatalf("record %s/%d: headers %v (columns mapped wrongly?)", rec.Key, rec.SeqNo, rec.Headers)
		}
		jsonEqual(t, rec.Value, workload.Payload(conv, rec.SeqNo, 120))
	}
}

// xaRow inserts one outbox row (conversation conv, seq_no 1) on c.
func (e *env) xaRow(c *client.Conn, conv int64) {
	e.t.Helper()
	q := fmt.Sprintf("INSERT INTO `%s` (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('message.created', ?, ?, 1, 1, 2, ?)", e.outbox)
	if _, err := c.Execute(q, conv, conv*1_000_000+1, fmt.Sprintf(`{"conv": %d}`, conv)); err != nil {
		e.t.Fatal(err)
	}
}

// XA transactions (XA START … XA END; XA PREPARE; later XA COMMIT or XA
// ROLLBACK; from the same session: MariaDB keeps a prepared XA transaction
// attached to it until it disconnects): rows are published at XA COMMIT, never
// at XA PREPARE, and not at all after XA ROLLBACK. A publisher killed while
// a prepared one is pending resumes from before it (its checkpoint does not
// pass the prepare), so the rows are still published at the XA COMMIT.
// XA COMMIT … ONE PHASE publishes at once.
func TestXATransactions(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	c := e.sql()
	defer c.Close()
	exec := func(c *client.Conn, qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := c.Execute(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	// a failed run must not leave a prepared XA transaction behind (MariaDB
	// keeps it, detached, after the session ends)
	t.Cleanup(func() {
		if c, err := client.Connect(mysqlAddr, mysqlUser, mysqlPass, mysqlDB); err == nil {
			for _, x := range []string{"cdc_xa1_", "cdc_xa2_"} {
				_, _ = c.Execute("XA ROLLBACK '" + x + runID + "'")
			}
			c.Close()
		}
	})
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	seen := map[string]int{}
	// waitKey polls until conversation key has a record, then checks
	// that none of absent has one.
	waitKey := func(key string, absent ...string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for seen[key] == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("conversation %s not published within a minute", key)
			}
			recs, err := cons.Poll(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				seen[r.Key]++
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, a := range absent {
			if seen[a] != 0 {
				t.Fatalf("conversation %s published (%d records), want none yet", a, seen[a])
			}
		}
	}
	before := e.binlogEnd()
	exec(c, "XA START 'cdc_xa1_"+runID+"'")
	e.xaRow(c, 1)
	exec(c, "XA END 'cdc_xa1_"+runID+"'", "XA PREPARE 'cdc_xa1_"+runID+"'")
	// a regular transaction after the prepare goes out; the XA one does not
	w := e.writer()
	if err := w.Txn([]workload.Row{{ConversationID: 2, SeqNo: 1, SenderID: 1, ReceiverID: 2, Payload: []byte(`{"conv": 2}`)}}, false); err != nil {
		t.Fatal(err)
	}
	waitKey("2", "1")
	// the checkpoint stays before the prepared transaction
	time.Sleep(time.Second) // two checkpoint intervals: a wrong checkpoint would be written by now
	cp := e.checkpoint()
	if cp == nil {
		t.Fatal("no checkpoint")
	}
	if e.positionMode == "" && (cp.File != before.File || cp.Pos > before.Pos) {
		t.Fatalf("checkpoint %s:%d passed the prepared XA transaction (prepared after %s:%d)", cp.File, cp.Pos, before.File, before.Pos)
	}
	p.kill(t)
	e.start()
	exec(c, "XA COMMIT 'cdc_xa1_"+runID+"'")
	waitKey("1")

	// prepared, then rolled back: nothing, while what follows goes out
	exec(c, "XA START 'cdc_xa2_"+runID+"'")
	e.xaRow(c, 3)
	exec(c, "XA END 'cdc_xa2_"+runID+"'", "XA PREPARE 'cdc_xa2_"+runID+"'")
	exec(c, "XA ROLLBACK 'cdc_xa2_"+runID+"'")
	exec(c, "XA START 'cdc_xa3_"+runID+"'")
	e.xaRow(c, 4)
	exec(c, "XA END 'cdc_xa3_"+runID+"'", "XA COMMIT 'cdc_xa3_"+runID+"' ONE PHASE")
	waitKey("4", "3")
	if seen["1"] < 1 || seen["2"] < 1 {
		t.Fatalf("records per conversation: %v", seen)
	}
	t.Logf("records per conversation: %v", seen)
}
