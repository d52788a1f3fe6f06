//go:build integration

package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
)

// metricsAddrOf returns the address a publisher logged it serves
// /metrics, /readyz and /status on.
func metricsAddrOf(t *testing.T, p *publisher) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if addr := servedAddr(p.log); addr != "" {
			return addr
		}
	}
	t.Fatalf("no metrics address in %s", p.log)
	return ""
}

// servedAddr is the address of "serving metrics and health" in the log,
// "" while it has none.
func servedAddr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		var l struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "serving metrics and health" {
			return l.Addr
		}
	}
	return ""
}

// waitReady waits until the publisher's /readyz answers 200 with state
// (standby or streaming).
func waitReady(t *testing.T, p *publisher, state string, timeout time.Duration) {
	t.Helper()
	addr := metricsAddrOf(t, p)
	var code int
	var body string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, body = httpGet(addr, "/readyz"); code == 200 && strings.Contains(body, state) {
			return
		}
	}
	t.Fatalf("/readyz of %s not 200 %s within %s: %d %s", p.log, state, timeout, code, body)
}

// A rolling restart of 2 instances under a continuous load (what a
// Kubernetes rolling update does): the owner A gets SIGTERM, B takes over,
// A comes back as a standby; then the same for B. Nothing is lost or
// reordered, and the duplicates (same event ids: no conflicts) are at most
// one lease period of the load.
func TestHARollingRestart(t *testing.T) {
	const rate = 1500
	ttl := 3 * time.Second
	e := newEnv(t)
	e.leaseTTL = ttl
	a := e.start()
	ida := owner(t, a)
	waitHolds(t, ida, 1, time.Now(), 10*time.Second, e.key)
	b := e.launch()
	idb := owner(t, b)
	waitReady(t, b, "standby", 30*time.Second)
	plan := workload.Generate(1901, 0, 100, 40000, 1, 200, 200)
	pr := e.produceBackground(plan, rate)
	e.waitPublished(plan, 1000, time.Minute)

	// restart stops the owner p (SIGTERM: exit 0), waits until the standby
	// holds the lease, then starts p again and waits until it is a ready
	// standby.
	var worst time.Duration // the longest time without an owner
	restart := func(p *publisher, next string) (*publisher, string) {
		t.Helper()
		at := time.Now()
		if code := p.stop(t, 30*time.Second); code != 0 {
			t.Fatalf("SIGTERM: exit %d, want 0", code)
		}
		took := waitHolds(t, next, 1, at, haBound, e.key)
		worst = max(worst, took)
		q := e.launch()
		id := owner(t, q)
		e.waitLog(q, "standing by: another instance holds the source's lease", 30*time.Second)
		waitReady(t, q, "standby", 30*time.Second)
		t.Logf("restart: the standby held the lease %s after SIGTERM; the restarted instance is a standby after %s",
			took.Round(time.Millisecond), time.Since(at).Round(time.Millisecond))
		return q, id
	}
	a, ida = restart(a, idb)
	waitGrowth(e.topic, time.Now(), haBound)
	_, _ = restart(b, ida)
	if n := pr.committed.Load(); n >= int64(plan.Total) {
		t.Fatalf("the load ended (%d rows) before the rolling restart did: not a restart under load", n)
	}
	rep := e.finish("HA, rolling restart of 2 instances", pr, worst)
	if bound := rate * int(ttl/time.Second); rep.Duplicates > bound {
		t.Fatalf("%d duplicates: more than one lease period (%s) of the load (%d)", rep.Duplicates, ttl, bound)
	}
	if h := holders(e.key); h[ida] != 1 {
		t.Errorf("after the rolling restart the lease is held by %v, want the restarted A %s", h, ida)
	}
	t.Logf("rolling restart: %d events, %d duplicates, %d conflicting", plan.Total, rep.Duplicates, rep.Conflicts)
}

// One instance with ha.instance-file, killed (-9) under a load and started
// again: the new process takes over the lease its dead predecessor still
// holds at once, not after the lease TTL (30 s here); nothing lost. A
// second process given the same file while one runs refuses to start.
func TestHAInstanceFileRestart(t *testing.T) {
	e := newEnv(t)
	e.leaseTTL = 30 * time.Second
	t.Setenv("CDC_OUTBOX_HA_INSTANCE_FILE", filepath.Join(e.dir, "instance"))
	a := e.start()
	ida := owner(t, a)
	waitHolds(t, ida, 1, time.Now(), 10*time.Second, e.key)

	out, code := e.cli(nil, "run")
	if code != 1 || !strings.Contains(out, "is locked by another running instance") {
		t.Fatalf("a second process on the same instance file: exit %d, want 1 naming the lock", code)
	}

	plan := workload.Generate(1951, 0, 100, 9000, 1, 200, 200)
	pr := e.produceBackground(plan, 1500)
	e.waitPublished(plan, 500, time.Minute)
	a.kill(t)
	at := time.Now()
	base := endOffsets(e.topic) // what follows only b can publish
	b := e.launch()
	idb := owner(t, b)
	took := waitHolds(t, idb, 1, at, haBound, e.key) // without the file: up to 30 s
	e.waitLog(b, "taking over at once the leases this instance's previous process still holds", time.Second)
	rec := waitGrowthFrom(e.topic, base, at, haBound)
	t.Logf("kill -9 and restart with the instance file: the lease (ttl %s) taken over after %s, publishing after %s",
		e.leaseTTL, took.Round(time.Millisecond), rec.Round(time.Millisecond))
	rep := e.finish("HA, kill -9 and restart of one instance with ha.instance-file", pr, rec)
	t.Logf("%d events, %d duplicates", plan.Total, rep.Duplicates)
}
