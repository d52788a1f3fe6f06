//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

// cli runs `cdc-outbox <args> --config <e's config>` with extra environment
// and returns its combined output and exit code.
func (e *env) cli(env []string, args ...string) (string, int) {
	e.t.Helper()
	cmd := exec.Command(binary, append(args, "--config", e.config())...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		e.t.Fatalf("%v did not finish:\n%s", args, out.String())
	}
	e.t.Logf("cdc-outbox %s (exit %d):\n%s", strings.Join(args, " "), cmd.ProcessState.ExitCode(), out.String())
	return out.String(), cmd.ProcessState.ExitCode()
}

// oldestBinlog returns the first file of SHOW BINARY LOGS.
func (e *env) oldestBinlog() string {
	c := e.sql()
	defer c.Close()
	r, err := c.Execute("SHOW BINARY LOGS")
	if err != nil {
		e.t.Fatal(err)
	}
	f, _ := r.GetString(0, 0)
	return f
}

// publishSome starts a publisher, publishes a small workload, waits until
// it is all in the topic and stops the publisher with SIGTERM.
func (e *env) publishSome(seed uint64) *workload.Plan {
	e.t.Helper()
	p := e.start()
	plan := workload.Generate(seed, 0, 20, 300, 1, 20, 100)
	if err := produce(e.writer(), plan); err != nil {
		e.t.Fatal(err)
	}
	requireOK(e.t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	if code := p.stop(e.t, 30*time.Second); code != 0 {
		e.t.Fatalf("exit code %d after SIGTERM", code)
	}
	return plan
}

// checkpoint show, status, set (valid, purged file, mid-transaction,
// publisher running) and reset on the real stack.
func TestCheckpointCommands(t *testing.T) {
	e := newEnv(t)
	e.publishSome(11)
	cp := e.checkpoint()
	if cp == nil || cp.Partitions[e.topic] != partitions {
		t.Fatalf("checkpoint without the topic's partition count: %+v", cp)
	}

	out, code := e.cli(nil, "checkpoint", "show")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("position    %s:%d", cp.File, cp.Pos)) ||
		!strings.Contains(out, fmt.Sprintf("partitions  %s=%d", e.topic, partitions)) || !strings.Contains(out, "event time") {
		t.Fatalf("show: exit %d", code)
	}
	out, code = e.cli(nil, "checkpoint", "show", "--json")
	var shown struct {
		Key        string
		Checkpoint struct{ File string }
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil || shown.Key != e.key || shown.Checkpoint.File != cp.File {
		t.Fatalf("show --json: exit %d, %v, %+v", code, err, shown)
	}

	out, code = e.cli(nil, "status", "--json")
	var st struct {
		Checkpoint *struct{ File string }
		BinlogEnd  struct{ File string } `json:"binlog_end"`
		LagBytes   *int64                `json:"lag_bytes"`
		LagSeconds *int64                `json:"lag_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Checkpoint == nil || st.BinlogEnd.File == "" ||
		st.LagBytes == nil || *st.LagBytes < 0 || st.LagSeconds == nil {
		t.Fatalf("status --json: exit %d, %v", code, err)
	}
	if out, code = e.cli(nil, "status"); code != 0 || !strings.Contains(out, "lag bytes") || !strings.Contains(out, "binlog end") {
		t.Fatalf("status: exit %d", code)
	}

	// A binlog file the server does not have (purged, or never existed).
	oldest := e.oldestBinlog()
	out, code = e.cli(nil, "checkpoint", "set", "mariadb-bin.999999:4")
	if code != 1 || !strings.Contains(out, "oldest available is "+oldest+":4") {
		t.Fatalf("set to a missing binlog: exit %d, want 1 naming %s:4", code, oldest)
	}
	// Inside an event.
	if out, code = e.cli(nil, "checkpoint", "set", fmt.Sprintf("%s:%d", cp.File, cp.Pos-1)); code != 1 || !strings.Contains(out, "FAILED") {
		t.Fatalf("set inside an event: exit %d, want 1", code)
	}
	// An unparsable GTID set, and a GTID position in file mode: usage.
	if _, code = e.cli(nil, "checkpoint", "set", "gtid:0-1-2"); code != 2 {
		t.Fatalf("set gtid in file mode: exit %d, want 2", code)
	}
	if out, code = e.cli([]string{"CDC_OUTBOX_SOURCE_POSITION_MODE=gtid"}, "checkpoint", "set", "gtid:not-a-set"); code != 1 || !strings.Contains(out, "not a "+serverFlavor()+" GTID set") {
		t.Fatalf("set to an invalid GTID set: exit %d, want 1", code)
	}
	if after := e.checkpoint(); after == nil || after.File != cp.File || after.Pos != cp.Pos {
		t.Fatalf("a refused set changed the checkpoint: %+v", after)
	}

	// A valid position: the binlog end right now (a transaction boundary).
	end := e.binlogEnd()
	file, pos := end.File, end.Pos
	out, code = e.cli(nil, "checkpoint", "set", fmt.Sprintf("%s:%d", file, pos))
	if code != 0 || !strings.Contains(out, "old:") || !strings.Contains(out, fmt.Sprintf("position    %s:%d", cp.File, cp.Pos)) ||
		!strings.Contains(out, fmt.Sprintf("position    %s:%d", file, pos)) {
		t.Fatalf("set: exit %d", code)
	}
	// with the GTID set there (MariaDB: BINLOG_GTID_POS; MySQL: the file's
	// Previous_gtids and its GTIDs up to pos), equal to the server's
	if now := e.checkpoint(); now == nil || now.File != file || now.Pos != pos || now.GTIDSet == "" || !sameGTIDSet(t, now.GTIDSet, end.GTIDSet) || now.Partitions[e.topic] != partitions {
		t.Fatalf("after set: %+v, want the GTID set %q", now, end.GTIDSet)
	}

	// While the publisher runs (its server_id is registered): refused
	// without --force.
	p := e.start()
	file, pos = e.masterPos()
	if out, code = e.cli(nil, "checkpoint", "set", fmt.Sprintf("%s:%d", file, pos)); code != 1 || !strings.Contains(out, "seems to be running") {
		t.Fatalf("set while running: exit %d, want 1", code)
	}
	if out, code = e.cli(nil, "checkpoint", "set", "--force", fmt.Sprintf("%s:%d", file, pos)); code != 0 || !strings.Contains(out, "warning: --force") {
		t.Fatalf("set --force while running: exit %d, want 0", code)
	}
	// reset while the publisher holds the lease: refused, the key kept
	// (checked in the delete's own atomic step).
	if out, code = e.cli(nil, "checkpoint", "reset", "--yes"); code != 1 || !strings.Contains(out, "seems to be running") || e.checkpoint() == nil {
		t.Fatalf("reset while running: exit %d, want 1 and the key kept:\n%s", code, out)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// reset: needs --yes.
	if out, code = e.cli(nil, "checkpoint", "reset"); code != 2 || !strings.Contains(out, "add --yes") || e.checkpoint() == nil {
		t.Fatalf("reset without --yes: exit %d, want 2 and the key kept", code)
	}
	if out, code = e.cli(nil, "checkpoint", "reset", "--yes"); code != 0 || !strings.Contains(out, "deleted") || e.checkpoint() != nil {
		t.Fatalf("reset --yes: exit %d, want 0 and the key gone", code)
	}
	if out, code = e.cli(nil, "checkpoint", "show"); code != 0 || !strings.Contains(out, "no checkpoint") {
		t.Fatalf("show without checkpoint: exit %d", code)
	}
	if _, code = e.cli(nil, "status"); code != 1 {
		t.Fatalf("status without checkpoint: exit %d, want 1", code)
	}
}

// checkpoint set <file>:<pos> in the middle of a binlog file, then a run in
// GTID mode: the stored GTID set is the server's at that position (MySQL:
// computed from the file's Previous_gtids and its GTIDs up to pos, a
// tagged one among them), so the run publishes exactly the rows after the
// position: none before it again, none after it skipped.
func TestCheckpointCommandsGTIDMode(t *testing.T) {
	e := newEnv(t)
	e.positionMode = "gtid"
	w := e.writer()
	if err := produce(w, workload.Generate(61, 0, 10, 200, 1, 20, 50)); err != nil {
		t.Fatal(err)
	}
	if isMySQL() {
		// a tagged GTID (MySQL 8.4+) before the position
		c := e.sql()
		for _, q := range []string{"SET gtid_next='AUTOMATIC:cdc_it'", "CREATE TABLE IF NOT EXISTS tg_" + runID + " (a INT)", "SET gtid_next='AUTOMATIC'"} {
			if _, err := c.Execute(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		t.Cleanup(func() { c.Execute("DROP TABLE IF EXISTS tg_" + runID); c.Close() })
	}
	at := e.binlogEnd()
	before := e.idsAfter(0)
	if err := produce(w, workload.Generate(62, 100, 10, 300, 1, 20, 50)); err != nil {
		t.Fatal(err)
	}
	want := e.idsAfter(before[len(before)-1])
	out, code := e.cli(nil, "checkpoint", "set", fmt.Sprintf("%s:%d", at.File, at.Pos))
	cp := e.checkpoint()
	if code != 0 || cp == nil || cp.File != at.File || cp.Pos != at.Pos || cp.GTIDSet == "" || !sameGTIDSet(t, cp.GTIDSet, at.GTIDSet) {
		t.Fatalf("checkpoint set %s:%d: exit %d, stored %+v, want the GTID set %q\n%s", at.File, at.Pos, code, cp, at.GTIDSet, out)
	}
	p := e.start()
	if !logHas(p.log, `"mode":"gtid"`) {
		t.Fatal("the run does not stream in GTID mode")
	}
	recs := e.readTopic(len(want), time.Minute)
	count := map[string]int{}
	for _, r := range recs {
		count[r.EventID]++
	}
	wanted := map[string]bool{}
	for _, id := range want {
		wanted[strconv.FormatUint(id, 10)] = true
		if n := count[strconv.FormatUint(id, 10)]; n != 1 {
			t.Errorf("row %d after the position published %d times, want once", id, n)
		}
	}
	for id := range count {
		if !wanted[id] {
			t.Errorf("row %s, before the position, published again", id)
		}
	}
	t.Logf("checkpoint set %s:%d stored GTID set %s; %d rows after it published once", at.File, at.Pos, cp.GTIDSet, len(want))
}

// check passes on a good setup and names the fix for a missing topic and
// a missing dead-letter topic.
func TestCheckCommand(t *testing.T) {
	e := newEnv(t)
	out, code := e.cli(nil, "check")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("OK    topic        %s (router.topic) exists, %d partitions", e.topic, partitions)) ||
		!strings.Contains(out, "OK    redis") || !strings.Contains(out, "OK    outbox") || !strings.Contains(out, "result: OK") {
		t.Fatalf("check: exit %d, want 0", code)
	}
	missing := e.topic + ".missing"
	out, code = e.cli([]string{"CDC_OUTBOX_ROUTER_TOPIC=" + missing, "CDC_OUTBOX_KAFKA_ON_POISON=dead-letter",
		"CDC_OUTBOX_KAFKA_DEAD_LETTER_TOPIC=" + missing + ".dlq"}, "check")
	if code != 1 || !strings.Contains(out, "FAIL  topic        "+missing+" (router.topic) does not exist: create it") ||
		!strings.Contains(out, "FAIL  dead-letter  "+missing+".dlq (kafka.dead-letter-topic) does not exist") || !strings.Contains(out, "result: FAILED") {
		t.Fatalf("check with missing topics: exit %d, want 1 with FAIL lines", code)
	}
	// check never creates a topic.
	if _, err := sink.Partitions(context.Background(), sink.Config{Brokers: brokers}, missing); err == nil {
		t.Fatalf("check created %s", missing)
	}
	// A batch larger than the topic accepts fails check, naming both.
	out, code = e.cli([]string{"CDC_OUTBOX_KAFKA_BATCH_BYTES=50000000"}, "check")
	if code != 1 || !strings.Contains(out, "FAIL  topic        kafka.batch-bytes 50000000 exceeds "+e.topic+"'s max.message.bytes") {
		t.Fatalf("check with batch-bytes above max.message.bytes: exit %d, want 1 with a FAIL line", code)
	}
	// A start option run would refuse fails check too.
	out, code = e.cli([]string{"CDC_OUTBOX_SOURCE_START=bogus"}, "check")
	if code != 1 || !strings.Contains(out, "FAIL  config       source.start:") || strings.Contains(out, "and no source.start") {
		t.Fatalf("check with source.start bogus: exit %d, want 1 with a FAIL line naming source.start", code)
	}
}

// alterPartitions raises topic's partition count with Kafka's admin tool
// and waits until the metadata shows it.
func alterPartitions(t *testing.T, topic string, n int) {
	t.Helper()
	out, err := exec.Command("../../scripts/dev-stack.sh", "kafka-topics", "--alter", "--topic", topic, "--partitions", fmt.Sprint(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-topics --alter: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		ids, err := sink.Partitions(context.Background(), sink.Config{Brokers: brokers}, topic)
		if err == nil && len(ids) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d partitions after --alter (%v), want %d", topic, len(ids), err, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A topic whose partition count grew since the checkpoint was written:
// run refuses (exit 1) naming the change and how to confirm it; check
// fails; --accept-partition-change starts and stores the new count.
func TestPartitionIncreaseRefused(t *testing.T) {
	e := newEnv(t)
	e.publishSome(12)
	alterPartitions(t, e.topic, partitions+2)

	p := e.launch()
	err := <-p.done
	p.done <- err
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit code %d, want 1 (partition count changed)", code)
	}
	want := fmt.Sprintf("%s: %d → %d partitions", e.topic, partitions, partitions+2)
	if !logHas(p.log, want) || !logHas(p.log, "--accept-partition-change") || !logHas(p.log, "per-conversation order") {
		b, _ := os.ReadFile(p.log)
		t.Fatalf("error does not explain the change (%q) and the confirmation:\n%s", want, tail(string(b), 5))
	}
	b, _ := os.ReadFile(p.log)
	t.Logf("refused:\n%s", tail(string(b), 1))
	if out, code := e.cli(nil, "check"); code != 1 || !strings.Contains(out, "FAIL  checkpoint") || !strings.Contains(out, want) {
		t.Fatalf("check after the change: exit %d, want 1", code)
	}

	p = e.start("--accept-partition-change")
	if !logHas(p.log, "partition count change accepted") {
		t.Fatal("accepted change not logged")
	}
	if cp := e.checkpoint(); cp == nil || cp.Partitions[e.topic] != partitions+2 {
		t.Fatalf("new count not stored: %+v", cp)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	// Confirmed once: the next start needs no flag.
	p = e.start()
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// A lost checkpoint with --recover-checkpoint: run resumes from the
// position the topic's binlog_txn_end headers give, logs it, and loses
// nothing committed while the publisher was down.
func TestRecoverCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.noMirror = true // the lost checkpoint has no copy either (see TestLostCheckpointMirror)
	plan := e.publishSome(13)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	if err := rdb.Del(context.Background(), e.key).Err(); err != nil {
		t.Fatal(err)
	}
	more := workload.Generate(14, 100, 10, 300, 1, 30, 100)
	if err := produce(e.writer(), more); err != nil {
		t.Fatal(err)
	}
	p := e.start("--recover-checkpoint") // the config says start: latest
	b, _ := os.ReadFile(p.log)
	m := regexp.MustCompile(`.*recovering it from the topic.*"resume":"([^"]+)".*`).FindSubmatch(b)
	if m == nil || !logHas(p.log, `"topic":"`+e.topic+`"`) {
		t.Fatalf("recovery not logged with position and topic:\n%s", tail(string(b), 10))
	}
	t.Logf("recovered:\n%s", m[0])
	if cp := e.checkpoint(); cp == nil {
		t.Fatal("no checkpoint stored after recovery")
	}
	for k, v := range more.Last {
		plan.Last[k] = v
	}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	// --start and --recover-checkpoint together are a usage error.
	p = e.launch("--recover-checkpoint", "--start", "latest")
	err := <-p.done
	p.done <- err
	if code := p.cmd.ProcessState.ExitCode(); code != 2 {
		t.Fatalf("--start with --recover-checkpoint: exit %d, want 2", code)
	}
}

// Without REPLICATION MASTER ADMIN the server-id conflict cannot be checked:
// check says so as a WARN line of its report (naming the GRANT) instead of
// a log line in the middle of it, and does not claim the server_id unused.
func TestCheckWarnsWithoutReplicaListing(t *testing.T) {
	onlyMariaDB(t, "on MySQL listing replicas needs REPLICATION SLAVE, which the binlog dump needs anyway")
	e := newEnv(t)
	user := "chk_" + runID
	c := e.sql()
	defer c.Close()
	for _, q := range []string{
		"DROP USER IF EXISTS '" + user + "'@'%'",
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY 'pw'",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '" + user + "'@'%'",
		"GRANT SELECT ON " + mysqlDB + "." + e.outbox + " TO '" + user + "'@'%'",
	} {
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer c.Execute("DROP USER IF EXISTS '" + user + "'@'%'")
	out, code := e.cli([]string{"CDC_OUTBOX_SOURCE_USER=" + user, "CDC_OUTBOX_SOURCE_PASSWORD=pw"}, "check")
	result := "result: OK (8 checks, 4 warnings)" // 3 more: plaintext to MariaDB, Kafka and Redis
	if flavor == flavorMariaDB11 {
		// MariaDB 11.4+ enables TLS by default (a generated certificate):
		// an OK line for the source's TLS instead of a plaintext WARN
		result = "result: OK (9 checks, 3 warnings)"
	}
	if code != 0 || !strings.Contains(out, "WARN  source       cannot list replicas") || !strings.Contains(out, "GRANT REPLICATION MASTER ADMIN") ||
		strings.Contains(out, "unused") || !strings.Contains(out, "not checked (see WARN)") || !strings.Contains(out, result) {
		t.Fatalf("check without REPLICATION MASTER ADMIN: exit %d, want 0 with a WARN line:\n%s", code, out)
	}
	// The variables are named, their values never printed.
	if !strings.Contains(out, "INFO  config       source.password from CDC_OUTBOX_SOURCE_PASSWORD") ||
		!strings.Contains(out, "INFO  config       source.user from CDC_OUTBOX_SOURCE_USER") || strings.Contains(out, "pw ") {
		t.Fatalf("check does not name the settings from the environment:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "OK ") && !strings.HasPrefix(line, "WARN ") && !strings.HasPrefix(line, "INFO ") && !strings.HasPrefix(line, "result: ") {
			t.Fatalf("check printed a line that is not part of the report: %q\n%s", line, out)
		}
	}
	// A typo in source.table: the server answers "access denied" for a
	// table the user may not see, also when it does not exist. The error
	// names both causes and the tables the user can read (it named only
	// the GRANT, which then failed: the table does not exist).
	out, code = e.cli([]string{"CDC_OUTBOX_SOURCE_USER=" + user, "CDC_OUTBOX_SOURCE_PASSWORD=pw", "CDC_OUTBOX_SOURCE_TABLE=" + e.outbox + "_typo"}, "check")
	if code != 1 || !strings.Contains(out, "or the table does not exist: check source.table ("+e.outbox+"_typo); the user can read in "+mysqlDB+": "+e.outbox) {
		t.Fatalf("check with a typo in source.table: exit %d, want 1 naming the table the user can read:\n%s", code, out)
	}
}

// A checkpoint whose binlog is no longer on the server: check fails under
// source.on-purged fail (the default), and warns, saying what run will do,
// under earliest/latest (events skipped) or with source.archive.
func TestCheckPurgedCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.saveCheckpoint(checkpoint.Checkpoint{File: "mariadb-bin.000000", Pos: 4, ServerID: e.sourceServerID(), Flavor: serverFlavor()})
	for _, c := range []struct {
		env  []string
		code int
		want string
	}{
		{nil, 1, "FAIL  checkpoint   binlog: start position not available on the server"},
		{[]string{"CDC_OUTBOX_SOURCE_ON_PURGED=earliest"}, 0, "WARN  checkpoint   binlog: start position not available on the server"},
		{[]string{"CDC_OUTBOX_SOURCE_ON_PURGED=latest"}, 0, "events of the purged binlog are NOT published"},
		{[]string{"CDC_OUTBOX_SOURCE_ARCHIVE=" + t.TempDir()}, 0, "run catches up from source.archive"},
	} {
		out, code := e.cli(c.env, "check")
		if code != c.code || !strings.Contains(out, c.want) {
			t.Fatalf("check %v: exit %d, want %d with %q:\n%s", c.env, code, c.code, c.want, out)
		}
	}
}

// run serves Prometheus metrics on metrics-addr: after a workload every
// record is counted as produced on the topic, with the commit time of the
// newest acknowledged transaction and the ack delay.
func TestMetricsEndpoint(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e.extra = "metrics-addr: " + addr + "\n"
	p := e.start()
	defer p.stop(t, 30*time.Second)
	plan := workload.Generate(31, 0, 20, 300, 1, 20, 100)
	if err := produce(e.writer(), plan); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`cdc_outbox_records_produced_total{source="default",table="%s.%s",topic=%q} %d`, mysqlDB, e.outbox, e.topic, plan.Total)
	var body string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		res, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			body = string(b)
			if strings.Contains(body, want+"\n") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %q (err %v):\n%s", want, err, body)
		}
	}
	for _, re := range []string{`cdc_outbox_acked_commit_timestamp_seconds\{source="default"\} 1\.[0-9.e+]+`, `cdc_outbox_ack_delay_seconds\{source="default"\} [0-9.e+-]+`,
		`cdc_outbox_produce_seconds_count\{result="ok",source="default"\} [1-9]`, `cdc_outbox_pipeline_restarts_total\{source="default"\} 0`} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("/metrics lacks %s", re)
		}
	}
	// Idle and everything acknowledged: caught up (the next heartbeat,
	// heartbeat-period 1 s, says so), 0 s behind, connected, ready.
	get := func(path string) (int, string) {
		res, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, string(b)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, body = get("/metrics")
		if strings.Contains(body, `cdc_outbox_source_caught_up{source="default"} 1`+"\n") && strings.Contains(body, `cdc_outbox_seconds_behind_source{source="default"} 0`+"\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never caught up with 0 s behind:\n%s", grepLines(body, "cdc_outbox_source_", "cdc_outbox_seconds_behind"))
		}
	}
	if !strings.Contains(body, `cdc_outbox_source_connected{source="default"} 1`+"\n") {
		t.Errorf("not connected:\n%s", grepLines(body, "cdc_outbox_source_"))
	}
	if code, b := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %s", code, b)
	}
	if code, b := get("/readyz"); code != http.StatusOK || !strings.Contains(b, "streaming") {
		t.Errorf("/readyz = %d %s, want 200 streaming", code, b)
	}
	// lag_bytes 0 once the checkpoint passed the binlog's end: polled, as
	// another writer on the server (unrelated traffic) moves the end on.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, b := get("/status")
		if code == http.StatusOK && strings.Contains(b, `"key": "`+e.key+`"`) && strings.Contains(b, `"lag_bytes": 0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("/status = %d %s", code, b)
			break
		}
	}
	// The running pipeline measures the binlog files every 15 s: the
	// retention headroom becomes a number (the checkpoint's distance from
	// the oldest file's start), NaN before.
	headroom := regexp.MustCompile(`cdc_outbox_retention_headroom_bytes\{source="default"\} ([0-9.e+]+)\n`)
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		_, body = get("/metrics")
		if m := headroom.FindStringSubmatch(body); m != nil && m[1] != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retention_headroom_bytes never measured:\n%s", grepLines(body, "cdc_outbox_retention_headroom"))
		}
	}
}

// grepLines keeps the lines of text containing any of subs.
func grepLines(text string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// Partitions added while run is live: the publisher stops (exit 1) at the
// next round, before producing anything with the new count, so no
// conversation moves partition; the error is the start-time one, naming
// --accept-partition-change. Nothing published before is lost.
func TestPartitionIncreaseWhileRunning(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	plan := workload.Generate(43, 0, 20, 300, 1, 20, 100)
	if err := produce(e.writer(), plan); err != nil {
		t.Fatal(err)
	}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	alterPartitions(t, e.topic, partitions+2)
	// Keep writing: the publisher sees the new count within its metadata
	// refresh (2 s); rounds before that still go out with the old count.
	w := e.writer()
	for i, deadline := 0, time.Now().Add(time.Minute); ; i++ {
		select {
		case err := <-p.done:
			p.done <- err
		default:
			if time.Now().After(deadline) {
				t.Fatal("the publisher kept running after the partition count changed")
			}
			if err := produce(w, workload.Generate(uint64(44+i), int64(1000+100*i), 5, 5, 1, 5, 100)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		break
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	want := fmt.Sprintf("%s: %d → %d partitions", e.topic, partitions, partitions+2)
	if !logHas(p.log, want) || !logHas(p.log, "noticed while running") || !logHas(p.log, "--accept-partition-change") {
		b, _ := os.ReadFile(p.log)
		t.Fatalf("error does not explain the change (%q):\n%s", want, tail(string(b), 5))
	}
	for part := partitions; part < partitions+2; part++ {
		conn, err := kafka.DialLeader(context.Background(), "tcp", brokers[0], e.topic, part)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil || last != 0 {
			t.Fatalf("new partition %d holds %d records (err %v): keys moved", part, last, err)
		}
	}
}

// Redis persisting by RDB snapshots only: check passes with a WARN (a
// crash loses recent checkpoint writes: more duplicates, nothing lost);
// with neither AOF nor snapshots it fails.
func TestCheckRedisPersistence(t *testing.T) {
	e := newEnv(t)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ctx := context.Background()
	orig := map[string]string{}
	for _, k := range []string{"appendonly", "save"} {
		v, err := rdb.ConfigGet(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		orig[k] = v[k]
	}
	defer func() {
		for k, v := range orig {
			if err := rdb.ConfigSet(ctx, k, v).Err(); err != nil {
				t.Errorf("restore %s: %v", k, err)
			}
		}
	}()
	set := func(k, v string) {
		if err := rdb.ConfigSet(ctx, k, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	set("appendonly", "no")
	set("save", "3600 1")
	if out, code := e.cli(nil, "check"); code != 0 || !strings.Contains(out, "WARN  redis") || !strings.Contains(out, "appendonly no") {
		t.Fatalf("RDB only: exit %d, want 0 with a WARN line:\n%s", code, out)
	}
	set("save", "")
	if out, code := e.cli(nil, "check"); code != 1 || !strings.Contains(out, "FAIL  redis") {
		t.Fatalf("no persistence: exit %d, want 1 with a FAIL line:\n%s", code, out)
	}
}

// A template topic first written while running (no row of its event type
// at start) is stored with the checkpoint at its first use, so a partition
// change made while the publisher is stopped is refused at the next start
// like any other.
func TestTemplateTopicPartitionsStored(t *testing.T) {
	e := newEnv(t)
	topic := e.topic + ".message.created"
	createTopic(t, topic, partitions)
	t.Setenv("CDC_OUTBOX_ROUTER_TOPIC", e.topic+".{event_type}")
	p := e.start()
	plan := workload.Generate(45, 0, 10, 100, 1, 10, 100)
	if err := produce(e.writer(), plan); err != nil {
		t.Fatal(err)
	}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, topic), time.Minute))
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if cp := e.checkpoint(); cp == nil || cp.Partitions[topic] != partitions {
		t.Fatalf("checkpoint does not store %s's partition count: %+v", topic, cp)
	}
	alterPartitions(t, topic, partitions+2)
	p = e.launch()
	err := <-p.done
	p.done <- err
	if code := p.cmd.ProcessState.ExitCode(); code != 1 || !logHas(p.log, fmt.Sprintf("%s: %d → %d partitions", topic, partitions, partitions+2)) {
		b, _ := os.ReadFile(p.log)
		t.Fatalf("restart after the change: exit %d, want 1 naming the change:\n%s", code, tail(string(b), 5))
	}
}
