//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/redis/go-redis/v9"
)

// A Debezium-layout table (CHAR(36) UUID ids: the mapped fast rows path's
// CHAR columns, key aggregateid, topic
// outbox.event.{aggregatetype}, ordering column seq published as seq_no)
// through the operations: verify checks it by its string ids and finds the
// dead-lettered row (a NULL aggregateid) missing; once the row is fixed,
// dead-letter republish reads it by its UUID through the mapping and
// publishes it to the mapping's topic, and verify passes; replay publishes
// a range through the same mapping as run (same key, value and headers).
func TestMappingDebeziumOps(t *testing.T) {
	e := newEnv(t)
	table := "dbo_" + e.name
	agg := "ops" + runID
	topic := "outbox.event." + agg
	createTopic(t, topic, partitions)
	dlq := e.topic + ".dlq"
	createTopic(t, dlq, 1)
	e.exec("CREATE TABLE " + table + ` (
		id CHAR(36) NOT NULL PRIMARY KEY,
		aggregatetype VARCHAR(255) NOT NULL,
		aggregateid VARCHAR(255) NULL,
		type CHAR(32) NOT NULL,
		payload JSON,
		seq BIGINT NOT NULL)`)
	t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + table) })
	e.outbox = table
	e.sourceExtra = `  mapping:
    preset: debezium
    order: seq
    headers: {seq_no: seq, type: type}
`
	t.Setenv("CDC_OUTBOX_KAFKA_ON_POISON", "dead-letter")
	t.Setenv("CDC_OUTBOX_KAFKA_DEAD_LETTER_TOPIC", dlq)
	p := e.start()
	const keys, per = 10, 10
	for s := 1; s <= per; s++ {
		var rows []string
		for k := 1; k <= keys; k++ {
			rows = append(rows, fmt.Sprintf("(UUID(), '%s', 'k%d', 'OrderCreated', '{\"k\": %d, \"s\": %d}', %d)", agg, k, k, s, s))
		}
		e.exec("INSERT INTO " + table + " (id, aggregatetype, aggregateid, type, payload, seq) VALUES " + strings.Join(rows, ","))
	}
	poison := "poison-" + runID
	e.exec("INSERT INTO " + table + " (id, aggregatetype, aggregateid, type, payload, seq) VALUES ('" + poison + "', '" + agg + "', NULL, 'OrderCreated', '{\"k\": 1}', 11)")
	live := pollTopic(t, topic, keys*per, 2*time.Minute)
	dead := pollTopic(t, dlq, 1, time.Minute)
	if dead[0].EventID != poison || dead[0].Headers[sink.HeaderDLQTable] != mysqlDB+"."+table {
		t.Fatalf("dead letter headers %v", dead[0].Headers)
	}
	env := []string{"CDC_OUTBOX_KAFKA_ON_POISON=dead-letter", "CDC_OUTBOX_KAFKA_DEAD_LETTER_TOPIC=" + dlq}

	code, out := e.runVerify()
	if code != 1 || !strings.Contains(out, "missing            1") || !strings.Contains(out, "missing event ids (first 1): "+poison) ||
		!strings.Contains(out, "every row of") || !strings.Contains(out, "order by seq_no") || !strings.Contains(out, "topics "+topic) {
		t.Fatalf("verify with the dead-lettered row: exit %d\n%s", code, out)
	}

	// Fixed in the table, the row is republished through the mapping.
	e.exec("UPDATE " + table + " SET aggregateid = 'k1' WHERE id = '" + poison + "'")
	if out, code := e.republish(env, "--event-id", poison); code != 0 || !strings.Contains(out, "republished to "+topic+" (key k1") {
		t.Fatalf("republish: exit %d\n%s", code, out)
	}
	again := pollTopic(t, topic, keys*per+1, time.Minute)
	r := again[len(again)-1]
	for _, rec := range again {
		if rec.EventID == poison {
			r = rec
		}
	}
	if r.EventID != poison || r.Key != "k1" || r.Headers["type"] != "OrderCreated" || r.Headers["id"] != poison || r.Headers["seq_no"] != "11" ||
		r.Headers[sink.HeaderRepublishedFrom] != "dead-letter" {
		t.Fatalf("republished record key %s headers %v", r.Key, r.Headers)
	}
	if code, out := e.runVerify(); code != 0 || !strings.Contains(out, "result: OK") || !strings.Contains(out, "missing            0") {
		t.Fatalf("verify after the republish: exit %d\n%s", code, out)
	}

	// replay of the range after the first transaction, through the mapping.
	from := pos(t, live[0].Headers[router.HeaderTxnEnd])
	to := from
	for _, r := range live {
		if end := pos(t, r.Headers[router.HeaderTxnEnd]); binlog.ComparePos(end, from) < 0 {
			from = end
		} else if binlog.ComparePos(end, to) > 0 {
			to = end
		}
	}
	var want []verify.Record
	for _, r := range live {
		if end := pos(t, r.Headers[router.HeaderTxnEnd]); binlog.ComparePos(end, from) > 0 && binlog.ComparePos(end, to) <= 0 {
			want = append(want, r)
		}
	}
	if len(want) != keys*(per-1) {
		t.Fatalf("%d records in the replay range, want %d", len(want), keys*(per-1))
	}
	rt := e.replayTopic(".replay")
	res := e.replay("--from", from.FilePos(), "--to", to.FilePos(), "--topic", rt)
	if res.code != 0 {
		t.Fatalf("replay exit %d", res.code)
	}
	checkReplayed(t, rt, want, replayID(t, res))
	if serverFlavor() == "mariadb" {
		if code, out := e.runPrune("--older-than", "7d"); code != 1 || !strings.Contains(out, "id column id is not an integer") {
			t.Fatalf("prune of a string-id table: exit %d\n%s", code, out)
		}
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// The second seed's outbox table (aggregate_type, aggregate_id, payload
// TEXT, create_time, status) with the generic preset, topic
// outbox.{aggregate_type} over two aggregate types: verify finds both
// topics from the rows and checks the integer ids.
func TestMappingGenericVerify(t *testing.T) {
	e := newEnv(t)
	table := "gev_" + e.name
	aggs := []string{"gvo" + runID, "gvu" + runID}
	for _, a := range aggs {
		createTopic(t, "outbox."+a, partitions)
	}
	e.exec("CREATE TABLE " + table + ` (
		id BIGINT AUTO_INCREMENT PRIMARY KEY,
		aggregate_type VARCHAR(64) NOT NULL,
		aggregate_id VARCHAR(64) NOT NULL,
		payload TEXT NOT NULL,
		create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
		status VARCHAR(16) NOT NULL DEFAULT 'PENDING')`)
	t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + table) })
	e.outbox = table
	e.sourceExtra = `  mapping: {preset: generic}
`
	p := e.start()
	for i := 1; i <= 40; i++ {
		e.exec(fmt.Sprintf("INSERT INTO %s (aggregate_type, aggregate_id, payload) VALUES ('%s', 'a-%d', 'event %d')", table, aggs[i%2], i%7, i))
	}
	pollTopic(t, "outbox."+aggs[0], 20, 2*time.Minute)
	pollTopic(t, "outbox."+aggs[1], 20, time.Minute)
	code, out := e.runVerify()
	if code != 0 || !strings.Contains(out, "result: OK") || !strings.Contains(out, "rows in table      40") ||
		!strings.Contains(out, "topics outbox."+aggs[0]+", outbox."+aggs[1]) || !strings.Contains(out, "order not checked") {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	e.exec(fmt.Sprintf("INSERT INTO %s (aggregate_type, aggregate_id, payload) VALUES ('%s', 'a-1', 'late')", table, aggs[0]))
	if code, out := e.runVerify(); code != 1 || !strings.Contains(out, "missing            1") {
		t.Fatalf("verify with an unpublished row: exit %d\n%s", code, out)
	}
}

// The second seed's table with the generic preset through --backfill and
// prune: the backfill publishes the rows the poller had not sent
// (source.backfill-where over the table's own status column) through the
// mapping (topic outbox.{aggregate_type}, key aggregate_id, backfill=true),
// then the binlog streams; prune tells published rows by the mapping's id
// column and their age by the preset's create_time column, and deletes
// only the old ones.
func TestMappingGenericBackfillPrune(t *testing.T) {
	e := newEnv(t)
	table := "gbp_" + e.name
	agg := "bfp" + runID
	topic := "outbox." + agg
	createTopic(t, topic, partitions)
	e.exec("CREATE TABLE " + table + ` (
		id BIGINT AUTO_INCREMENT PRIMARY KEY,
		aggregate_type VARCHAR(64) NOT NULL,
		aggregate_id VARCHAR(64) NOT NULL,
		payload TEXT NOT NULL,
		create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
		status VARCHAR(16) NOT NULL DEFAULT 'PENDING')`)
	t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + table) })
	e.outbox = table
	e.sourceExtra = `  mapping: {preset: generic}
`
	for i := 1; i <= 30; i++ {
		e.exec(fmt.Sprintf("INSERT INTO %s (aggregate_type, aggregate_id, payload, status) VALUES ('%s', 'a-%d', 'old %d', '%s')",
			table, agg, i%4, i, []string{"SENT", "PENDING", "FAILED"}[i%3]))
	}
	p := e.start("--backfill")
	if !logHas(p.log, "backfill done") {
		t.Fatal("no 'backfill done' in the log")
	}
	for i := 1; i <= 10; i++ {
		e.exec(fmt.Sprintf("INSERT INTO %s (aggregate_type, aggregate_id, payload) VALUES ('%s', 'a-%d', 'new %d')", table, agg, i%4, i))
	}
	recs := pollTopic(t, topic, 20+10, 2*time.Minute)
	backfilled := 0
	for _, r := range recs {
		id, _ := strconv.Atoi(r.EventID)
		bf := r.Headers["backfill"] == "true"
		switch {
		case bf && (id > 30 || id%3 == 0):
			t.Fatalf("backfilled row %d (status SENT, or inserted after the snapshot)", id)
		case !bf && id <= 30:
			t.Fatalf("row %d of before the start streamed, not backfilled", id)
		case !strings.HasPrefix(r.Key, "a-") || r.Headers["aggregate_type"] != agg:
			t.Fatalf("record key %q headers %v", r.Key, r.Headers)
		}
		if bf {
			backfilled++
		}
	}
	if backfilled != 20 {
		t.Fatalf("%d backfilled records, want 20", backfilled)
	}
	// Once the checkpoint covers every insert, the 30 old rows (aged) go.
	file, end := e.masterPos()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if cp := e.checkpoint(); cp != nil && cp.File == file && cp.Pos >= end {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %+v never reached %s:%d", e.checkpoint(), file, end)
		}
	}
	e.exec("UPDATE " + table + " SET create_time = NOW() - INTERVAL 10 DAY WHERE id <= 30")
	code, out := e.runPrune("--older-than", "7d")
	if code != 0 || !strings.Contains(out, "older than   create_time <") || !strings.Contains(out, "deleted      30 rows") {
		t.Fatalf("prune: exit %d\n%s", code, out)
	}
	c := e.sql()
	defer c.Close()
	r, err := c.Execute("SELECT COUNT(*), MIN(id) FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := r.GetInt(0, 0); n != 10 {
		t.Fatalf("%d rows left, want the 10 recent ones", n)
	}
	if min, _ := r.GetInt(0, 1); min != 31 {
		t.Fatalf("smallest id left %d, want 31", min)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// A lost checkpoint of a Debezium-layout table with a fixed topic: the
// start reads the newest records' binlog_txn_end of the mapping's topic
// (not router.topic, which it never writes): without a flag it refuses,
// naming that topic; with --recover-checkpoint it resumes there and the
// rows committed while it was down are published (verify: none missing).
func TestMappingRecoverFromHeaders(t *testing.T) {
	e := newEnv(t)
	e.noMirror = true
	topic := e.topic + ".orders"
	createTopic(t, topic, partitions)
	table := e.debeziumOutbox("dbr_", ",\n\t\tseq BIGINT NOT NULL")
	e.sourceExtra = fmt.Sprintf(`  mapping:
    preset: debezium
    topic: %s
    order: seq
    headers: {seq_no: seq}
`, topic)
	seq := 0
	insert := func(n int) {
		for i := 0; i < n; i++ {
			seq++
			e.exec(fmt.Sprintf("INSERT INTO %s (id, aggregatetype, aggregateid, type, payload, seq) VALUES (UUID(), 'order', 'k%d', 'OrderCreated', '{}', %d)", table, seq%5, seq))
		}
	}
	p := e.start()
	insert(30)
	pollTopic(t, topic, 30, time.Minute)
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	if err := rdb.Del(context.Background(), e.key).Err(); err != nil {
		t.Fatal(err)
	}
	insert(20) // committed while the publisher is down, without a checkpoint
	p = e.launch()
	var err error
	select {
	case err = <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("started without a checkpoint over a topic holding records (the start read another topic's headers)")
	}
	p.done <- err
	if code := p.cmd.ProcessState.ExitCode(); code != 1 || !logHas(p.log, "already holds records published by cdc-outbox") || !logHas(p.log, "topic "+topic) {
		b, _ := os.ReadFile(p.log)
		t.Fatalf("start without a checkpoint: exit %d, want 1 naming topic %s:\n%s", code, topic, tail(string(b), 5))
	}
	p = e.start("--recover-checkpoint")
	if !logHas(p.log, "recovering it from the topic") {
		t.Fatal("recovery not logged")
	}
	// Records after the recovered position are published again: duplicates, none missing.
	if code, out := e.runVerify("--wait", "60s"); code != 0 || !strings.Contains(out, "missing            0") || !strings.Contains(out, "rows in table      50") {
		t.Fatalf("verify after the recovery: exit %d\n%s", code, out)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
