//go:build integration

package integration

import (
	"os"
	"regexp"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// TestAdaptiveProcs: the real publisher (adaptive-procs, the default)
// lowers the scheduler to one processor once idle, raises it to every
// CPU when a backlog arrives (SIGSTOP while 60,000 rows are written, then
// SIGCONT), and publishes the backlog whole and in order.
func TestAdaptiveProcs(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: nothing to adapt")
	}
	e := newEnv(t)
	e.noHA = true // the publisher is stopped for seconds: no lease to lose meanwhile
	p := e.start("--log-level", "debug")
	e.waitLog(p, `"gomaxprocs":1`, 30*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	w := e.writer()
	const convs, perConv = 100, 600
	rows := make([]workload.Row, 0, 1000)
	for i := 0; i < convs*perConv; i++ {
		rows = append(rows, workload.Row{ConversationID: int64(1 + i%convs), SeqNo: int64(1 + i/convs), SenderID: 1, ReceiverID: 2, Payload: []byte(`{"text":"backlog"}`)})
		if len(rows) == cap(rows) {
			if err := w.Txn(rows, false); err != nil {
				t.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Raised: a "processors" line with a count above one.
	raised := regexp.MustCompile(`"msg":"processors".*"gomaxprocs":([2-9]|[1-9][0-9])`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(p.log); raised.Match(b) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the publisher did not raise its processor count for the backlog within 30 s")
		}
	}
	want := map[int64]int64{}
	for c := int64(1); c <= convs; c++ {
		want[c] = perConv
	}
	rep := e.consume(verify.NewChecker(want), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
	if rep.Records != convs*perConv {
		t.Fatalf("want %d records, got %s", convs*perConv, rep.String())
	}
}
