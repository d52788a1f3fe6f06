//go:build integration

package integration

import (
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
