//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/segmentio/kafka-go"
)

// poisonRow is a row of conversation conv with sequence number seq and a
// payload (valid JSON of about n bytes when payload is empty).
func poisonRow(conv, seq int64, payload string, n int) workload.Row {
	pl := []byte(payload)
	if payload == "" {
		pl = workload.Payload(conv, seq, n)
	}
	return workload.Row{ConversationID: conv, SeqNo: seq, SenderID: 1, ReceiverID: 2, Payload: pl}
}

// bigJSON is a valid JSON document of n bytes.
func bigJSON(n int) string { return `{"blob":"` + strings.Repeat("z", n-11) + `"}` }

// eventIDs maps "conversation/seq" to the outbox id of e's rows.
func (e *env) eventIDs() map[string]string {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	r, err := c.Execute(fmt.Sprintf("SELECT id, conversation_id, seq_no FROM `%s`", e.outbox))
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for i := 0; i < r.RowNumber(); i++ {
		id, _ := r.GetUint(i, 0)
		conv, _ := r.GetInt(i, 1)
		seq, _ := r.GetInt(i, 2)
		out[fmt.Sprintf("%d/%d", conv, seq)] = strconv.FormatUint(id, 10)
	}
	return out
}

// createTopic creates topic with parts partitions.
func createTopic(t *testing.T, topic string, parts int) {
	t.Helper()
	conn, err := kafka.Dial("tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := kafka.Dial("tcp", fmt.Sprintf("%s:%d", ctrl.Host, ctrl.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if err := cc.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: parts, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	// Wait until the topic's metadata is visible, so that readers do not
	// see it as unknown.
	for deadline := time.Now().Add(30 * time.Second); ; {
		ids, err := sink.Partitions(context.Background(), sink.Config{Brokers: brokers}, topic)
		if err == nil && len(ids) == parts {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not visible: %v", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// setTopicConfig sets one topic-level configuration (e.g. max.message.bytes).
func setTopicConfig(t *testing.T, topic, name, value string) {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	res, err := cl.IncrementalAlterConfigs(context.Background(), &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: name, Value: value, ConfigOperation: kafka.ConfigOperationSet}}}},
	})
	if err == nil && len(res.Resources) > 0 {
		err = res.Resources[0].Error
	}
	if err != nil {
		t.Fatalf("set %s=%s on %s: %v", name, value, topic, err)
	}
}

// deadLetterPolicy switches e's publishers (and commands) to the
// dead-letter policy with a fresh dead-letter topic, returned.
func (e *env) deadLetterPolicy() string {
	e.t.Helper()
	dlq := e.topic + ".dlq"
	createTopic(e.t, dlq, 3)
	// The publisher inherits the environment: CDC_OUTBOX_KAFKA_* override the file.
	e.t.Setenv("CDC_OUTBOX_KAFKA_ON_POISON", "dead-letter")
	e.t.Setenv("CDC_OUTBOX_KAFKA_DEAD_LETTER_TOPIC", dlq)
	return dlq
}

// textPayload turns e's outbox payload column into LONGTEXT without a
// JSON check, as some outbox tables have.
func (e *env) textPayload() {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	if _, err := c.Execute(fmt.Sprintf("ALTER TABLE `%s` MODIFY payload LONGTEXT NOT NULL", e.outbox)); err != nil {
		e.t.Fatal(err)
	}
}

// republish runs "cdc-outbox dead-letter republish" with e's configuration
// and extra environment; it returns the output and the exit code.
func (e *env) republish(env []string, args ...string) (string, int) {
	e.t.Helper()
	cmd := exec.Command(binary, append([]string{"dead-letter", "republish", "--config", e.config()}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		e.t.Fatalf("republish did not finish:\n%s", out.String())
	}
	e.t.Logf("republish %v:\n%s", args, out.String())
	return out.String(), cmd.ProcessState.ExitCode()
}

// pollUntil reads topic until n records arrived or timeout.
func pollUntil(t *testing.T, cons *verify.Consumer, n int, timeout time.Duration) []verify.Record {
	t.Helper()
	var recs []verify.Record
	deadline := time.Now().Add(timeout)
	for len(recs) < n && time.Now().Before(deadline) {
		recs = append(recs, mustPoll(t, cons)...)
		if len(recs) < n {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return recs
}

// perConversation returns, per conversation key, the seq_nos in partition
// order, and fails if a conversation is split across partitions.
func perConversation(t *testing.T, recs []verify.Record) map[string]string {
	t.Helper()
	seqs, part := map[string][]string{}, map[string]int{}
	for _, r := range recs {
		if p, ok := part[r.Key]; ok && p != r.Partition {
			t.Fatalf("conversation %s on partitions %d and %d", r.Key, p, r.Partition)
		}
		part[r.Key] = r.Partition
		seqs[r.Key] = append(seqs[r.Key], strconv.FormatInt(r.SeqNo, 10))
	}
	out := map[string]string{}
	for k, v := range seqs {
		out[k] = strings.Join(v, ",")
	}
	return out
}

var poisonErrRE = regexp.MustCompile(`poison record \((\w+)\): event (\d+) for topic \S+, row at \S+, transaction ending at ([^\s:]+):(\d+)(?: gtid=([0-9a-z_:-]*[0-9]))?`)

// Fail policy (the default): an oversize record stops the publisher with
// exit code 1 and an error naming the event and its transaction's
// position; the checkpoint lands at the end of the transaction before it,
// even though both were read into one produce round; nothing after it is
// published.
func TestPoisonFailOversize(t *testing.T) {
	e := newEnv(t)
	w := e.writer()
	file, pos := e.masterPos()
	// Committed before the publisher starts, so that A and B share a round.
	a := []workload.Row{poisonRow(1, 1, "", 200), poisonRow(2, 1, "", 200)}
	b := []workload.Row{poisonRow(3, 1, "", 200), poisonRow(1, 2, bigJSON(1_200_000), 0)}
	c := []workload.Row{poisonRow(2, 2, "", 200)}
	for _, txn := range [][]workload.Row{a, b, c} {
		if err := w.Txn(txn, false); err != nil {
			t.Fatal(err)
		}
	}
	ids := e.eventIDs()
	p := e.launch("--start", fmt.Sprintf("%s:%d", file, pos))
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(90 * time.Second):
		t.Fatal("the publisher did not stop on the poison record")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	log, _ := os.ReadFile(p.log)
	m := poisonErrRE.FindSubmatch(log)
	if m == nil {
		t.Fatalf("no poison error in the log:\n%s", tail(string(log), 20))
	}
	if string(m[1]) != "too_large" || string(m[2]) != ids["1/2"] {
		t.Fatalf("error names reason %s event %s, want too_large event %s", m[1], m[2], ids["1/2"])
	}
	t.Logf("stopped with: %s", m[0])
	endFile, endPos := string(m[3]), string(m[4])
	if !bytes.Contains(log, []byte("kafka.on-poison: dead-letter")) {
		t.Error("the error does not name the dead-letter option")
	}

	// Published: A only.
	recs := mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)) // the publisher has exited
	got := map[string]bool{}
	for _, r := range recs {
		got[r.EventID] = true
	}
	if len(recs) != 2 || !got[ids["1/1"]] || !got[ids["2/1"]] {
		t.Fatalf("published %v, want exactly A's events %s and %s", got, ids["1/1"], ids["2/1"])
	}
	aEnd := recs[0].Headers["binlog_txn_end"]

	// The checkpoint is the end of the transaction right before B: at or
	// after A's end, before B's end, and the next event there is B's GTID.
	cp := e.checkpoint()
	if cp == nil {
		t.Fatal("no checkpoint")
	}
	want := fmt.Sprintf("%s:%d", cp.File, cp.Pos)
	if !strings.Contains(string(log), "the checkpoint stays at the end of the transaction before it ("+want) {
		t.Errorf("the error does not name the checkpoint %s", want)
	}
	ae := parseFilePos(t, aEnd)
	bEnd, _ := strconv.ParseUint(endPos, 10, 32)
	if cp.File != endFile || cp.File != ae.file || cp.Pos < ae.pos || uint64(cp.Pos) >= bEnd {
		t.Fatalf("checkpoint %s:%d, want between A's end %s and B's end %s:%s", cp.File, cp.Pos, aEnd, endFile, endPos)
	}
	t.Logf("checkpoint %s:%d, A ends at %s", cp.File, cp.Pos, aEnd)
	if gtid := string(m[5]); gtid != "" {
		sc := e.sql()
		defer sc.Close()
		r, err := sc.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT 1", cp.File, cp.Pos))
		if err != nil {
			t.Fatal(err)
		}
		info, _ := r.GetString(0, 5)
		want := "GTID " + gtid // MariaDB's GTID event: BEGIN GTID 0-1-42
		if isMySQL() {
			want = "GTID_NEXT= '" + gtid + "'" // MySQL's: SET @@SESSION.GTID_NEXT= 'uuid:42'
		}
		if !strings.Contains(info, want) {
			t.Fatalf("event at the checkpoint %s:%d is %q, want the start of B (GTID %s)", cp.File, cp.Pos, info, gtid)
		}
	}
}

type filePos struct {
	file string
	pos  uint32
}

func parseFilePos(t *testing.T, s string) filePos {
	t.Helper()
	i := strings.LastIndexByte(s, ':')
	p, err := strconv.ParseUint(s[i+1:], 10, 32)
	if i <= 0 || err != nil {
		t.Fatalf("bad position %q", s)
	}
	return filePos{s[:i], uint32(p)}
}

// Dead-letter policy: an invalid-JSON payload (LONGTEXT column), a record
// over batch-bytes and a record the topic rejects (max.message.bytes) go to
// the dead-letter topic with their headers, in their conversation's order;
// everything else arrives in order; the publisher keeps running.
func TestPoisonDeadLetter(t *testing.T) {
	e := newEnv(t)
	e.textPayload()
	dlq := e.deadLetterPolicy()
	setTopicConfig(t, e.topic, "max.message.bytes", "300000")
	p := e.start()
	w := e.writer()
	txns := [][]workload.Row{
		{poisonRow(1, 1, "", 100), poisonRow(2, 1, "", 100)},
		{poisonRow(1, 2, `{not json`, 0), poisonRow(1, 3, "", 100)},
		{poisonRow(2, 2, bigJSON(1_200_000), 0), poisonRow(3, 1, "", 100)},
		{poisonRow(1, 4, "", 100), poisonRow(3, 2, bigJSON(500_000), 0), poisonRow(3, 3, "", 100)},
		{poisonRow(2, 3, "", 100)},
	}
	for _, txn := range txns {
		if err := w.Txn(txn, false); err != nil {
			t.Fatal(err)
		}
	}
	ids := e.eventIDs()
	recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 7, time.Minute)
	if got, want := perConversation(t, recs), map[string]string{"1": "1,3,4", "2": "1,3", "3": "1,3"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	dead := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, dlq), 3, 30*time.Second)
	if len(dead) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dead))
	}
	want := map[string]struct {
		reason, key string
		value       string // "": empty, with dlq_payload_bytes
		size        int
	}{
		ids["1/2"]: {"invalid_json", "1", `{not json`, 0},
		ids["2/2"]: {"too_large", "2", "", 1_200_000},
		ids["3/2"]: {"broker_too_large", "3", "", 500_000},
	}
	for _, r := range dead {
		wnt, ok := want[r.EventID]
		if !ok {
			t.Fatalf("unexpected dead letter %s: %v", r.EventID, r.Headers)
		}
		h := r.Headers
		if h["dlq_reason"] != wnt.reason || r.Key != wnt.key || h["dlq_topic"] != e.topic || h["dlq_error"] == "" ||
			h["binlog_pos"] == "" || h["binlog_txn_end"] == "" || h["gtid"] == "" || h["event_type"] != "message.created" || h["seq_no"] != "2" {
			t.Errorf("dead letter %s: key %s headers %v", r.EventID, r.Key, h)
		}
		if string(r.Value) != wnt.value {
			t.Errorf("dead letter %s: value %.40q, want %q", r.EventID, r.Value, wnt.value)
		}
		if wnt.size > 0 && h["dlq_payload_bytes"] != strconv.Itoa(wnt.size) {
			t.Errorf("dead letter %s: dlq_payload_bytes %q, want %d", r.EventID, h["dlq_payload_bytes"], wnt.size)
		}
	}
	if !logHas(p.log, "poison record sent to the dead-letter topic") {
		t.Error("no dead-letter warning logged")
	}
	// Still running: a later event arrives.
	if err := w.Txn([]workload.Row{poisonRow(1, 5, "", 100)}, false); err != nil {
		t.Fatal(err)
	}
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	recs = pollUntil(t, cons, 8, 30*time.Second)
	if got := perConversation(t, recs)["1"]; got != "1,3,4,5" {
		t.Fatalf("conversation 1 after the poison records: %s", got)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if !logHas(p.log, `"dead_lettered":3`) {
		t.Error("the dead-letter count is not logged at stop")
	}
}

// republish: dead-lettered events reach their topic, with the same event id
// and republished_from=dead-letter, once the cause is fixed (batch-bytes
// raised, payload corrected); until then the command reports them as still
// poison and exits 1, as it does for unknown events.
func TestDeadLetterRepublish(t *testing.T) {
	e := newEnv(t)
	e.textPayload()
	dlq := e.deadLetterPolicy()
	p := e.start()
	w := e.writer()
	for _, txn := range [][]workload.Row{
		{poisonRow(1, 1, "", 100)},
		{poisonRow(1, 2, bigJSON(1_200_000), 0)},
		{poisonRow(2, 1, `oops`, 0)},
		{poisonRow(1, 3, "", 100)},
	} {
		if err := w.Txn(txn, false); err != nil {
			t.Fatal(err)
		}
	}
	ids := e.eventIDs()
	if n := len(pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, dlq), 2, time.Minute)); n != 2 {
		t.Fatalf("%d dead letters, want 2", n)
	}
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	if n := len(pollUntil(t, cons, 2, time.Minute)); n != 2 {
		t.Fatalf("%d records, want 2", n)
	}
	p.stop(t, 30*time.Second)

	// Nothing fixed yet: both still poison, exit 1, nothing published.
	out, code := e.republish(nil)
	if code != 1 || strings.Count(out, "STILL POISON") != 2 || !strings.Contains(out, "(too_large)") || !strings.Contains(out, "(invalid_json)") {
		t.Fatalf("republish before the fix: exit %d", code)
	}
	// Unknown event: exit 1.
	if out, code := e.republish(nil, "--event-id", "999999999999"); code != 1 || !strings.Contains(out, "MISSING") {
		t.Fatalf("republish of an unknown event: exit %d", code)
	}
	raised := []string{"CDC_OUTBOX_KAFKA_BATCH_BYTES=4000000"}
	// Dry run: reported, not published.
	if out, code := e.republish(raised, "--event-id", ids["1/2"], "--dry-run"); code != 0 || !strings.Contains(out, "would republish to "+e.topic) {
		t.Fatalf("dry run: exit %d", code)
	}
	if recs := mustPoll(t, cons); len(recs) != 0 {
		t.Fatalf("dry run published %d records", len(recs))
	}
	// batch-bytes raised: the oversize event is republished.
	if out, code := e.republish(raised, "--event-id", ids["1/2"]); code != 0 || !strings.Contains(out, "republished to "+e.topic) {
		t.Fatalf("republish after raising batch-bytes: exit %d", code)
	}
	// Payload fixed in the outbox row: the invalid-JSON event is republished.
	c := e.sql()
	defer c.Close()
	if _, err := c.Execute(fmt.Sprintf("UPDATE `%s` SET payload = '{\"fixed\":true}' WHERE id = %s", e.outbox, ids["2/1"])); err != nil {
		t.Fatal(err)
	}
	if _, code := e.republish(raised, "--event-id", ids["2/1"]); code != 0 {
		t.Fatalf("republish after fixing the payload: exit %d", code)
	}
	recs := pollUntil(t, cons, 2, 30*time.Second)
	if len(recs) != 2 {
		t.Fatalf("%d republished records, want 2", len(recs))
	}
	for _, r := range recs {
		switch r.EventID {
		case ids["1/2"]:
			if len(r.Value) != 1_200_000 || r.Key != "1" || r.SeqNo != 2 {
				t.Errorf("republished oversize event: key %s seq %d, %d bytes", r.Key, r.SeqNo, len(r.Value))
			}
		case ids["2/1"]:
			if string(r.Value) != `{"fixed":true}` || r.Key != "2" {
				t.Errorf("republished fixed event: key %s value %q", r.Key, r.Value)
			}
		default:
			t.Fatalf("unexpected record %s", r.EventID)
		}
		if r.Headers["republished_from"] != "dead-letter" || r.Headers["binlog_txn_end"] == "" || r.Headers["event_type"] != "message.created" {
			t.Errorf("republished %s headers %v", r.EventID, r.Headers)
		}
	}
}

// largePoisonTxn commits, in e's outbox (payload LONGTEXT NULL), one row
// (conversation 1, seq 1) and then one transaction of largeRows rows
// (conversations 2 to 8, seq 2 to largeRows+1, about 300-byte payloads:
// 1.5 MB with their overhead, larger than source.buffer-bytes 1 MiB, passed
// on in fragments of binlog.ChunkEvents rows) whose row largePoison has a
// NULL payload (undecodable).
func (e *env) largePoisonTxn() {
	e.t.Helper()
	e.insertRaw([]string{row("'message.created'", "1", 1, `'{}'`)})
	rows := make([]string, largeRows)
	for i := range rows {
		pl := fmt.Sprintf(`'{"n":%d,"pad":"%s"}'`, i, strings.Repeat("p", 280))
		if i == largePoison {
			pl = "NULL"
		}
		rows[i] = row("'message.created'", fmt.Sprint(2+i%7), 2+i, pl)
	}
	e.insertRaw(rows)
}

// The large transaction of largePoisonTxn: its rows, and the index of the
// poison one, in the middle of the second fragment.
const largeRows, largePoison = 5000, 2999

// largePoisonEnv is an env for largePoisonTxn: payload LONGTEXT NULL,
// source.buffer-bytes 1 MiB, produce rounds of 500 records (a fragment
// spans rounds).
func largePoisonEnv(t *testing.T) *env {
	e := newEnv(t)
	e.exec(fmt.Sprintf("ALTER TABLE `%s` MODIFY payload LONGTEXT NULL", e.outbox))
	e.sourceExtra = "  buffer-bytes: 1048576\n"
	e.batchSize = 500
	return e
}

var publishedRE = regexp.MustCompile(`the (\d+) rows of its fragments before this row's \(event (\d+) to event (\d+)\) were published, and are again at every restart`)

// Issue 29 item 4: under kafka.on-poison: fail, a poison row in the second
// fragment of a transaction larger than source.buffer-bytes stops the
// publisher with nothing of its own fragment published (the rounds it
// spans included): Kafka holds exactly the rows of the first fragment
// (the rows events up to the first that reaches binlog.ChunkEvents rows),
// which the error counts and names; a restart publishes them again with
// the same event ids and stops at the same row; checkpoint set past the
// transaction resumes after it, the rest of it never published.
func TestPoisonLargeTransactionFail(t *testing.T) {
	e := largePoisonEnv(t)
	p := e.start()
	e.largePoisonTxn()
	ids := e.eventIDs()
	index := map[string]int{} // event id → row index in the transaction
	for i := range largeRows {
		index[ids[fmt.Sprintf("%d/%d", 2+i%7, 2+i)]] = i
	}
	poisonID := ids[fmt.Sprintf("%d/%d", 2+largePoison%7, 2+largePoison)]
	// stopped checks a run's stop and returns the rows it says were
	// published and the transaction's end it names (checked against the
	// records' binlog_txn_end below: insertRaw's binlog end may include
	// other tests' transactions on the shared server).
	stopped := func(p *publisher) (int, string) {
		t.Helper()
		if code := p.waitExit(t, 2*time.Minute); code != 1 {
			t.Fatalf("exit code %d, want 1 (poison, fail policy)", code)
		}
		log, _ := os.ReadFile(p.log)
		m := poisonErrRE.FindSubmatch(log)
		if m == nil || string(m[1]) != "undecodable" || string(m[2]) != poisonID {
			t.Fatalf("poison error %q, want undecodable event %s:\n%s", m, poisonID, tail(string(log), 10))
		}
		end := fmt.Sprintf("%s:%s", m[3], m[4])
		pm := publishedRE.FindSubmatch(log)
		if pm == nil {
			t.Fatalf("the error does not say what of the transaction was published:\n%s", tail(string(log), 10))
		}
		n, _ := strconv.Atoi(string(pm[1]))
		if string(pm[2]) != ids["2/2"] || index[string(pm[3])] != n-1 {
			t.Fatalf("the error names events %s to %s, want %s to the %d-th row's", pm[2], pm[3], ids["2/2"], n)
		}
		for _, want := range []string{
			fmt.Sprintf("skip the rest of the transaction (its rows after those %d are then not published): cdc-outbox checkpoint set %s", n, end),
			"kafka.on-poison: dead-letter",
		} {
			if !bytes.Contains(log, []byte(want)) {
				t.Errorf("the error does not say %q", want)
			}
		}
		return n, end
	}
	n, end := stopped(p)
	t.Logf("first run: %d rows of the transaction published", n)

	// published returns how many times each row of the transaction is in
	// Kafka, and checks the row before it is there once.
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	var recs []verify.Record
	published := func() map[int]int {
		t.Helper()
		recs = append(recs, mustPoll(t, cons)...) // every run has exited: everything acknowledged is there
		times, before := map[int]int{}, 0
		for _, r := range recs {
			if r.EventID == ids["1/1"] {
				before++
				continue
			}
			i, ok := index[r.EventID]
			if !ok {
				t.Fatalf("unexpected record %s", r.EventID)
			}
			times[i]++
		}
		if before != 1 {
			t.Fatalf("the row before the transaction published %d times, want 1", before)
		}
		return times
	}
	times := published()
	if len(times) != n {
		t.Fatalf("%d rows of the transaction in Kafka, the error says %d", len(times), n)
	}
	// Exactly the first fragment: the rows events up to the first that
	// reaches binlog.ChunkEvents rows, each row once.
	rowPos := map[int]string{}
	for _, r := range recs {
		if i, ok := index[r.EventID]; ok {
			rowPos[i] = r.Headers["binlog_pos"]
			if got := r.Headers["binlog_txn_end"]; got != end {
				t.Fatalf("row %d: binlog_txn_end %s, the error names the transaction ending at %s", i, got, end)
			}
		}
	}
	inLast := 0 // rows in the fragment's last rows event
	for i := range n {
		if times[i] != 1 {
			t.Fatalf("row %d published %d times, want the first %d rows once each", i, times[i], n)
		}
		if rowPos[i] == rowPos[n-1] {
			inLast++
		}
	}
	if n < binlog.ChunkEvents || n-inLast >= binlog.ChunkEvents || n > largePoison {
		t.Fatalf("%d rows published (%d before the last rows event): want the first fragment, the rows events up to the first that reaches %d rows",
			n, n-inLast, binlog.ChunkEvents)
	}

	// Every restart: the same rows again, the same stop.
	if again, aend := stopped(e.launch()); again != n || aend != end {
		t.Fatalf("the restart says %d rows of the transaction ending at %s published, the first run %d of %s", again, aend, n, end)
	}
	times = published()
	for i := range largeRows {
		if want := map[bool]int{true: 2, false: 0}[i < n]; times[i] != want {
			t.Fatalf("after a restart row %d is in Kafka %d times, want %d (the first %d rows twice, nothing else)", i, times[i], want, n)
		}
	}

	// checkpoint set past the transaction: the rest of it is never published.
	if out, code := e.cli(nil, "checkpoint", "set", end); code != 0 {
		t.Fatalf("checkpoint set: exit %d:\n%s", code, out)
	}
	p = e.start()
	after, _ := e.insertRaw([]string{row("'message.created'", "1", 9999, `'{}'`)})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if cp := e.checkpoint(); cp != nil && binlog.ComparePos(cp.Position(), binlog.Position{File: after.file, Pos: after.pos}) >= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %+v never reached %s:%d", e.checkpoint(), after.file, after.pos)
		}
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	later := e.eventIDs()["1/9999"]
	recs = slices.DeleteFunc(append(recs, mustPoll(t, cons)...), func(r verify.Record) bool {
		if r.EventID == later {
			later = "" // seen
			return true
		}
		return false
	})
	if later != "" {
		t.Fatal("the row after the skipped transaction was not published")
	}
	if len(published()) != n {
		t.Fatal("rows of the skipped transaction were published after checkpoint set")
	}
}

// Issue 29 item 4, dead-letter: the poison row of a transaction larger than
// source.buffer-bytes is dead-lettered in its place and every other row of
// the transaction is published once, in order, with what follows.
func TestPoisonLargeTransactionDeadLetter(t *testing.T) {
	e := largePoisonEnv(t)
	dlq := e.deadLetterPolicy()
	p := e.start()
	e.largePoisonTxn()
	e.insertRaw([]string{row("'message.created'", "1", 9999, `'{}'`)})
	ids := e.eventIDs()
	recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), largeRows+1, 2*time.Minute)
	want := map[string][]string{"1": {"1", "9999"}} // per conversation key, the seq_nos in order
	for i := range largeRows {
		if i != largePoison {
			k := fmt.Sprint(2 + i%7)
			want[k] = append(want[k], fmt.Sprint(2+i))
		}
	}
	got := perConversation(t, recs)
	for k, seqs := range want {
		if got[k] != strings.Join(seqs, ",") {
			t.Fatalf("conversation %s: published %.200s…, want %.200s… (%d records in all)", k, got[k], strings.Join(seqs, ","), len(recs))
		}
	}
	if len(recs) != largeRows+1 {
		t.Fatalf("%d records, want %d", len(recs), largeRows+1)
	}
	dead := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, dlq), 1, 30*time.Second)
	poisonID := ids[fmt.Sprintf("%d/%d", 2+largePoison%7, 2+largePoison)]
	if len(dead) != 1 || dead[0].EventID != poisonID || dead[0].Headers["dlq_reason"] != "undecodable" {
		t.Fatalf("dead letters %+v, want event %s (undecodable)", dead, poisonID)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}
