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
	_, startPos := e.masterPos()
	if err := w.Txn(plan.Txns[0], false); err != nil {
		t.Fatal(err)
	}
	_, endPos := e.masterPos()

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
		if cp := e.checkpoint(); cp != nil && cp.Pos > startPos && cp.Pos < endPos {
			t.Fatalf("checkpoint %d inside the transaction (%d, %d)", cp.Pos, startPos, endPos)
		}
	}
	rss := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("peak RSS while publishing a 200,000-row transaction: %.1f MB", float64(rss)/(1<<20))
	if rss > 160<<20 {
		t.Fatalf("peak RSS %d MB: memory not bounded", rss>>20)
	}
	p.kill(t)
	if cp := e.checkpoint(); cp != nil && cp.Pos > startPos && cp.Pos < endPos {
		t.Fatalf("checkpoint %d inside the transaction (%d, %d)", cp.Pos, startPos, endPos)
	}
	p = e.start()
	rep := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 5*time.Minute)
	requireOK(t, rep)
	t.Logf("after SIGKILL inside the transaction: %s", rep.String())
	rss = peakRSS(t, p.cmd.Process.Pid)
	t.Logf("peak RSS of the restarted publisher: %.1f MB", float64(rss)/(1<<20))
	if rss > 160<<20 {
		t.Fatalf("peak RSS %d MB after restart", rss>>20)
	}
	if cp := e.checkpoint(); cp == nil || cp.Pos < endPos {
		// The final checkpoint write happens within the interval.
		deadline := time.Now().Add(10 * time.Second)
		for cp == nil || cp.Pos < endPos {
			if time.Now().After(deadline) {
				t.Fatalf("checkpoint %+v never reached the transaction's end %d", cp, endPos)
			}
			time.Sleep(50 * time.Millisecond)
			cp = e.checkpoint()
		}
	}
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
	if string(recs[0].Value) != payload {
		t.Fatalf("16 MB payload differs: %d bytes", len(recs[0].Value))
	}
}
