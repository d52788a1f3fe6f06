//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/redis/go-redis/v9"
)

// Binlog rotation, purged binlogs and MariaDB GTID domains, "SQL in →
// records out" on the real stack.
//
// Effect on other tests of the shared stack: FLUSH BINARY LOGS only
// rotates (tests compare positions they read themselves). PURGE BINARY
// LOGS TO <current file> removes the files older than the current one:
// tests that start at "latest" (all of them, except those that capture a
// position and read it back within themselves) are unaffected when the
// tests run sequentially, as in CI. Run these against a private stack
// when others use the shared one concurrently (see the brief in
// docs/operations.md, "purged binlogs"). gtid_domain_id=2 transactions
// add domain 2 to the server's GTID state for good; GTID-mode tests then
// carry two domains, which they handle (TestGTIDMultiDomain).

func (e *env) exec(qs ...string) {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	for _, q := range qs {
		if _, err := c.Execute(q); err != nil {
			e.t.Fatalf("%s: %v", q, err)
		}
	}
}

// FLUSH BINARY LOGS several times while publishing: no gap, records carry
// positions in the new files, the checkpoint moves across files.
func TestRotationFlushBinaryLogs(t *testing.T) {
	e := newEnv(t)
	first, _ := e.masterPos()
	e.start()
	plan := workload.Generate(800, 0, 100, 6000, 1, 200, 200)
	pr := e.produceBackground(plan, 2000)
	for i := 0; i < 4; i++ {
		e.waitPublished(plan, 600*(i+1), time.Minute)
		e.exec("FLUSH BINARY LOGS")
	}
	rep := e.finish("FLUSH BINARY LOGS x4 while publishing", pr, -1)
	if rep.Duplicates != 0 {
		t.Fatalf("duplicates without a fault: %s", rep.String())
	}
	last, _ := e.masterPos()
	files := map[string]int{}
	recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), plan.Total, time.Minute)
	for _, r := range recs {
		files[strings.Split(r.Headers["binlog_pos"], ":")[0]]++
	}
	if len(files) < 4 {
		t.Fatalf("records span %d binlog files (%v), want at least 4 after 4 rotations", len(files), files)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		cp := e.checkpoint()
		if cp != nil && cp.File != first && binlog.ComparePos(binlog.Position{File: cp.File}, binlog.Position{File: first}) > 0 {
			t.Logf("binlog %s → %s; checkpoint %s:%d; records per file %v", first, last, cp.File, cp.Pos, files)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %+v did not move past %s", cp, first)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// purgeTo purges the binlogs before file, retrying: MariaDB keeps a file
// until its binlog checkpoint (InnoDB's flush) and a lingering dump thread
// have moved past it, and PURGE then silently leaves it.
func (e *env) purgeTo(file string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.exec(fmt.Sprintf("PURGE BINARY LOGS TO '%s'", file))
		oldest := e.oldestBinlog()
		if oldest == file {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("oldest binlog %s after PURGE TO %s for 30 s (a replica holding an old file?)", oldest, file)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// setEnv sets a CDC_OUTBOX_* override for the publishers launched after it.
func setEnv(t *testing.T, k, v string) { t.Setenv(k, v) }

// A checkpoint whose binlog file was purged: fail (default) names the
// stored and the oldest position; earliest resumes at the oldest binlog
// with a Warn and publishes what it holds; latest skips to the end.
func TestPurgedCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.publishSome(810)
	cp := e.checkpoint()
	e.exec("FLUSH BINARY LOGS", "FLUSH BINARY LOGS")
	// Written after the rotation: in the file that survives the purge.
	after := workload.Generate(811, 1000, 20, 200, 1, 10, 100)
	if err := produce(e.writer(), after); err != nil {
		t.Fatal(err)
	}
	cur, _ := e.masterPos()
	e.purgeTo(cur)

	out, code := e.cli(nil, "status")
	if code != 1 || !strings.Contains(out, "not on the server") || !strings.Contains(out, "retention") {
		t.Fatalf("status with a purged checkpoint: exit %d\n%s", code, out)
	}

	p := e.launch()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
	case <-time.After(time.Minute):
		t.Fatal("publisher did not stop on a purged checkpoint")
	}
	stored := fmt.Sprintf("%s:%d", cp.File, cp.Pos)
	if p.cmd.ProcessState.ExitCode() != 1 || !logHas(p.log, stored) || !logHas(p.log, "oldest available is "+cur+":4") || !logHas(p.log, "source.on-purged") {
		t.Fatalf("on-purged fail: exit %d, log lacks %s / oldest %s:4", p.cmd.ProcessState.ExitCode(), stored, cur)
	}

	setEnv(t, "CDC_OUTBOX_SOURCE_ON_PURGED", "earliest")
	p = e.start()
	if !logHas(p.log, "resuming at the earliest position") || !logHas(p.log, `"purged_skips":1`) || !logHas(p.log, `"files_purged":`) {
		t.Fatal("on-purged earliest: no Warn with the skip counter and the files purged")
	}
	rep := e.consume(verify.NewChecker(after.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute)
	if rep.Missing != 0 {
		t.Fatalf("events of the oldest binlog not published after earliest: %s", rep.String())
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if now := e.checkpoint(); now == nil || now.File == cp.File {
		t.Fatalf("checkpoint not moved to the available binlogs: %+v", now)
	}

	// latest: the same purge again, resuming at the end.
	e.exec("FLUSH BINARY LOGS")
	cur, _ = e.masterPos()
	e.purgeTo(cur)
	setEnv(t, "CDC_OUTBOX_SOURCE_ON_PURGED", "latest")
	p = e.start()
	if !logHas(p.log, "resuming at the latest position") || !logHas(p.log, `"available_bytes_skipped"`) {
		t.Fatal("on-purged latest: no Warn")
	}
	_ = p.stop(t, 30*time.Second)
}

// saveCheckpoint writes a checkpoint document for e.
func (e *env) saveCheckpoint(cp checkpoint.Checkpoint) {
	e.t.Helper()
	cp.Version = checkpoint.Version
	cp.UpdatedAt = time.Now().UTC()
	b, _ := json.Marshal(cp)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	if err := rdb.Set(e.t.Context(), e.key, b, 0).Err(); err != nil {
		e.t.Fatal(err)
	}
}

// Transactions in two MariaDB GTID domains (gtid_domain_id 0 and 2),
// GTID position mode, SIGKILL mid-stream and resume: nothing lost, and
// the stored set has both domains.
func TestGTIDMultiDomain(t *testing.T) {
	onlyMariaDB(t, "GTID domains (gtid_domain_id) are MariaDB's; MySQL's tagged GTIDs are TestMySQLTaggedGTID")
	e := newEnv(t)
	e.positionMode = "gtid"
	p := e.start()
	plan := workload.Generate(820, 0, 100, 6000, 1, 100, 200)
	w := e.writer()
	done := make(chan error, 1)
	go func() {
		for i, txn := range plan.Txns {
			if err := w.Exec(fmt.Sprintf("SET SESSION gtid_domain_id = %d", 2*(i%2))); err != nil {
				done <- err
				return
			}
			if err := w.Txn(txn, false); err != nil {
				done <- err
				return
			}
			if i%20 == 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		done <- nil
	}()
	e.waitPublished(plan, 1500, time.Minute)
	p.kill(t)
	cp := e.checkpoint()
	e.start()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rep := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
	if cp == nil {
		t.Fatal("no checkpoint before the kill")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := e.checkpoint()
		if now != nil && strings.Contains(","+now.GTIDSet, ",0-") && strings.Contains(","+now.GTIDSet, ",2-") {
			t.Logf("checkpoint before the kill gtid:%s, now gtid:%s; %s", cp.GTIDSet, now.GTIDSet, rep.String())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored GTID set lacks a domain: %+v", now)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A stored MariaDB GTID set naming a domain the server never had is
// refused at start (MariaDB would accept it and stream everything from
// the start), naming the domain and the fix.
func TestGTIDUnknownDomainRefused(t *testing.T) {
	onlyMariaDB(t, "GTID domains are MariaDB's")
	e := newEnv(t)
	e.positionMode = "gtid"
	c := e.sql()
	r, err := c.Execute("SELECT @@gtid_binlog_pos, @@server_id")
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	pos, _ := r.GetString(0, 0)
	id, _ := r.GetUint(0, 1)
	e.saveCheckpoint(checkpoint.Checkpoint{GTIDSet: strings.Trim(pos+",4711-1-5", ","), ServerID: uint32(id), Flavor: "mariadb"})
	p := e.launch()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
	case <-time.After(time.Minute):
		t.Fatal("publisher did not refuse the unknown domain")
	}
	if p.cmd.ProcessState.ExitCode() != 1 || !logHas(p.log, "domain 4711") || !logHas(p.log, "checkpoint set gtid:") || logHas(p.log, "streaming binlog") {
		t.Fatalf("unknown domain: exit %d", p.cmd.ProcessState.ExitCode())
	}
}
