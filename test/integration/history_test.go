//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// These tests reset the server's binlog (RESET MASTER, RESET BINARY LOGS
// AND GTIDS): never run them against a server others test on at the same
// time (CI runs the integration tests one after the other). They leave the
// server binlogging, in its GTID mode, with a new binlog history.

// resetBinlogs empties the server's binlog and GTID history, as an
// operator's RESET MASTER (MariaDB) or RESET BINARY LOGS AND GTIDS (MySQL)
// does.
func (e *env) resetBinlogs() {
	e.t.Helper()
	if isMySQL() {
		e.exec("RESET BINARY LOGS AND GTIDS")
	} else {
		e.exec("RESET MASTER")
	}
}

// flushTo rotates the binlog until its current file is file: the
// numbering of a reset server brought back to a checkpoint's file.
func (e *env) flushTo(file string) {
	e.t.Helper()
	for i := 0; ; i++ {
		cur, _ := e.masterPos()
		switch c := binlog.ComparePos(binlog.Position{File: cur}, binlog.Position{File: file}); {
		case c == 0:
			return
		case c > 0 || i > 5000:
			e.t.Fatalf("binlog at %s, past %s", cur, file)
		}
		e.exec("FLUSH BINARY LOGS")
	}
}

// executedGTIDs is the server's executed GTID set: MySQL @@gtid_executed,
// MariaDB @@gtid_binlog_pos.
func (e *env) executedGTIDs() string {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	q := "SELECT @@GLOBAL.gtid_binlog_pos"
	if isMySQL() {
		q = "SELECT @@GLOBAL.gtid_executed"
	}
	r, err := c.Execute(q)
	if err != nil {
		e.t.Fatal(err)
	}
	s, _ := r.GetString(0, 0)
	return strings.ReplaceAll(s, "\n", "")
}

// firstTxnEnd returns where the first transaction of file ends (the
// End_log_pos of its first Xid event): a position between two
// transactions of that file.
func (e *env) firstTxnEnd(file string) uint32 {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	r, err := c.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s'", file))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i < r.RowNumber(); i++ {
		if typ, _ := r.GetStringByName(i, "Event_type"); typ == "Xid" {
			end, _ := r.GetUintByName(i, "End_log_pos")
			return uint32(end)
		}
	}
	e.t.Fatalf("no transaction in %s", file)
	return 0
}

// refused runs the publisher and waits for it to exit 1 with a log that
// holds every text of want; nothing may be published meanwhile.
func (e *env) refused(what string, want ...string) {
	e.t.Helper()
	before := endOffsets(e.topic)
	p := e.launch()
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(time.Minute):
		e.t.Fatalf("%s: the publisher did not stop on a checkpoint of another binlog history", what)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		e.t.Fatalf("%s: exit %d, want 1", what, code)
	}
	for _, w := range want {
		if !logHas(p.log, w) {
			e.t.Fatalf("%s: the log lacks %q", what, w)
		}
	}
	if after := endOffsets(e.topic); after != before {
		e.t.Fatalf("%s: %d records published past the stale position", what, after-before)
	}
}

// historyScenario is the operator sequence: a publisher stops with
// its checkpoint in a fresh binlog file F; the server's binlog is reset;
// the new history gets a transaction (filler), the events lost (written
// before F) and, once FLUSH BINARY LOGS brought the numbering back to F,
// the events after (in the new F). It returns the checkpoint, the GTID set
// executed after the filler, and the two plans.
func historyScenario(e *env) (cp *checkpoint.Checkpoint, afterFiller string, lost, after *workload.Plan) {
	e.t.Helper()
	p := e.start()
	e.exec("FLUSH BINARY LOGS")
	old := workload.Generate(2901, 0, 20, 60, 1, 1, 100) // 60 transactions
	if err := produce(e.writer(), old); err != nil {
		e.t.Fatal(err)
	}
	requireOK(e.t, e.consume(verify.NewChecker(old.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	if code := p.stop(e.t, 30*time.Second); code != 0 {
		e.t.Fatalf("exit %d after SIGTERM", code)
	}
	cp = e.checkpoint()
	if cp == nil || cp.FileOpened.IsZero() || cp.GTIDSet == "" {
		e.t.Fatalf("checkpoint without its file's creation time or GTID set: %+v", cp)
	}
	// The new F must be created in a later second than the old one (a
	// file's creation time has a one-second resolution).
	for time.Now().Unix() <= cp.FileOpened.Unix() {
		time.Sleep(50 * time.Millisecond)
	}
	e.resetBinlogs()
	e.exec(fmt.Sprintf("CREATE TABLE IF NOT EXISTS `hist_filler_%s` (id INT PRIMARY KEY)", e.name))
	afterFiller = e.executedGTIDs()
	lost = workload.Generate(2902, 1000, 10, 10, 1, 1, 100)
	if err := produce(e.writer(), lost); err != nil {
		e.t.Fatal(err)
	}
	e.flushTo(cp.File)
	after = workload.Generate(2903, 2000, 5, 5, 1, 1, 100)
	if err := produce(e.writer(), after); err != nil {
		e.t.Fatal(err)
	}
	return cp, afterFiller, lost, after
}

// requireAll waits until every event of the plans is in the topic (other
// records of the topic are ignored): nothing of the new history lost.
func (e *env) requireAll(plans ...*workload.Plan) {
	e.t.Helper()
	want := map[int64]int64{}
	for _, p := range plans {
		for c, last := range p.Last {
			want[c] = last
		}
	}
	rep := e.consume(verify.NewChecker(want), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute)
	if rep.Missing != 0 {
		e.t.Fatalf("events of the new binlog history not published: %s", rep.String())
	}
}

// File mode: after a binlog reset with the numbering brought back to the
// checkpoint's file, the publisher refuses to resume at the stale file:pos
// (exit 1, naming the reset and the fix) and publishes nothing; also when
// the stale offset happens to be a transaction boundary of the new file
// (the silent loss of before), and when only the file's creation time
// tells (no GTID set stored). The fix it names, checkpoint set earliest,
// publishes the whole new history.
func TestHistoryResetFileMode(t *testing.T) {
	e := newEnv(t)
	cp, _, lost, after := historyScenario(e)
	e.refused("stale file:pos", "binlog history changed", "refusing to resume at "+cp.File, "cdc-outbox checkpoint set earliest")
	if out, code := e.cli(nil, "check"); code != 1 || !strings.Contains(out, "binlog history changed") {
		t.Fatalf("check: exit %d, want 1 with the history change\n%s", code, out)
	}

	// The stale offset a transaction boundary of the new file: before the
	// history check, the publisher resumed there, published what follows
	// and silently skipped everything before.
	boundary := *cp
	boundary.Pos = e.firstTxnEnd(cp.File)
	e.saveCheckpoint(boundary)
	e.refused("stale offset at a boundary", "binlog history changed", fmt.Sprintf("refusing to resume at %s:%d", cp.File, boundary.Pos))

	// Nothing to compare but the file's creation time: the reader refuses
	// the file before reading anything of it.
	created := boundary
	created.GTIDSet, created.GTID = "", ""
	e.saveCheckpoint(created)
	e.refused("creation time only", "binlog history changed", "Format_description event")

	if out, code := e.cli(nil, "checkpoint", "set", "earliest"); code != 0 {
		t.Fatalf("checkpoint set earliest: exit %d\n%s", code, out)
	}
	p := e.start()
	e.requireAll(lost, after)
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// GTID mode: after a binlog reset the stored GTID set is not executed by
// the server: refused (exit 1), nothing published. A checkpoint of another
// server (a promoted replica's old source) whose GTID set the server has
// executed is resumed by GTID, automatically, and loses nothing.
func TestHistoryResetGTIDMode(t *testing.T) {
	e := newEnv(t)
	e.positionMode = "gtid"
	cp, afterFiller, lost, after := historyScenario(e)
	e.refused("stale GTID set", "binlog history changed", "refusing to resume at gtid:"+cp.GTIDSet, "cdc-outbox checkpoint set earliest")

	other := checkpoint.Checkpoint{File: "old-source-bin.000042", Pos: 1234, GTIDSet: afterFiller, ServerID: cp.ServerID + 4242, Flavor: cp.Flavor, Partitions: cp.Partitions}
	if isMySQL() {
		other.ServerUUID = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	}
	e.saveCheckpoint(other)
	p := e.start()
	if !logHas(p.log, "resuming by GTID set (failover)") {
		t.Fatal("no log line for the resume by GTID on another server")
	}
	e.requireAll(lost, after)
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// A binlog reset under a running publisher: the server ends the stream
// with ERROR 1236 "could not find next log"; the publisher stops (exit 1)
// naming the reset and the fix, not a purge; checkpoint set earliest then
// publishes the whole new history.
func TestHistoryResetWhileRunning(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	old := workload.Generate(2904, 0, 20, 60, 1, 1, 100)
	if err := produce(e.writer(), old); err != nil {
		t.Fatal(err)
	}
	requireOK(t, e.consume(verify.NewChecker(old.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	e.resetBinlogs()
	lost := workload.Generate(2905, 1000, 10, 10, 1, 1, 100)
	if err := produce(e.writer(), lost); err != nil {
		t.Fatal(err)
	}
	e.stoppedByReset(p, lost, "could not find next log")
}

// stoppedByReset requires p to stop within a minute of a binlog reset
// under it, exit 1, its log naming the history change, want and the fix,
// status FAILED naming it; then checkpoint set earliest and a new start
// publish every row of lost.
func (e *env) stoppedByReset(p *publisher, lost *workload.Plan, want string) {
	t := e.t
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(time.Minute):
		t.Fatal("the publisher did not stop after the binlog was reset under it")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 1 || !logHas(p.log, "binlog history changed") || !logHas(p.log, want) ||
		!logHas(p.log, "cdc-outbox checkpoint set earliest") {
		t.Fatalf("exit %d, or the log lacks the history change (%s) and its fix", code, want)
	}
	if out, code := e.cli(nil, "status"); code != 1 || !strings.Contains(out, "binlog history changed") {
		t.Fatalf("status: exit %d, want 1 naming the history change\n%s", code, out)
	}
	// The error names the position the checkpoint holds (the old
	// history's), not where the stream was when it noticed.
	if cp := e.checkpoint(); cp == nil || !logHas(p.log, fmt.Sprintf("refusing to resume at %s:%d", cp.File, cp.Pos)) {
		t.Fatalf("the stop does not name the stored checkpoint %+v", cp)
	}
	// The stored checkpoint is still the old history's: a plain restart
	// is refused too, not resumed in the new history past the lost rows.
	e.refused("a plain restart after the stop", "binlog history changed")
	if out, code := e.cli(nil, "checkpoint", "set", "earliest"); code != 0 {
		t.Fatalf("checkpoint set earliest: exit %d\n%s", code, out)
	}
	p = e.start()
	e.requireAll(lost)
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// A binlog reset under a running publisher reading the file that the
// reset creates again (mariadb-bin.000001, binlog.000001): the server does
// not end the stream; its dump thread waits at the old offset of the new,
// shorter file and sends nothing until it grows past it or rotates on into
// the new history (before: a silent stall, "ready" and "caught up", then
// the new history's first rows lost without a word; a break-it pass). The
// publisher's binlog measurement sees the file shorter than what it read
// and stops (exit 1) within a measurement period, naming the reset and the
// fix; checkpoint set earliest then publishes the whole new history.
//
// "flushed at once": a FLUSH BINARY LOGS right after the reset, before
// any transaction, gives the second file an empty GTID header (MariaDB's
// Gtid_list lists no domain), which tells nothing; the server's first
// file, shorter than what the stream read of it, does (leftShorter: the
// check for MySQL with gtid_mode OFF, whose headers never tell), and so
// does it in "rotated without GTIDs" (MySQL with gtid_mode OFF, its default).
func TestHistoryResetSameFile(t *testing.T) {
	for i, name := range []string{"stalled", "rotated", "flushed at once", "rotated without GTIDs"} {
		rotate, atOnce, gtidOff := i > 0, i == 2, i == 3
		t.Run(name, func(t *testing.T) {
			if gtidOff {
				onlyMySQL(t, "MariaDB has no gtid_mode")
			}
			e := newEnv(t)
			if gtidOff {
				// One step at a time (the MySQL manual, "Changing GTID Mode on
				// Online Servers"); back to ON afterwards for the next tests.
				e.exec("SET GLOBAL gtid_mode = ON_PERMISSIVE", "SET GLOBAL gtid_mode = OFF_PERMISSIVE", "SET GLOBAL gtid_mode = OFF")
				t.Cleanup(func() {
					e.exec("SET GLOBAL gtid_mode = OFF_PERMISSIVE", "SET GLOBAL gtid_mode = ON_PERMISSIVE", "SET GLOBAL gtid_mode = ON")
					// A binlog dump of a file holding anonymous transactions fails
					// under gtid_mode ON (ERROR 1236 "Cannot replicate anonymous
					// transaction"): later tests read every file (replay --from a time).
					e.resetBinlogs()
				})
			}
			e.resetBinlogs() // the stream reads the first file, which the next reset creates again
			p := e.start()
			old := workload.Generate(2906+uint64(10*i), 0, 20, 300, 1, 1, 300)
			if err := produce(e.writer(), old); err != nil {
				t.Fatal(err)
			}
			requireOK(t, e.consume(verify.NewChecker(old.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
			e.resetBinlogs()
			if atOnce {
				e.exec("FLUSH BINARY LOGS")
			}
			lost := workload.Generate(2907+uint64(10*i), 1000, 5, 10, 1, 1, 100) // far less than the old offset
			if err := produce(e.writer(), lost); err != nil {
				t.Fatal(err)
			}
			if rotate && !atOnce {
				// The dump thread follows the rotation into the new
				// history's second file: the rows of its first are skipped.
				e.exec("FLUSH BINARY LOGS")
				if err := produce(e.writer(), workload.Generate(2908+uint64(10*i), 2000, 5, 10, 1, 1, 100)); err != nil {
					t.Fatal(err)
				}
			}
			e.stoppedByReset(p, lost, "noticed while streaming")
		})
	}
}

// Another server's binlogs at the source's address (a restore of another
// server's backup, source.addr re-pointed): a checkpoint written for
// another server_id (and server_uuid on MySQL) is refused, exit 1,
// nothing published of the rows written after its position: in file mode
// (a file:pos of another server means nothing here), and in GTID mode
// when the server has not executed the stored set (it would start at an
// unrelated point). Nothing is reset: it runs on any server.
func TestHistoryAnotherServer(t *testing.T) {
	for _, mode := range []string{binlog.ModeFile, binlog.ModeGTID} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			e.positionMode = mode
			file, pos := e.masterPos()
			set := strings.Trim(e.executedGTIDs(), ",")
			other := checkpoint.Checkpoint{File: file, Pos: pos, GTIDSet: set, ServerID: e.sourceServerID() + 4242, Flavor: serverFlavor()}
			if isMySQL() {
				other.ServerUUID = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
			}
			want := []string{"a binlog file:pos of another server is meaningless", "position-mode: gtid"}
			if mode == binlog.ModeGTID {
				// A set the server has not executed: the other server's own transactions.
				other.GTIDSet = fmt.Sprintf("0-%d-999999999", other.ServerID)
				if isMySQL() {
					other.GTIDSet = other.ServerUUID + ":1-5"
				}
				want = []string{"binlog history changed", "the source is another server than the one the position was read from", "cdc-outbox checkpoint set earliest"}
			}
			e.saveCheckpoint(other)
			e.insertRaw([]string{row("'message.created'", "1", 1, `'{}'`)})
			for deadline := time.Now().Add(30 * time.Second); endOffsets(e.topic) < 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) { // refused compares the end offsets: the new topic must answer
					t.Fatalf("topic %s: no end offsets after 30 s", e.topic)
				}
			}
			e.refused("another server's checkpoint, "+mode+" mode", want...)
		})
	}
}
