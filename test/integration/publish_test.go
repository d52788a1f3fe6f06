//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

// produce writes the plan's transactions in order; it returns the first error.
func produce(w *workload.Writer, plan *workload.Plan) error {
	for _, txn := range plan.Txns {
		if err := w.Txn(txn, false); err != nil {
			return err
		}
	}
	return nil
}

// 20,000 events over 200 conversations in transactions of 1 to 500 rows, no
// faults: each arrives exactly once, in seq_no order per conversation, each
// conversation on the partition Java's default partitioner would choose.
func TestExactlyOnceInOrderNoFaults(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	plan := workload.Generate(1, 0, 200, 20000, 1, 500, 200)
	if err := produce(e.writer(), plan); err != nil {
		t.Fatal(err)
	}
	chk := verify.NewChecker(plan.Last)
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	rep := e.consume(chk, cons, 3*time.Minute)
	requireOK(t, rep)
	if rep.Duplicates != 0 || rep.Unique != 20000 || rep.Records != 20000 {
		t.Fatalf("want exactly 20000 records, no duplicates: %s", rep.String())
	}
	// Key → partition agrees with the Java client's murmur2 partitioner.
	again := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	recs, err := again.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if want := router.Partition([]byte(r.Key), partitions); r.Partition != want {
			t.Fatalf("key %s on partition %d, murmur2 says %d", r.Key, r.Partition, want)
		}
		if r.Headers["event_type"] != "message.created" || r.Headers["binlog_pos"] == "" || r.Headers["created_at"] == "" {
			t.Fatalf("headers incomplete: %v", r.Headers)
		}
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	file, pos := e.masterPos()
	cp := e.checkpoint()
	if cp == nil || cp.File != file || cp.Pos > pos {
		t.Fatalf("checkpoint %+v after graceful stop, binlog end %s:%d", cp, file, pos)
	}
}

// A rolled-back transaction publishes nothing.
func TestRolledBackTransactionPublishesNothing(t *testing.T) {
	e := newEnv(t)
	e.start()
	w := e.writer()
	row := func(conv, seq int64) workload.Row {
		return workload.Row{ConversationID: conv, SeqNo: seq, SenderID: 1, ReceiverID: 2, Payload: []byte(`{"n":` + strconv.FormatInt(seq, 10) + `}`)}
	}
	if err := w.Txn([]workload.Row{row(1, 1)}, false); err != nil {
		t.Fatal(err)
	}
	if err := w.Txn([]workload.Row{row(2, 1), row(2, 2), row(1, 99)}, true); err != nil {
		t.Fatal(err)
	}
	if err := w.Txn([]workload.Row{row(1, 2)}, false); err != nil {
		t.Fatal(err)
	}
	// Conversation 1 seq 2 was committed after the rollback: once it is
	// here, anything of the rolled-back transaction would be too.
	chk := verify.NewChecker(map[int64]int64{1: 2})
	rep := e.consume(chk, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute)
	requireOK(t, rep)
	if rep.Records != 2 {
		t.Fatalf("want 2 records, got %s", rep.String())
	}
}

// SIGKILL mid-stream, restart: every event present, order kept per
// conversation, duplicates only with the same event id; resuming by binlog
// file:pos and by GTID set.
func TestKillMidStreamResumes(t *testing.T) {
	for _, mode := range []string{"file", "gtid"} {
		t.Run(mode, func(t *testing.T) { killMidStream(t, mode) })
	}
}

func killMidStream(t *testing.T, mode string) {
	e := newEnv(t)
	e.positionMode = mode
	p := e.start()
	plan := workload.Generate(2, 0, 200, 20000, 1, 500, 300)
	done := make(chan error, 1)
	go func() { done <- produce(e.writer(), plan) }()

	chk := verify.NewChecker(plan.Last)
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	// Kill once a few thousand records are out and production is still on.
	deadline := time.Now().Add(2 * time.Minute)
	for chk.Report().Unique < 4000 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d records after 2 min", chk.Report().Unique)
		}
		recs, err := cons.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		chk.Add(recs...)
		time.Sleep(20 * time.Millisecond)
	}
	p.kill(t)
	if cp := e.checkpoint(); cp == nil {
		t.Fatal("no checkpoint stored before the kill")
	}
	e.start()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rep := e.consume(chk, cons, 3*time.Minute)
	requireOK(t, rep)
	t.Logf("duplicates after SIGKILL: %d", rep.Duplicates)
}

// A restart with a checkpoint does not re-read from the start: after the
// checkpoint caught up with the binlog, SIGKILL and restart publish no
// duplicate at all; a graceful stop and restart neither.
func TestRestartResumesFromCheckpoint(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	w := e.writer()
	plan := workload.Generate(3, 0, 50, 3000, 1, 100, 100)
	if err := produce(w, plan); err != nil {
		t.Fatal(err)
	}
	chk := verify.NewChecker(plan.Last)
	requireOK(t, e.consume(chk, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute))

	// Wait until the checkpoint reached the end of the binlog, then SIGKILL.
	file, pos := e.masterPos()
	deadline := time.Now().Add(30 * time.Second)
	for cp := e.checkpoint(); cp == nil || cp.File != file || cp.Pos < pos; cp = e.checkpoint() {
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %+v never reached %s:%d", cp, file, pos)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.kill(t)

	p = e.start()
	more := workload.Generate(4, 1000, 20, 500, 1, 50, 100)
	if err := produce(w, more); err != nil {
		t.Fatal(err)
	}
	for k, v := range more.Last {
		plan.Last[k] = v
	}
	chk2 := verify.NewChecker(plan.Last)
	rep := e.consume(chk2, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
	if rep.Duplicates != 0 {
		t.Fatalf("restart after SIGKILL with an up-to-date checkpoint re-published %d records", rep.Duplicates)
	}

	// Graceful stop: the final checkpoint makes the restart duplicate-free too.
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	e.start()
	last := workload.Generate(5, 2000, 10, 200, 1, 20, 100)
	if err := produce(w, last); err != nil {
		t.Fatal(err)
	}
	for k, v := range last.Last {
		plan.Last[k] = v
	}
	chk3 := verify.NewChecker(plan.Last)
	rep = e.consume(chk3, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
	if rep.Duplicates != 0 {
		t.Fatalf("restart after SIGTERM re-published %d records", rep.Duplicates)
	}
}

func mustPoll(t *testing.T, c *verify.Consumer) []verify.Record {
	t.Helper()
	recs, err := c.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// The JSON payload round-trips byte-exact: 4-byte UTF-8, nested objects and
// arrays, odd spacing, escapes, and a payload near 1 MB. On MariaDB (JSON
// is text) the bytes are those inserted; on MySQL (binary JSON, normalised
// at INSERT) those `SELECT payload` returns.
func TestPayloadByteExact(t *testing.T) {
	e := newEnv(t)
	// Records near 1 MB need a produce round larger than the 1 MB default;
	// the dev stack's broker accepts 16 MB (message.max.bytes).
	e.batchBytes = 4000000
	big := `{"blob":"` + strings.Repeat("0123456789abcdef", 1000000/16-2) + `","end":true}`
	payloads := []string{
		`{"text":"hello 😀🎉 𝄞 中文","emoji":"👨‍👩‍👧"}`,
		`{"a":{"b":{"c":[1,2,[3,{"d":null}]]}},"e":[]}`,
		`{ "spaced" :  [ 1 , 2 ] ,"tab":	"x" }`,
		`{"escaped":"quote \" backslash \\ unicode \u00e9 newline \n"}`,
		`[1,"two",{"three":3.0e10},true,false,null]`,
		`"just a string"`,
		big,
	}
	e.start()
	w := e.writer()
	for i, pl := range payloads {
		row := workload.Row{ConversationID: 7, SeqNo: int64(i + 1), SenderID: 1, ReceiverID: 2, Payload: []byte(pl)}
		if err := w.Txn([]workload.Row{row}, false); err != nil {
			t.Fatalf("insert payload %d: %v", i, err)
		}
	}
	chk := verify.NewChecker(map[int64]int64{7: int64(len(payloads))})
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	var recs []verify.Record
	deadline := time.Now().Add(time.Minute)
	for len(recs) < len(payloads) && time.Now().Before(deadline) {
		recs = append(recs, mustPoll(t, cons)...)
		time.Sleep(50 * time.Millisecond)
	}
	chk.Add(recs...)
	requireOK(t, chk.Report())
	if isMySQL() {
		c := e.sql()
		defer c.Close()
		for i := range payloads {
			r, err := c.Execute(fmt.Sprintf("SELECT payload FROM `%s` WHERE conversation_id = 7 AND seq_no = %d", e.outbox, i+1))
			if err != nil {
				t.Fatal(err)
			}
			payloads[i], _ = r.GetString(0, 0)
		}
	}
	for _, r := range recs {
		want := payloads[r.SeqNo-1]
		if !bytes.Equal(r.Value, []byte(want)) {
			t.Errorf("seq %d: payload differs (len %d vs %d): %.80q vs %.80q", r.SeqNo, len(r.Value), len(want), r.Value, want)
		}
	}
	if len(recs[len(recs)-1].Value) < 990000 {
		t.Fatalf("big payload only %d bytes", len(recs[len(recs)-1].Value))
	}
}

// The first run without a checkpoint and without a start option fails with
// a message that names the fix.
func TestFirstRunNeedsStartOption(t *testing.T) {
	e := newEnv(t)
	// --start "" overrides the config's start: no checkpoint, no start.
	p := e.launch("--start", "")
	err := <-p.done
	p.done <- err
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !logHas(p.log, "set source.start") {
		t.Fatalf("error does not name the fix; log at %s", p.log)
	}
}

// Bad start-up input is refused before anything is stored: a --start the
// server does not have as a transaction boundary (past the end of its
// file, inside an event) is checked as "checkpoint set" checks it, and a
// fixed topic that does not exist (no auto-creation) stops the publisher
// instead of retrying for ever. Exit status 1, a message naming the fix, and
// no checkpoint written.
func TestRunBadStart(t *testing.T) {
	c := newEnv(t).sql()
	r, err := binlogStatus(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	file, _ := r.GetString(0, 0)
	for _, tc := range []struct {
		name    string
		args    []string
		topic   string
		wantLog string
	}{
		{"past end", []string{"--start", file + ":999999999"}, "", "is past the end of " + file},
		{"mid event", []string{"--start", file + ":5"}, "", "no event starts at " + file + ":5"},
		{"no topic", []string{"--start", "latest"}, "it.no.such.topic", "create it with the partition count you want"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.topic != "" {
				e.topic = tc.topic
			}
			p := e.launch(tc.args...)
			select {
			case err := <-p.done:
				p.done <- err
			case <-time.After(time.Minute):
				t.Fatal("the publisher did not stop within a minute")
			}
			if code := p.cmd.ProcessState.ExitCode(); code != 1 {
				t.Fatalf("exit code %d, want 1", code)
			}
			if !logHas(p.log, tc.wantLog) {
				b, _ := os.ReadFile(p.log)
				t.Fatalf("log lacks %q:\n%s", tc.wantLog, tail(string(b), 10))
			}
			// A bad start position is refused before anything is stored;
			// a missing topic after the start position is stored (the
			// topics phase), so that the start after the topic is created
			// resumes there.
			want := int64(0)
			if tc.topic != "" {
				want = 1
			}
			rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
			defer rdb.Close()
			if n, err := rdb.Exists(context.Background(), e.key).Result(); err != nil || n != want {
				t.Fatalf("checkpoint key %s: exists=%d, %v; want %d", e.key, n, err, want)
			}
		})
	}
}

// A lost checkpoint (Redis key gone) does not silently restart from "now":
// the publisher refuses, naming the --start position that resumes without
// loss, and that position indeed loses nothing.
func TestLostCheckpointNeedsExplicitStart(t *testing.T) {
	e := newEnv(t)
	e.noMirror = true // the lost checkpoint has no copy either (see TestLostCheckpointMirror)
	p := e.start()
	w := e.writer()
	plan := workload.Generate(6, 0, 30, 1000, 1, 50, 100)
	if err := produce(w, plan); err != nil {
		t.Fatal(err)
	}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	if err := rdb.Del(context.Background(), e.key).Err(); err != nil {
		t.Fatal(err)
	}
	// Events committed while the publisher is down must not be lost.
	more := workload.Generate(7, 100, 10, 300, 1, 30, 100)
	if err := produce(w, more); err != nil {
		t.Fatal(err)
	}
	p = e.launch() // config says start: latest
	err := <-p.done
	p.done <- err
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit code %d, want 1 (refuse to start from latest)", code)
	}
	b, _ := os.ReadFile(p.log)
	m := regexp.MustCompile(`Restart once with --start (\S+:\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("error does not name a --start position:\n%s", b)
	}
	e.start("--start", string(m[1]))
	for k, v := range more.Last {
		plan.Last[k] = v
	}
	rep := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute)
	requireOK(t, rep)
}

// A lost Redis key never leads to a silent start from "latest": the
// checkpoint's copy in the mirror topic (checkpoint.mirror-topic) resumes
// without loss, whatever the topic's shape or content: a template topic
// (whose records were never inspected), and a fixed topic on which nothing
// was published yet (only the first checkpoint was stored).
func TestLostCheckpointMirror(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	lose := func(t *testing.T, e *env) {
		t.Helper()
		if n, err := rdb.Del(context.Background(), e.key).Result(); err != nil || n != 1 {
			t.Fatalf("DEL %s = %d, %v", e.key, n, err)
		}
	}
	t.Run("template", func(t *testing.T) {
		e := newEnv(t)
		topic := e.topic + ".message.created"
		createTopic(t, topic, partitions)
		t.Setenv("CDC_OUTBOX_ROUTER_TOPIC", e.topic+".{event_type}")
		p := e.start()
		plan := workload.Generate(61, 0, 20, 300, 1, 20, 100)
		if err := produce(e.writer(), plan); err != nil {
			t.Fatal(err)
		}
		requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, topic), time.Minute))
		if code := p.stop(t, 30*time.Second); code != 0 {
			t.Fatalf("exit code %d after SIGTERM", code)
		}
		lose(t, e)
		more := workload.Generate(62, 100, 20, 2000, 1, 40, 100) // committed while stopped, Redis key gone
		if err := produce(e.writer(), more); err != nil {
			t.Fatal(err)
		}
		p = e.start() // the config says start: latest
		if !logHas(p.log, "resuming from its copy in the mirror topic") {
			b, _ := os.ReadFile(p.log)
			t.Fatalf("not resumed from the mirror:\n%s", tail(string(b), 8))
		}
		for k, v := range more.Last {
			plan.Last[k] = v
		}
		requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, topic), time.Minute))
		if cp := e.checkpoint(); cp == nil {
			t.Fatal("the copy was not written back to Redis")
		}
		p.stop(t, 30*time.Second)
	})
	t.Run("unused", func(t *testing.T) {
		e := newEnv(t)
		p := e.start() // stores start: latest as the first checkpoint, and its copy
		if code := p.stop(t, 30*time.Second); code != 0 {
			t.Fatalf("exit code %d after SIGTERM", code)
		}
		lose(t, e)
		plan := workload.Generate(63, 0, 20, 1000, 1, 40, 100)
		if err := produce(e.writer(), plan); err != nil {
			t.Fatal(err)
		}
		p = e.start()
		requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
		p.stop(t, 30*time.Second)
		// checkpoint show names both, and which wins.
		out, code := e.cli(nil, "checkpoint", "show")
		if code != 0 || !strings.Contains(out, "mirror "+checkpoint.DefaultMirrorTopic+" (copy):") || !strings.Contains(out, "wins: redis") {
			t.Fatalf("checkpoint show: exit %d:\n%s", code, out)
		}
		// reset deletes both: the next start needs its start option again.
		if out, code := e.cli(nil, "checkpoint", "reset", "--yes"); code != 0 || !strings.Contains(out, "and its copy") {
			t.Fatalf("reset: exit %d:\n%s", code, out)
		}
		if out, code := e.cli(nil, "checkpoint", "show"); code != 0 || !strings.Contains(out, "no copy") || !strings.Contains(out, "wins: none") {
			t.Fatalf("checkpoint show after reset: exit %d:\n%s", code, out)
		}
	})
}

// A checkpoint mirror copy that keeps failing is counted
// (cdc_outbox_checkpoint_mirror_errors_total, alert
// CdcOutboxCheckpointMirrorFailing) while publishing and the checkpoint in
// Redis go on: the mirror topic refuses every copy (max.message.bytes 16,
// MESSAGE_TOO_LARGE), as a topic with a wrong ACL or a broken broker does.
func TestCheckpointMirrorFailureCounted(t *testing.T) {
	e := newEnv(t)
	mirror := e.topic + ".cp"
	conn, err := kafka.Dial("tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := conn.Controller()
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := kafka.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatal(err)
	}
	err = cc.CreateTopics(kafka.TopicConfig{Topic: mirror, NumPartitions: 1, ReplicationFactor: 1, ConfigEntries: []kafka.ConfigEntry{
		{ConfigName: "cleanup.policy", ConfigValue: "compact"}, {ConfigName: "max.message.bytes", ConfigValue: "16"}}})
	cc.Close()
	if err != nil {
		t.Fatalf("create %s: %v", mirror, err)
	}
	t.Setenv("CDC_OUTBOX_CHECKPOINT_MIRROR_TOPIC", mirror)
	addr := freeAddr(t)
	e.extra = fmt.Sprintf("metrics-addr: %s\n", addr)
	p := e.start()
	plan := workload.Generate(71, 0, 20, 500, 1, 20, 100)
	if err := produce(e.writer(), plan); err != nil {
		t.Fatal(err)
	}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	const name = `cdc_outbox_checkpoint_mirror_errors_total{source="default"}`
	deadline := time.Now().Add(30 * time.Second)
	for !(metricFloat(t, addr, name) >= 2) { // NaN (no such series) waits too
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(p.log)
			t.Fatalf("%s = %v after 30 s of refused copies (mirror-interval 1s):\n%s", name, metricFloat(t, addr, name), tail(string(b), 10))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Redis has the checkpoint all along: the copy's failure stops nothing.
	if cp := e.checkpoint(); cp == nil {
		t.Fatal("no checkpoint in Redis")
	}
	if !logHas(p.log, "cannot copy the checkpoint to the mirror topic") {
		t.Error("the log does not say the copy failed")
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}
