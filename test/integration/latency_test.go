//go:build integration

package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
)

// cdc_outbox_commit_to_ack_seconds observes each transaction with outbox
// rows once, commit to acknowledgement: on MySQL from the GTID event's
// immediate_commit_timestamp (µs: loopback transactions land under
// 250 ms), on MariaDB from the binlog event time (1 s: under 2 s).
func TestCommitToAckHistogram(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	addr := metricsAddrOf(t, p)
	plan := workload.Generate(38, 0, 5, 60, 1, 5, 60)
	if err := produce(e.writer(), plan); err != nil {
		t.Fatal(err)
	}
	count := regexp.MustCompile(`(?m)^cdc_outbox_commit_to_ack_seconds_count\{source="default"\} (\d+)$`)
	bucket := func(body, le string) int {
		m := regexp.MustCompile(fmt.Sprintf(`(?m)^cdc_outbox_commit_to_ack_seconds_bucket\{source="default",le="%s"\} (\d+)$`, regexp.QuoteMeta(le))).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no bucket le=%s:\n%s", le, grepLines(body, "commit_to_ack"))
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	var body string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, body = httpGet(addr, "/metrics")
		if m := count.FindStringSubmatch(body); m != nil && m[1] == strconv.Itoa(len(plan.Txns)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d transactions observed:\n%s", len(plan.Txns), grepLines(body, "commit_to_ack"))
		}
	}
	le := "2"
	if isMySQL() {
		le = "0.25"
	}
	if n := bucket(body, le); n != len(plan.Txns) {
		t.Errorf("%d of %d transactions within %s s:\n%s", n, len(plan.Txns), le, grepLines(body, "commit_to_ack"))
	}
}
