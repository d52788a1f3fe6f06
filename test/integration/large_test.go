//go:build integration

package integration

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// peakRSS returns the process's peak resident set size (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// One transaction of 200,000 rows with 1 KB payloads (about 240 MB if held
// whole): it is published in fragments with memory bounded by
// source.buffer-bytes, the checkpoint never lands inside it, and a SIGKILL
// in its middle resumes correctly.
func TestLargeTransactionBoundedMemory(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	plan := workload.Generate(1000, 0, 500, 200000, 200000, 200000, 1000)
	w := e.writer()
	f, pos := e.masterPos()
	start := binlog.Position{File: f, Pos: pos}
	if err := w.Txn(plan.Txns[0], false); err != nil {
		t.Fatal(err)
	}
	f, pos = e.masterPos()
	after := binlog.Position{File: f, Pos: pos}
	first := p

	// The transaction's end, as its records name it (binlog_txn_end):
	// after its start, at or before the binlog's end after it. That is
	// not always the binlog's end: MariaDB 11.7+ writes a transaction
	// above binlog_large_commit_threshold into a binlog file of its own
	// (its events without end_log_pos) and rotates after it.
	var end binlog.Position
	begin := start // where the transaction's first event starts
	inside := func(cp *checkpoint.Checkpoint) bool {
		return cp != nil && end.File != "" && binlog.ComparePos(cp.Position(), begin) > 0 && binlog.ComparePos(cp.Position(), end) < 0
	}
	// Watch the checkpoint while the transaction is published; kill the
	// publisher once part of it is out.
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	seen := 0
	for deadline := time.Now().Add(2 * time.Minute); seen < 60000; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d records after 2 min", seen)
		}
		recs, _ := cons.Poll(t.Context())
		seen += len(recs)
		for _, r := range recs {
			if end.File == "" {
				fp := parseFilePos(t, r.Headers["binlog_txn_end"])
				end = binlog.Position{File: fp.file, Pos: fp.pos}
				if binlog.ComparePos(end, start) <= 0 || binlog.ComparePos(end, after) > 0 {
					t.Fatalf("record %s: binlog_txn_end %s, want the transaction's own end, after its start %s and at or before %s",
						r.EventID, end.FilePos(), start.FilePos(), after.FilePos())
				}
				if end.File != start.File {
					begin = e.firstGTID(end.File)
				}
			}
			if got := r.Headers["binlog_txn_end"]; got != end.FilePos() {
				t.Fatalf("record %s: binlog_txn_end %s, the first record's was %s", r.EventID, got, end.FilePos())
			}
		}
		if cp := e.checkpoint(); inside(cp) {
			t.Fatalf("checkpoint %s inside the transaction (%s, %s)", cp.Position().FilePos(), begin.FilePos(), end.FilePos())
		}
	}
	rss := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("peak RSS while publishing a 200,000-row transaction: %.1f MB", float64(rss)/(1<<20))
	if rss > 160<<20 {
		t.Fatalf("peak RSS %d MB: memory not bounded", rss>>20)
	}
	p.kill(t)
	if logHas(first.log, "cannot be looked up") {
		t.Error("the end of the large transaction could not be looked up")
	}
	if cp := e.checkpoint(); inside(cp) {
		t.Fatalf("checkpoint %s inside the transaction (%s, %s)", cp.Position().FilePos(), begin.FilePos(), end.FilePos())
	}
	p = e.start()
	rep := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 5*time.Minute)
	requireOK(t, rep)
	t.Logf("after SIGKILL inside the transaction: %s; the transaction %s – %s", rep.String(), begin.FilePos(), end.FilePos())
	rss = peakRSS(t, p.cmd.Process.Pid)
	t.Logf("peak RSS of the restarted publisher: %.1f MB", float64(rss)/(1<<20))
	if rss > 160<<20 {
		t.Fatalf("peak RSS %d MB after restart", rss>>20)
	}
	// The final checkpoint write happens within the interval.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		cp := e.checkpoint()
		if cp != nil && binlog.ComparePos(cp.Position(), end) >= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %+v never reached the transaction's end %s", cp, end.FilePos())
		}
	}
}

// firstGTID returns where the first GTID event of a binlog file starts.
func (e *env) firstGTID(file string) binlog.Position {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	r, err := c.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' LIMIT 10", file))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i < r.RowNumber(); i++ {
		if typ, _ := r.GetStringByName(i, "Event_type"); strings.Contains(typ, "Gtid") && typ != "Gtid_list" && typ != "Previous_gtids" {
			pos, _ := r.GetUintByName(i, "Pos")
			return binlog.Position{File: file, Pos: uint32(pos)}
		}
	}
	e.t.Fatalf("no GTID event among the first events of %s", file)
	return binlog.Position{}
}

// One row with a 16 MB payload (the broker accepts 16 MiB records, the
// publisher's kafka.batch-bytes is raised to match): published byte-exact.
func TestSixteenMegabytePayload(t *testing.T) {
	e := newEnv(t)
	e.batchBytes = 16_700_000
	e.start()
	payload := `{"blob":"` + strings.Repeat("z", 16_000_000) + `"}`
	w := e.writer()
	if err := w.Txn([]workload.Row{{ConversationID: 5, SeqNo: 1, SenderID: 1, ReceiverID: 2, Payload: []byte(payload)}}, false); err != nil {
		t.Fatal(err)
	}
	chk := verify.NewChecker(map[int64]int64{5: 1})
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	var recs []verify.Record
	for deadline := time.Now().Add(time.Minute); len(recs) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		recs = append(recs, mustPoll(t, cons)...)
	}
	chk.Add(recs...)
	requireOK(t, chk.Report())
	if isMySQL() { // a JSON column: the record carries the text SELECT payload returns ({"blob": "zzz…"})
		c := e.sql()
		defer c.Close()
		r, err := c.Execute(fmt.Sprintf("SELECT payload FROM `%s` WHERE conversation_id = 5 AND seq_no = 1", e.outbox))
		if err != nil {
			t.Fatal(err)
		}
		payload, _ = r.GetString(0, 0)
		if len(payload) < 16_000_000 {
			t.Fatalf("SELECT payload returned %d bytes", len(payload))
		}
	}
	if string(recs[0].Value) != payload {
		t.Fatalf("16 MB payload differs: %d bytes, want %d", len(recs[0].Value), len(payload))
	}
}
