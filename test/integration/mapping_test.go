//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// pollTopic reads topic from the start until n records arrived (or the timeout).
func pollTopic(t *testing.T, topic string, n int, timeout time.Duration) []verify.Record {
	t.Helper()
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, topic)
	var recs []verify.Record
	for deadline := time.Now().Add(timeout); len(recs) < n && time.Now().Before(deadline); {
		got, err := cons.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, got...)
		if len(got) == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if len(recs) != n {
		t.Fatalf("topic %s: %d records, want %d", topic, len(recs), n)
	}
	return recs
}

// A Debezium-layout outbox table (id UUID string, aggregatetype,
// aggregateid, type, JSON payload) with the debezium preset: records go to
// outbox.event.{aggregatetype}, keyed by aggregateid, with the id and type
// headers; a valid traceparent becomes a header unchanged, an invalid one
// is dropped (invalid-trace: drop); the ordering column gives seq_no, so
// verify checks order per key. A NULL aggregateid is a poison record,
// dead-lettered.
func TestMappingDebezium(t *testing.T) {
	e := newEnv(t)
	table := "dbz_" + e.name
	agg := "ord" + runID
	topic := "outbox.event." + agg
	createTopic(t, topic, partitions)
	dlq := e.topic + ".dlq"
	createTopic(t, dlq, 1)
	e.exec("CREATE TABLE " + table + ` (
		id VARCHAR(36) NOT NULL PRIMARY KEY,
		aggregatetype VARCHAR(255) NOT NULL,
		aggregateid VARCHAR(255) NULL,
		type VARCHAR(255) NOT NULL,
		payload JSON,
		seq BIGINT NOT NULL,
		traceparent VARCHAR(64) NULL,
		created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))`)
	t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + table) })
	e.outbox = table
	e.sourceExtra = `  mapping:
    preset: debezium
    order: seq
    headers: {seq_no: seq, type: type}
    traceparent: traceparent
    invalid-trace: drop
    timestamp: created_at
`
	t.Setenv("CDC_OUTBOX_KAFKA_ON_POISON", "dead-letter")
	t.Setenv("CDC_OUTBOX_KAFKA_DEAD_LETTER_TOPIC", dlq)
	e.start()
	const keys, per = 20, 25
	last := map[int64]int64{}
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for s := 1; s <= per; s++ {
		var rows []string
		for k := 1; k <= keys; k++ {
			tp := "NULL"
			switch {
			case k == 1:
				tp = "'" + good + "'"
			case k == 2:
				tp = "'not-a-traceparent'"
			}
			rows = append(rows, fmt.Sprintf("(UUID(), '%s', '%d', 'OrderCreated', '{\"k\": %d, \"s\": %d}', %d, %s)", agg, k, k, s, s, tp))
			last[int64(k)] = int64(s)
		}
		e.exec("INSERT INTO " + table + " (id, aggregatetype, aggregateid, type, payload, seq, traceparent) VALUES " + strings.Join(rows, ","))
	}
	e.exec("INSERT INTO " + table + " (id, aggregatetype, aggregateid, type, payload, seq) VALUES ('poison-1', '" + agg + "', NULL, 'OrderCreated', '{}', 1)")
	recs := pollTopic(t, topic, keys*per, 2*time.Minute)
	chk := verify.NewChecker(last)
	chk.Add(recs...)
	requireOK(t, chk.Report())
	for _, r := range recs {
		if r.Headers["id"] == "" || r.Headers["id"] != r.Headers["event_id"] || len(r.Headers["id"]) != 36 || r.Headers["type"] != "OrderCreated" {
			t.Fatalf("headers %v", r.Headers)
		}
		switch tp, ok := r.Headers["traceparent"]; {
		case r.Key == "1" && tp != good:
			t.Fatalf("key 1: traceparent %q, want %q", tp, good)
		case r.Key != "1" && ok:
			t.Fatalf("key %s: traceparent %q (invalid or NULL: dropped)", r.Key, tp)
		}
	}
	dead := pollTopic(t, dlq, 1, time.Minute)
	if dead[0].Headers["event_id"] != "poison-1" || dead[0].Headers["dlq_reason"] != "undecodable" || !strings.Contains(dead[0].Headers["dlq_error"], "aggregateid") {
		t.Fatalf("dead letter headers %v", dead[0].Headers)
	}
}

// The second seed's outbox (aggregate_type, aggregate_id, payload TEXT,
// create_time, status) with the generic preset and the CloudEvents
// envelope: topic outbox.{aggregate_type}, key aggregate_id, ce_* headers.
func TestMappingGenericCloudEvents(t *testing.T) {
	e := newEnv(t)
	table := "gen_" + e.name
	agg := "order" + runID
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
	e.sourceExtra = `  mapping:
    preset: generic
    envelope: cloudevents
    cloudevents: {source: "/orders/{aggregate_id}"}
`
	e.start()
	for i := 1; i <= 30; i++ {
		e.exec(fmt.Sprintf("INSERT INTO %s (aggregate_type, aggregate_id, payload) VALUES ('%s', 'o-%d', 'order %d created')", table, agg, i%5, i))
	}
	recs := pollTopic(t, topic, 30, 2*time.Minute)
	for _, r := range recs {
		h := r.Headers
		if !strings.HasPrefix(r.Key, "o-") || h["ce_specversion"] != "1.0" || h["ce_id"] != h["event_id"] || h["ce_source"] != "/orders/"+r.Key ||
			h["ce_type"] != agg || !strings.HasSuffix(h["ce_time"], "Z") || h["ce_time"][10] != 'T' || h["content-type"] != "application/json" ||
			!strings.HasPrefix(string(r.Value), "order ") || h["aggregate_type"] != agg {
			t.Fatalf("record key %s value %q headers %v", r.Key, r.Value, h)
		}
	}
}

// A source of 8 sharded IM tables (a pattern over schema.table) read from
// one binlog stream with one checkpoint: one transaction writes several
// shards; shard 00 has its own mapping (an extra header from its status
// column); a 9th table created while running is picked up; every
// conversation's events arrive once and in order.
func TestMappingShardedIM(t *testing.T) {
	e := newEnv(t)
	base := "sh_" + e.name
	var tables []string
	for i := 0; i < 9; i++ {
		tables = append(tables, fmt.Sprintf("%s_%02d", base, i))
	}
	for _, tb := range tables[:8] {
		e.exec("CREATE TABLE " + tb + " LIKE " + e.outbox)
	}
	t.Cleanup(func() {
		for _, tb := range tables {
			e.exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	e.sourceExtra = fmt.Sprintf(`  tables:
    - table: %s
      mapping: {headers: {status: status}}
    - pattern: '%s\.%s_[0-9]+'
`, tables[0], mysqlDB, base)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e.extra = "metrics-addr: " + addr + "\n"
	p := e.start()
	const convs = 64
	last := map[int64]int64{}
	insert := func(seqs int, shards int) {
		for s := 1; s <= seqs; s++ {
			stmts := []string{"BEGIN"}
			for c := int64(1); c <= convs; c++ {
				last[c]++
				stmts = append(stmts, fmt.Sprintf("INSERT INTO %s (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('message.created', %d, %d, %d, 1, 2, '{\"c\": %d}')",
					tables[int(c)%shards], c, c*1000+last[c], last[c], c))
			}
			stmts = append(stmts, "COMMIT")
			e.exec(stmts...)
		}
	}
	insert(10, 8)
	e.exec("CREATE TABLE " + tables[8] + " LIKE " + tables[1])
	insert(5, 9)
	recs := pollTopic(t, e.topic, convs*15, 2*time.Minute)
	chk := verify.NewChecker(last)
	chk.Add(recs...)
	requireOK(t, chk.Report())
	status := 0
	for _, r := range recs {
		if _, ok := r.Headers["status"]; ok {
			status++
		}
	}
	// Shard 00 holds conversations c%8 == 0 in the first round (8 of 64)
	// and c%9 == 0 in the second (7 of 64).
	if want := 10*8 + 5*7; status != want {
		t.Fatalf("%d records with the status header (shard 00's mapping), want %d", status, want)
	}
	// records_produced_total has one series per shard (the table label).
	perTable := map[string]int{}
	for c := 1; c <= convs; c++ {
		perTable[tables[c%8]] += 10
		perTable[tables[c%9]] += 5
	}
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			body = string(b)
		}
		missing := ""
		for tb, n := range perTable {
			if want := fmt.Sprintf(`cdc_outbox_records_produced_total{source="default",table="%s.%s",topic=%q} %d`, mysqlDB, tb, e.topic, n); !strings.Contains(body, want+"\n") {
				missing = want
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s:\n%s", missing, body)
		}
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	file, pos := e.masterPos()
	if cp := e.checkpoint(); cp == nil || cp.File != file || cp.Pos > pos {
		t.Fatalf("one checkpoint at the binlog end: %+v, end %s:%d", cp, file, pos)
	}
}

// A mapped column the table lacks, and a pattern that matches no table,
// stop the start with errors naming the table, the column and the fix.
func TestMappingValidationAtStart(t *testing.T) {
	e := newEnv(t)
	e.sourceExtra = `  mapping: {preset: debezium}
`
	p := e.launch()
	err := <-p.done
	p.done <- err // for launch's cleanup
	if err == nil {
		t.Fatal("publisher started with a debezium mapping on an im table")
	}
	for _, want := range []string{"column aggregateid (key): the table has no such column", "add the column to the table, or map key"} {
		if !logHas(p.log, want) {
			t.Fatalf("log lacks %q", want)
		}
	}
	e.sourceExtra = `  tables: [{pattern: 'im\.nothing_like_this_[0-9]+'}]
`
	p = e.launch()
	err = <-p.done
	p.done <- err
	if err == nil {
		t.Fatal("publisher started with a pattern matching no table")
	}
	if !logHas(p.log, "matches no table of schema im") {
		t.Fatal("log lacks the pattern error")
	}
}
