//go:build integration

package integration

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// seedOutbox inserts n outbox rows over convs conversations (base+1 …
// base+convs), in transactions of 500, and sets their status like the
// polling dispatcher would have: id%4 gives SENT, PENDING, FAILED, SENDING.
// It returns the ids of the rows the dispatcher had not sent.
func (e *env) seedOutbox(base int64, convs, n int) map[uint64]bool {
	e.t.Helper()
	w := e.writer()
	seq := map[int64]int64{}
	for done := 0; done < n; {
		rows := make([]workload.Row, min(500, n-done))
		for i := range rows {
			c := base + 1 + int64((done+i)%convs)
			seq[c]++
			rows[i] = workload.Row{ConversationID: c, SeqNo: seq[c], SenderID: 1, ReceiverID: 2, Payload: []byte(fmt.Sprintf(`{"c":%d,"s":%d,"pad":"%s"}`, c, seq[c], strings.Repeat("x", 200)))}
		}
		if err := w.Txn(rows, false); err != nil {
			e.t.Fatal(err)
		}
		done += len(rows)
	}
	c := e.sql()
	defer c.Close()
	q := fmt.Sprintf("UPDATE `%s` SET status = ELT(MOD(id, 4) + 1, 'SENT', 'PENDING', 'FAILED', 'SENDING')", e.outbox)
	if _, err := c.Execute(q); err != nil {
		e.t.Fatal(err)
	}
	r, err := c.Execute(fmt.Sprintf("SELECT id FROM `%s` WHERE status <> 'SENT'", e.outbox))
	if err != nil {
		e.t.Fatal(err)
	}
	unsent := map[uint64]bool{}
	for i := 0; i < r.RowNumber(); i++ {
		id, _ := r.GetUint(i, 0)
		unsent[id] = true
	}
	return unsent
}

// idsAfter returns the ids of the outbox rows with id > after.
func (e *env) idsAfter(after uint64) []uint64 {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	r, err := c.Execute(fmt.Sprintf("SELECT id FROM `%s` WHERE id > ? ORDER BY id", e.outbox), after)
	if err != nil {
		e.t.Fatal(err)
	}
	ids := make([]uint64, r.RowNumber())
	for i := range ids {
		ids[i], _ = r.GetUint(i, 0)
	}
	return ids
}

// readTopic reads records until want distinct event ids arrived (and then
// 2 s more, to catch duplicates) or timeout.
func (e *env) readTopic(want int, timeout time.Duration) []verify.Record {
	e.t.Helper()
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var recs []verify.Record
	seen := map[string]bool{}
	var settle time.Time
	for ctx.Err() == nil {
		rs, err := cons.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			e.t.Fatalf("consume %s: %v", e.topic, err)
		}
		for _, r := range rs {
			seen[r.EventID] = true
		}
		recs = append(recs, rs...)
		if len(seen) >= want {
			if settle.IsZero() {
				settle = time.Now().Add(2 * time.Second)
			} else if time.Now().After(settle) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return recs
}

// Backfill at first start: the rows the polling dispatcher had not sent
// (PENDING, FAILED, SENDING) are published exactly once, SENT rows never,
// rows inserted during the backfill exactly once (from the snapshot or from
// the binlog, never both), then new rows stream; per conversation, in id
// order, backfill records before binlog records.
func TestBackfill(t *testing.T) {
	e := newEnv(t)
	unsent := e.seedOutbox(0, 50, 20000)
	seeded := e.idsAfter(0)
	maxSeeded := seeded[len(seeded)-1]

	// Concurrent inserts (one writer: ids increase with seq_no in each
	// conversation) from before the start until the binlog streams.
	w := e.writer()
	var stopIns atomic.Bool
	var inserted atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		seq := map[int64]int64{}
		for i := 0; !stopIns.Load(); i++ {
			c := int64(1000 + i%20)
			rows := make([]workload.Row, 5)
			for j := range rows {
				seq[c]++
				rows[j] = workload.Row{ConversationID: c, SeqNo: seq[c], SenderID: 1, ReceiverID: 2, Payload: []byte(fmt.Sprintf(`{"c":%d,"s":%d}`, c, seq[c]))}
			}
			if err := w.Txn(rows, false); err != nil {
				t.Error(err)
				return
			}
			inserted.Add(int64(len(rows)))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	// Rows inserted before the start, during the backfill and once the
	// binlog streams: wait for inserts in each phase, not for a time.
	waitInserted := func(n int64, when string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); inserted.Load() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d concurrent rows inserted in 30 s, want %d", when, inserted.Load(), n)
			}
		}
	}
	waitInserted(100, "before the start")
	p := e.start("--backfill") // returns once the binlog streams
	waitInserted(inserted.Load()+100, "after the backfill")
	stopIns.Store(true)
	wg.Wait()
	if !logHas(p.log, "backfill done") {
		t.Fatal("no 'backfill done' in the log")
	}
	t.Logf("concurrent inserts: %d rows", inserted.Load())

	// New rows after the backfill stream from the binlog.
	more := workload.Generate(31, 2000, 10, 300, 1, 20, 50)
	if err := produce(w, more); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]bool{}
	for id := range unsent {
		want[id] = true
	}
	for _, id := range e.idsAfter(maxSeeded) {
		want[id] = true
	}
	recs := e.readTopic(len(want), 2*time.Minute)

	count := map[uint64]int{}
	backfilled, streamed := 0, 0
	lastID := map[string]uint64{}    // per key: event id of the previous record
	streamedKey := map[string]bool{} // per key: a binlog record was seen
	for _, r := range recs {
		id, _ := strconv.ParseUint(r.EventID, 10, 64)
		count[id]++
		bf := r.Headers["backfill"] == "true"
		if bf {
			backfilled++
			if streamedKey[r.Key] {
				t.Errorf("conversation %s: backfill record %d after a binlog record", r.Key, id)
			}
		} else {
			streamed++
			streamedKey[r.Key] = true
		}
		if count[id] == 1 {
			if id <= lastID[r.Key] {
				t.Errorf("conversation %s: event %d after %d", r.Key, id, lastID[r.Key])
			}
			lastID[r.Key] = id
		}
	}
	missing, doubled, sent := 0, 0, 0
	for id := range want {
		switch count[id] {
		case 0:
			missing++
		case 1:
		default:
			doubled++
		}
	}
	for id := range count {
		if !want[id] {
			sent++
		}
	}
	t.Logf("records %d: backfill %d, binlog %d; expected events %d (unsent before start %d); missing %d, doubled %d, SENT published %d",
		len(recs), backfilled, streamed, len(want), len(unsent), missing, doubled, sent)
	if missing > 0 || doubled > 0 || sent > 0 {
		t.Fatalf("backfill broke exactly-once: missing %d, doubled %d, SENT rows published %d", missing, doubled, sent)
	}
	if backfilled < len(unsent) {
		t.Fatalf("backfill published %d records, want at least the %d unsent rows", backfilled, len(unsent))
	}

	// The checkpoint exists now: --backfill is refused, exit 1.
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out, err := exec.Command(binary, "run", "--config", e.config(), "--backfill").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "--backfill is for the first start") {
		t.Fatalf("--backfill with a checkpoint: %v\n%s", err, out)
	}
}

// runPrune runs `cdc-outbox prune` and returns its exit code and output.
func (e *env) runPrune(args ...string) (int, string) {
	e.t.Helper()
	out, err := exec.Command(binary, append([]string{"prune", "--config", e.config()}, args...)...).CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		e.t.Fatal(err)
	}
	return 0, string(out)
}

// outboxIDs returns the ids in the outbox table.
func (e *env) outboxIDs() map[uint64]bool {
	ids := map[uint64]bool{}
	for _, id := range e.idsAfter(0) {
		ids[id] = true
	}
	return ids
}

// prune deletes only old published rows: never rows after the checkpoint
// (publisher stopped, rows inserted, prune: they stay), never recent ones;
// once the publisher caught up, they go too.
func TestPrune(t *testing.T) {
	e := newEnv(t)
	if code, out := e.runPrune("--older-than", "7d"); code != 1 || !strings.Contains(out, "no checkpoint") {
		t.Fatalf("prune without a checkpoint: exit %d\n%s", code, out)
	}
	p := e.start()
	w := e.writer()
	c := e.sql()
	defer c.Close()
	age := func(after uint64) {
		t.Helper()
		if _, err := c.Execute(fmt.Sprintf("UPDATE `%s` SET created_at = NOW() - INTERVAL 10 DAY WHERE id > ?", e.outbox), after); err != nil {
			t.Fatal(err)
		}
	}
	old := workload.Generate(41, 0, 20, 300, 1, 30, 50)
	if err := produce(w, old); err != nil {
		t.Fatal(err)
	}
	age(0)
	recent := workload.Generate(42, 100, 5, 50, 1, 10, 50)
	if err := produce(w, recent); err != nil {
		t.Fatal(err)
	}
	e.readTopic(350, time.Minute)
	e.waitCheckpointPast(e.binlogEnd(), time.Minute) // past the UPDATE: prune keeps what the checkpoint has not passed

	code, out := e.runPrune("--older-than", "7d", "--dry-run")
	t.Logf("dry run:\n%s", out)
	if code != 0 || !strings.Contains(out, "would delete 300 rows") || len(e.outboxIDs()) != 350 {
		t.Fatalf("dry run: exit %d, %d rows left\n%s", code, len(e.outboxIDs()), out)
	}

	// Publisher stopped: 40 rows inserted (and aged) after the checkpoint.
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	before := e.idsAfter(0)
	last := before[len(before)-1]
	late := workload.Generate(43, 200, 4, 40, 1, 5, 50)
	if err := produce(w, late); err != nil {
		t.Fatal(err)
	}
	age(last)
	code, out = e.runPrune("--older-than", "7d", "--batch", "70", "--sleep", "10ms")
	t.Logf("prune, publisher stopped:\n%s", out)
	left := e.outboxIDs()
	if code != 0 || !strings.Contains(out, "deleted      300 rows in 5 batches") || !strings.Contains(out, "40 outbox rows inserted between the checkpoint and the snapshot") ||
		!strings.Contains(out, "kept         40 old rows") || len(left) != 90 {
		t.Fatalf("prune: exit %d, %d rows left (want 90)\n%s", code, len(left), out)
	}
	for _, id := range e.idsAfter(last) {
		if !left[id] {
			t.Fatalf("row %d, after the checkpoint, was deleted", id)
		}
	}

	// Publisher back: the 40 are published, then pruned.
	e.start()
	recs := e.readTopic(390, time.Minute)
	got := map[string]bool{}
	for _, r := range recs {
		got[r.EventID] = true
	}
	for _, id := range e.idsAfter(last) {
		if !got[strconv.FormatUint(id, 10)] {
			t.Fatalf("row %d not published", id)
		}
	}
	e.waitCheckpointPast(e.binlogEnd(), time.Minute)
	code, out = e.runPrune("--older-than", "7d")
	t.Logf("prune after catching up:\n%s", out)
	if code != 0 || !strings.Contains(out, "deleted      40 rows") || len(e.outboxIDs()) != 50 {
		t.Fatalf("prune after catching up: exit %d, %d rows left (want 50)\n%s", code, len(e.outboxIDs()), out)
	}
}

// The backfill in GTID mode: the first checkpoint carries the GTID set the
// snapshot is consistent with (MySQL: Executed_Gtid_Set read under FLUSH
// TABLES WITH READ LOCK; MariaDB: BINLOG_GTID_POS at binlog_snapshot_*), so
// that the stream after it and a restart in GTID mode publish every later
// row exactly once. On MySQL a user without RELOAD is refused with the
// GRANT to give (MariaDB needs no lock: nothing to refuse there).
func TestBackfillGTIDMode(t *testing.T) {
	e := newEnv(t)
	e.positionMode = "gtid"
	unsent := e.seedOutbox(7000, 30, 3000)
	seeded := e.idsAfter(0)
	maxSeeded := seeded[len(seeded)-1]

	if isMySQL() {
		user := "bf_" + runID
		c := e.sql()
		for _, q := range []string{
			"DROP USER IF EXISTS '" + user + "'@'%'",
			"CREATE USER '" + user + "'@'%' IDENTIFIED BY 'pw'",
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '" + user + "'@'%'",
			"GRANT SELECT ON " + mysqlDB + "." + e.outbox + " TO '" + user + "'@'%'",
		} {
			if _, err := c.Execute(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		t.Cleanup(func() { c.Execute("DROP USER IF EXISTS '" + user + "'@'%'"); c.Close() })
		out, code := e.cli([]string{"CDC_OUTBOX_SOURCE_USER=" + user, "CDC_OUTBOX_SOURCE_PASSWORD=pw"}, "run", "--backfill")
		if code != 1 || !strings.Contains(out, "GRANT RELOAD ON *.*") || !strings.Contains(out, "FLUSH TABLES WITH READ LOCK") {
			t.Fatalf("--backfill on MySQL without RELOAD: exit %d, want 1 naming GRANT RELOAD:\n%s", code, out)
		}
		if cp := e.checkpoint(); cp != nil {
			t.Fatalf("a refused backfill stored a checkpoint: %+v", cp)
		}
	}

	before := e.binlogEnd() // nothing is written between here and the snapshot
	p := e.start("--backfill")
	if !logHas(p.log, "backfill done") {
		t.Fatal("no 'backfill done' in the log")
	}
	cp := e.checkpoint()
	if cp == nil || cp.File != before.File || cp.Pos != before.Pos || cp.GTIDSet == "" || !sameGTIDSet(t, cp.GTIDSet, before.GTIDSet) {
		t.Fatalf("checkpoint after the backfill %+v, want %s:%d with the GTID set %q", cp, before.File, before.Pos, before.GTIDSet)
	}
	w := e.writer()
	if err := produce(w, workload.Generate(51, 7100, 10, 500, 1, 20, 50)); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]bool{}
	for id := range unsent {
		want[id] = true
	}
	for _, id := range e.idsAfter(maxSeeded) {
		want[id] = true
	}
	e.readTopic(len(want), time.Minute)
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// Stopped: more rows; the restart resumes by GTID set.
	if err := produce(w, workload.Generate(52, 7200, 10, 500, 1, 20, 50)); err != nil {
		t.Fatal(err)
	}
	for _, id := range e.idsAfter(maxSeeded) {
		want[id] = true
	}
	p = e.start()
	recs := e.readTopic(len(want), time.Minute)
	count := map[uint64]int{}
	for _, r := range recs {
		id, _ := strconv.ParseUint(r.EventID, 10, 64)
		count[id]++
	}
	missing, doubled, extra := 0, 0, 0
	for id := range want {
		switch count[id] {
		case 0:
			missing++
		case 1:
		default:
			doubled++
		}
	}
	for id := range count {
		if !want[id] {
			extra++
		}
	}
	if missing > 0 || doubled > 0 || extra > 0 {
		t.Fatalf("backfill then GTID-mode stream and restart: missing %d, doubled %d, not wanted %d (of %d)", missing, doubled, extra, len(want))
	}
	t.Logf("%d events exactly once (backfill %d, then the binlog); first checkpoint %s:%d gtid %s", len(want), len(unsent), cp.File, cp.Pos, cp.GTIDSet)
}

// sameGTIDSet reports whether two GTID sets of the stack's flavour are
// equal (MySQL: the same intervals, however spelled).
func sameGTIDSet(t *testing.T, a, b string) bool {
	t.Helper()
	fl := mysql.MariaDBFlavor
	if isMySQL() {
		fl = mysql.MySQLFlavor
	}
	ga, err := mysql.ParseGTIDSet(fl, a)
	if err != nil {
		t.Fatalf("GTID set %q: %v", a, err)
	}
	gb, err := mysql.ParseGTIDSet(fl, b)
	if err != nil {
		t.Fatalf("GTID set %q: %v", b, err)
	}
	return ga.Equal(gb)
}

// waitCheckpointPast waits until the stored checkpoint is at or past end
// (file and position), instead of sleeping until it probably is.
func (e *env) waitCheckpointPast(end binlog.Position, timeout time.Duration) {
	e.t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if cp := e.checkpoint(); cp != nil && binlog.ComparePos(binlog.Position{File: cp.File, Pos: cp.Pos}, binlog.Position{File: end.File, Pos: end.Pos}) >= 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the checkpoint %+v did not reach %s within %s", e.checkpoint(), end.FilePos(), timeout)
		}
	}
}
