//go:build integration

package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// runVerify runs `cdc-outbox verify` and returns its exit code and output.
func (e *env) runVerify(args ...string) (int, string) {
	e.t.Helper()
	out, err := exec.Command(binary, append([]string{"verify", "--config", e.config()}, args...)...).CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		e.t.Fatal(err)
	}
	return 0, string(out)
}

// `cdc-outbox verify` finds events committed but not published, names
// them, exits 1; once the publisher caught up it exits 0 and counts the
// duplicates of a crash.
func TestVerifyCommand(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	w := e.writer()
	plan := workload.Generate(8, 0, 40, 2000, 1, 100, 100)
	if err := produce(w, plan); err != nil {
		t.Fatal(err)
	}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	if code, out := e.runVerify(); code != 0 || !strings.Contains(out, "missing            0") || !strings.Contains(out, "result: OK") {
		t.Fatalf("verify after a clean run: exit %d\n%s", code, out)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// Committed while the publisher is down: missing until it runs again.
	more := workload.Generate(9, 1000, 3, 3, 3, 3, 50)
	if err := produce(w, more); err != nil {
		t.Fatal(err)
	}
	code, out := e.runVerify()
	if code != 1 || !strings.Contains(out, "missing            3") || !strings.Contains(out, "missing event ids (first 3): 2001 2002 2003") {
		t.Fatalf("verify with 3 unpublished events: exit %d\n%s", code, out)
	}
	e.start()
	if code, out := e.runVerify("--wait", "60s"); code != 0 {
		t.Fatalf("verify after catching up: exit %d\n%s", code, out)
	}
}

// verify without --table on a source of 2 sharded tables publishing to
// one topic checks each in turn: one report per table, exit 1 naming the
// table with missing events; two tables sharing an event id on that topic
// are refused (records name no table), naming the tables and the id.
func TestVerifySeveralTables(t *testing.T) {
	e := newEnv(t)
	base := "sh_" + e.name
	tables := []string{base + "_00", base + "_01"}
	for _, tb := range tables {
		e.exec("CREATE TABLE " + tb + " LIKE " + e.outbox)
	}
	t.Cleanup(func() {
		for _, tb := range tables {
			e.exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	// Distinct ids per shard (as with a global id, or AUTO_INCREMENT starts).
	e.exec("ALTER TABLE " + tables[1] + " AUTO_INCREMENT = 1000001")
	e.sourceExtra = fmt.Sprintf("  tables:\n    - pattern: '%s\\.%s_[0-9]+'\n", mysqlDB, base)
	p := e.start()
	seq := map[int64]int64{}
	insert := func(shard int, convs ...int64) {
		stmts := []string{"BEGIN"}
		for _, c := range convs {
			seq[c]++
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('message.created', %d, %d, %d, 1, 2, '{}')",
				tables[shard], c, c*1000+seq[c], seq[c]))
		}
		e.exec(append(stmts, "COMMIT")...)
	}
	for i := 0; i < 10; i++ {
		insert(0, 2, 4) // shard 00: even conversations
		insert(1, 1, 3) // shard 01: odd ones
	}
	pollTopic(t, e.topic, 40, 2*time.Minute)
	code, out := e.runVerify()
	t.Logf("verify (exit %d):\n%s", code, out)
	for _, tb := range tables {
		if !strings.Contains(out, "table "+mysqlDB+"."+tb+"\nevent ids") {
			t.Fatalf("verify: no report for %s: exit %d\n%s", tb, code, out)
		}
	}
	if code != 0 || strings.Count(out, "rows in table      20\n") != 2 || strings.Count(out, "missing            0\n") != 2 ||
		!strings.Contains(out, "event ids          1000001 … 1000020") || !strings.Contains(out, "result: OK (2 tables)") {
		t.Fatalf("verify of 2 published tables: exit %d, want 0 with 2 reports of 20 rows\n%s", code, out)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// Committed to shard 01 while the publisher is down.
	insert(1, 1, 3, 5)
	code, out = e.runVerify()
	t.Logf("verify (exit %d):\n%s", code, out)
	if code != 1 || !strings.Contains(out, "missing event ids (first 3): 1000021 1000022 1000023") ||
		!strings.Contains(out, fmt.Sprintf("result: FAILED (events lost, reordered or split in 1 of 2 tables: %s.%s)", mysqlDB, tables[1])) {
		t.Fatalf("verify with 3 unpublished events in %s: exit %d, want 1 naming it\n%s", tables[1], code, out)
	}
	if i := strings.Index(out, "table "+mysqlDB+"."+tables[1]); i < 0 || !strings.Contains(out[:i], "missing            0\n") {
		t.Fatalf("verify: %s's report should have nothing missing\n%s", tables[0], out)
	}
	// --table still checks one.
	if code, out := e.runVerify("--table", tables[0]); code != 0 || strings.Contains(out, tables[1]) || !strings.Contains(out, "result: OK\n") {
		t.Fatalf("verify --table %s: exit %d, want 0 with its report only\n%s", tables[0], code, out)
	}

	// Shard 00 gets an id shard 01 holds: records can no longer be told apart.
	e.exec(fmt.Sprintf("INSERT INTO %s (id, event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES (1000005, 'message.created', 8, 8001, 1, 1, 2, '{}')", tables[0]))
	code, out = e.runVerify()
	t.Logf("verify (exit %d):\n%s", code, out)
	if code != 2 || !strings.Contains(out, "both publish to topic "+e.topic+" and both hold event id 1000005") || !strings.Contains(out, "--table") {
		t.Fatalf("verify of 2 tables sharing an id: exit %d, want 2 naming the id\n%s", code, out)
	}
}
