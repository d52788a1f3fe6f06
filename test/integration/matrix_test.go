//go:build integration

package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/redis/go-redis/v9"
)

// recorder keeps the series a publisher exports, one sample per scrape,
// as promtool's input_series notation: "_" where a series was absent.
type recorder struct {
	n      int                 // samples taken
	series map[string][]string // series (with job and instance) → values
}

// recorded are the families the alert rules use.
var recorded = regexp.MustCompile(`^(cdc_outbox_(source_state|ready|seconds_behind_source|source_connected|source_caught_up|records_produced_total|pipeline_restarts_total|checkpoint_age_seconds|source_heard_age_seconds|poison_records_total|purged_skips_total|audit_events_total|audit_running|audit_errors_total|lease_lost_total|checkpoint_mirror_errors_total))(\{[^}]*\})? (\S+)$`)

func (r *recorder) scrape(addr, instance string) {
	if r.series == nil {
		r.series = map[string][]string{}
	}
	up := "0"
	_, body := httpGet(addr, "/metrics")
	seen := map[string]string{}
	if strings.Contains(body, "# TYPE") {
		up = "1"
		for _, l := range strings.Split(body, "\n") {
			m := recorded.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			labels := strings.TrimSuffix(strings.TrimPrefix(m[3], "{"), "}")
			if labels != "" {
				labels = "," + labels
			}
			seen[fmt.Sprintf(`%s{job="cdc-outbox",instance=%q%s}`, m[1], instance, labels)] = m[4]
		}
	}
	seen[fmt.Sprintf(`up{job="cdc-outbox",instance=%q}`, instance)] = up
	for k, v := range seen {
		if _, ok := r.series[k]; !ok {
			r.series[k] = slices.Repeat([]string{"_"}, r.n)
		}
		r.series[k] = append(r.series[k], v)
	}
	r.n++
	for k, vs := range r.series {
		if len(vs) < r.n {
			r.series[k] = append(vs, "_")
		}
	}
}

// firing runs promtool on the recorded series against the shipped alert
// rules, one recorded sample (taken each second) standing for one minute
// of evaluation, and returns the alerts firing at the last sample.
func (r *recorder) firing(t *testing.T) []string {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus); .ci/run installs it")
	}
	rules, err := filepath.Abs("../../deploy/prometheus/cdc-outbox-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rule_files: [%q]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n", rules)
	keys := make([]string, 0, len(r.series))
	for k := range r.series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "      - series: '%s'\n        values: '%s'\n", k, strings.Join(r.series[k], " "))
	}
	// An expectation that cannot hold: promtool prints what it got.
	fmt.Fprintf(&b, "    promql_expr_test:\n      - expr: count by (alertname) (ALERTS{alertstate=\"firing\"})\n        eval_time: %dm\n        exp_samples: [{labels: '{alertname=\"none\"}', value: 0}]\n", r.n-1)
	path := filepath.Join(t.TempDir(), "recorded.test.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	got := regexp.MustCompile(`got: (.*)`).FindStringSubmatch(string(out))
	if got == nil {
		t.Fatalf("promtool on the recorded series:\n%s", out)
	}
	var names []string
	for _, m := range regexp.MustCompile(`alertname="(\w+)"`).FindAllStringSubmatch(got[1], -1) {
		names = append(names, m[1])
	}
	return names
}

// An operator's fault matrix (issue 30 item 9): for each fault, what
// /healthz, /readyz, /status (each source's state), cdc-outbox status and
// the state metric say, and which shipped alerts fire on
// the series the publisher really exported during the fault (promtool,
// each second recorded standing for a minute). Services the tests share
// are faulted through proxies of the test's own (database down, Redis
// down), or by configuration (Kafka unreachable, a lease held by an
// instance that does not run, a second source whose table is missing).
func TestOperatorFaultMatrix(t *testing.T) {
	type view struct {
		ready       int      // /readyz status code
		state       string   // /readyz state
		reason      string   // in /readyz's body
		fire, quiet []string // alerts that must fire, and must not
		// each source's state in cdc_outbox_source_state and, when /status
		// answers 200, in its health
		sources map[string]string
		status  int    // /status code (503: a service the status reads is down)
		cli     int    // cdc-outbox status's exit code; -1: not checked
		cliSays string // in its output
		// exit: the process stops at start (exit 1) with this in its
		// log; the recording goes on after it (up 0: not scraped)
		exit string
	}
	one := func(state string) map[string]string { return map[string]string{"default": state} }
	cases := []struct {
		name string
		// setup configures e and returns the fault (nil: from the start)
		// and what ends it (nil: it lasts).
		setup   func(t *testing.T, e *env) (fault, heal func())
		want    view
		samples int // seconds recorded (15 when 0)
		// load: the publisher keeps publishing through the fault or
		// resumes once it is healed; a workload runs from before the
		// fault until after it, and every event must be published,
		// none lost or reordered, duplicates only of transactions after
		// the checkpoint stored when the fault began (at-least-once).
		load bool
	}{
		{"healthy", func(t *testing.T, e *env) (func(), func()) { return func() {}, nil },
			view{200, "streaming", "", nil, []string{"CdcOutboxNoPublisher", "CdcOutboxDegraded", "CdcOutboxSourceFailed", "CdcOutboxSourceDisconnected", "CdcOutboxAbsent", "CdcOutboxStalled"},
				one("streaming"), 200, 0, "", ""}, 0, true},
		{"database down", func(t *testing.T, e *env) (func(), func()) {
			db := newPauseProxy(t, mysqlAddr)
			e.sourceAddr = db.addr()
			return func() { db.setDown(true) }, func() { db.setDown(false) }
		}, view{503, "degraded", "restarting", []string{"CdcOutboxNoPublisher", "CdcOutboxDegraded", "CdcOutboxSourceDisconnected"}, []string{"CdcOutboxSourceFailed", "CdcOutboxAbsent"},
			one("degraded"), 503, 2, "", ""}, 0, true},
		{"database frozen", func(t *testing.T, e *env) (func(), func()) {
			// Its packets held, not refused (a SIGSTOPped mysqld, a
			// silent network): no heartbeat, then the read timeout (5 s)
			// restarts the pipeline, whose connection waits too.
			db := newPauseProxy(t, mysqlAddr)
			e.sourceAddr = db.addr()
			return func() { db.setPaused(true) }, func() { db.setPaused(false) }
		}, view{503, "degraded", "restarting", []string{"CdcOutboxNoPublisher", "CdcOutboxDegraded"}, []string{"CdcOutboxSourceFailed", "CdcOutboxAbsent"},
			one("degraded"), 503, 2, "not read within --timeout", ""}, 20, true}, // status hung for good before --timeout
		{"Kafka unreachable", func(t *testing.T, e *env) (func(), func()) {
			e.kafka = []string{freeAddr(t)}
			return nil, nil // from the start
			// The first start waits up to 20 s for the brokers (the mirror
			// topic), then the pipeline restarts: degraded. No load: no
			// checkpoint was ever stored, so a restart with the right
			// brokers begins at start: latest, as configured.
		}, view{503, "degraded", "restarting", []string{"CdcOutboxNoPublisher", "CdcOutboxDegraded"}, []string{"CdcOutboxSourceFailed", "CdcOutboxAbsent"},
			one("degraded"), 200, 1, "no checkpoint", ""}, 40, false},
		{"Redis down", func(t *testing.T, e *env) (func(), func()) {
			rp := newPauseProxy(t, redisAddr)
			e.redisYAML = "addr: " + rp.addr()
			return func() { rp.setDown(true) }, func() { rp.setDown(false) }
		}, view{503, "degraded", "cannot reach Redis", []string{"CdcOutboxNoPublisher", "CdcOutboxDegraded"}, []string{"CdcOutboxSourceFailed", "CdcOutboxAbsent"},
			one("degraded"), 503, 2, "", ""}, 0, true},
		{"Redis TLS mismatch", func(t *testing.T, e *env) (func(), func()) {
			// checkpoint.tls enabled against the stack's plaintext Redis
			// (the reverse of TestSecureRunRedisMismatch's plaintext
			// client on the TLS port, which needs the secured stack):
			// run stops at start, exit 1 naming the setting to fix.
			e.redisYAML = "addr: " + redisAddr + "\n  tls: {enabled: true}"
			return nil, nil
		}, view{exit: "checkpoint.tls.enabled: false", fire: []string{"CdcOutboxDown", "CdcOutboxAbsent"},
			quiet: []string{"CdcOutboxNoPublisher", "CdcOutboxDegraded", "CdcOutboxSourceFailed"}, cli: 2, cliSays: "checkpoint.tls.enabled: false"}, 0, false},
		{"missing topic", func(t *testing.T, e *env) (func(), func()) {
			// router.topic does not exist and nothing may create it
			// (kafka.missing-topic: poison, the default; the broker's
			// auto.create.topics.enable off): run stops at start, exit 1
			// naming the topic and the fix, not a restart loop. The
			// workload runs from the stop; the heal creates the topic and
			// an operator's plain restart publishes every event (the
			// failed start stored its start position before refusing).
			e.topic += "_absent"
			return nil, func() { createTopic(t, e.topic, partitions) }
		}, view{exit: "--partitions N), or set kafka.missing-topic: create", fire: []string{"CdcOutboxDown", "CdcOutboxAbsent"},
			quiet: []string{"CdcOutboxNoPublisher", "CdcOutboxDegraded", "CdcOutboxSourceFailed", "CdcOutboxSourceDisconnected"}, cli: 1, cliSays: "or set kafka.missing-topic: create"}, 0, true}, // the start stored before the refusal; status names the stop, the topic and the setting (the stop record)
		{"lease lost", func(t *testing.T, e *env) (func(), func()) {
			// The owner's Redis traffic held for 5 s, longer than its
			// lease (3 s): it loses the lease and stops; once Redis
			// answers it takes the lease again (no other instance runs).
			// CdcOutboxLeaseLost fires on the loss, which needs the lease
			// counters at 0 before it (ha.Metrics.Init). 14 samples: the
			// alert's 15-minute window holds the whole recording.
			rp := newPauseProxy(t, redisAddr)
			e.redisYAML = "addr: " + rp.addr()
			return func() {
				rp.setPaused(true)
				resume := time.AfterFunc(5*time.Second, func() { rp.setPaused(false) })
				t.Cleanup(func() { resume.Stop(); rp.setPaused(false) })
			}, nil
		}, view{200, "streaming", "", []string{"CdcOutboxLeaseLost"}, []string{"CdcOutboxSourceFailed", "CdcOutboxAbsent"},
			one("streaming"), 200, 0, "", ""}, 14, true},
		{"every instance a standby", func(t *testing.T, e *env) (func(), func()) {
			// No load: the instance never published (stopped before it
			// took the lease), so nothing it could resume.
			return func() {
				// The lease held by an instance that does not run (a
				// zombie's key that outlived it), renewed by the test.
				rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
				t.Cleanup(func() { rdb.Close() })
				ctx := context.Background()
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if rdb.SetNX(ctx, checkpoint.LeaseKey(e.key), "ghost-instance 999999", time.Hour).Val() {
						return
					}
					if time.Now().After(deadline) {
						t.Fatal("the lease was never free")
					}
				}
			}, nil
		}, view{200, "standby", "ghost-instance", []string{"CdcOutboxNoPublisher"}, []string{"CdcOutboxDegraded", "CdcOutboxSourceFailed", "CdcOutboxAbsent"},
			one("standby"), 200, -1, "held by ghost-instance 999999", ""}, 0, false},
		{"one of two sources stopped", nil, // the load on s0, which goes on
			view{503, "failed", "source s1", []string{"CdcOutboxSourceFailed", "CdcOutboxNoPublisher"}, []string{"CdcOutboxAbsent"},
				map[string]string{"s0": "streaming", "s1": "failed"}, 200, 1, "not started since: ", ""}, 0, true}, // s1 stored its first checkpoint before the table check failed; status exits 1 with s1's stop record
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each case has a world of its own (tables, topic, checkpoint
			// key, lease, proxies, metrics port) and mostly waits on real
			// time: the cases run side by side (make test passes go test
			// -parallel 4: about a third of the matrix's serial time).
			t.Parallel()
			began := time.Now()
			defer func() { t.Logf("%s: %s", c.name, time.Since(began).Round(100*time.Millisecond)) }()
			e := newEnv(t)
			var fault, heal func()
			if c.setup != nil {
				fault, heal = c.setup(t, e)
			} else {
				// s1's table does not exist: a fatal error for s1 alone.
				e1 := newEnvNamed(t, t.Name()+"_1")
				e1.outbox += "_missing"
				e.configText = sourcesConfig([]*env{e, e1}, "  start: latest\n", "")
			}
			var pr *producer
			p := e.launch()
			if c.want.exit != "" {
				matrixExit(t, e, p, c.want.exit, cmp.Or(c.samples, 15), c.want.cli, c.want.cliSays, c.want.fire, c.want.quiet)
				if heal == nil {
					return
				}
				if c.load && !logHas(p.log, "router.topic "+e.topic+" on ") {
					t.Errorf("the stop does not name the topic %s", e.topic)
				}
				if c.load {
					// 1,250 rows at 125/s, from after the stop until
					// after the heal and the restart.
					pr = e.produceBackground(workload.Generate(901, 0, 50, 1250, 1, 10, 100), 125)
					waitCommitted(t, pr, 100)
				}
				heal()
				healed := time.Now()
				// The operator's restart, plain: the failed start stored
				// its start position (source.start latest) before it
				// refused, so this one resumes there and publishes what
				// was committed meanwhile (a start that stored none would
				// begin at the binlog's end and skip it).
				p = e.launch()
				addr := metricsAddrOf(t, p)
				waitSourceState(t, addr, "default", "streaming", time.Minute)
				if code, body := httpGet(addr, "/readyz"); code != 200 || !strings.Contains(body, `"state": "streaming"`) {
					t.Errorf("/readyz after the heal = %d %s, want 200 streaming", code, body)
				}
				if pr != nil {
					pr.wait(t)
					rep := e.consume(verify.NewChecker(pr.plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
					requireOK(t, rep)
					t.Logf("%s: %d events, all published %s after the heal (%d duplicates)", c.name, pr.plan.Total, time.Since(healed).Round(100*time.Millisecond), rep.Duplicates)
				}
				return
			}
			addr := metricsAddrOf(t, p)
			src := "default"
			if c.setup == nil {
				src = "s0"
			}
			if fault != nil && c.name != "every instance a standby" || c.load {
				waitSourceState(t, addr, src, "streaming", time.Minute)
			}
			var cp *checkpoint.Checkpoint // stored when the fault began
			if c.load {
				// 2,500 rows at 125/s: from before the fault until after
				// the recording (15–20 s) and the heal.
				pr = e.produceBackground(workload.Generate(900, 0, 50, 2500, 1, 10, 100), 125)
				e.waitPublished(pr.plan, 100, time.Minute)
				for deadline := time.Now().Add(10 * time.Second); cp == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					cp = e.checkpoint()
				}
			}
			if fault != nil {
				if c.name == "every instance a standby" {
					// Before the publisher takes the lease: stop it, hold
					// the lease, start again.
					if code := p.stop(t, 30*time.Second); code != 0 {
						t.Fatalf("exit %d", code)
					}
					fault()
					p = e.launch()
					addr = metricsAddrOf(t, p)
				} else {
					fault()
				}
			}
			var rec recorder
			var code int
			var body string
			for i := 0; i < cmp.Or(c.samples, 15); i++ {
				time.Sleep(time.Second) // one sample a second: the recording's resolution
				rec.scrape(addr, "a:9108")
				code, body = httpGet(addr, "/readyz")
			}
			if code != c.want.ready || !strings.Contains(body, `"state": "`+c.want.state+`"`) || !strings.Contains(body, c.want.reason) {
				t.Errorf("/readyz = %d %s, want %d %s naming %q", code, body, c.want.ready, c.want.state, c.want.reason)
			}
			if hc, hb := httpGet(addr, "/healthz"); hc != 200 {
				t.Errorf("/healthz = %d %s, want 200 (the process is not stuck)", hc, hb)
			}
			// Each source's state: the metric, /status, cdc-outbox status.
			for src, st := range c.want.sources {
				if v := metric(addr, fmt.Sprintf("cdc_outbox_source_state{source=%q,state=%q}", src, st)); v != "1" {
					t.Errorf("cdc_outbox_source_state{source=%q,state=%q} = %q, want 1", src, st, v)
				}
			}
			sc, sb := httpGet(addr, "/status")
			if sc != c.want.status {
				t.Errorf("/status = %d %s, want %d", sc, sb, c.want.status)
			} else if sc == 200 {
				if got := statusHealth(sb); !maps.Equal(got, c.want.sources) {
					t.Errorf("/status gives the sources' states %v, want %v:\n%s", got, c.want.sources, sb)
				}
			} else if !strings.Contains(sb, `"error"`) {
				t.Errorf("/status = %d %s, want the error named", sc, sb)
			}
			if out, code := e.cli(nil, "status", "--timeout", "10s"); (c.want.cli >= 0 && code != c.want.cli) || !strings.Contains(out, c.want.cliSays) {
				t.Errorf("cdc-outbox status exit %d, want %d with %q", code, c.want.cli, c.want.cliSays)
			}
			firing := rec.firing(t)
			t.Logf("%s: /readyz %d %s; alerts firing: %v", c.name, code, c.want.state, firing)
			for _, a := range c.want.fire {
				if !slices.Contains(firing, a) {
					t.Errorf("%s does not fire on the recorded series (firing: %v)", a, firing)
				}
			}
			for _, a := range c.want.quiet {
				if slices.Contains(firing, a) {
					t.Errorf("%s fires on the recorded series (firing: %v)", a, firing)
				}
			}
			if heal != nil {
				heal()
			}
			if c.load {
				// Besides what the operator sees: 0 lost.
				healed := time.Now()
				pr.wait(t)
				rep := e.consume(verify.NewChecker(pr.plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
				requireOK(t, rep)
				e.requireDuplicatesAfter(cp)
				t.Logf("%s: %d events, all published %s after the fault ended or the recording (%d duplicates)", c.name, pr.plan.Total, time.Since(healed).Round(100*time.Millisecond), rep.Duplicates)
			}
		})
	}
}

// waitSourceState waits until cdc_outbox_source_state{source,state} is 1.
func waitSourceState(t *testing.T, addr, source, state string, timeout time.Duration) {
	t.Helper()
	series := fmt.Sprintf("cdc_outbox_source_state{source=%q,state=%q}", source, state)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if metric(addr, series) == "1" {
			return
		}
	}
	t.Fatalf("%s not 1 within %s", series, timeout)
}

// matrixExit is the matrix for a fault that stops the process at start
// (exit 1 with want in the log): what /readyz and /healthz answered while
// it ran, cdc-outbox status on the same configuration, and the alerts on
// the series recorded while it ran and after (up 0: nothing answers).
func matrixExit(t *testing.T, e *env, p *publisher, want string, samples, cli int, cliSays string, fire, quiet []string) {
	t.Helper()
	began := time.Now()
	var rec recorder
	var addr string
	var answers []string // /readyz and /healthz while it ran
	next := time.Now()
	for exited := false; !exited; {
		select {
		case err := <-p.done:
			p.done <- err
			exited = true
			continue
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(began) > 20*time.Second {
			t.Fatalf("run did not exit within 20 s (want exit 1 naming %q); /readyz and /healthz answered %v", want, answers)
		}
		if addr == "" {
			addr = servedAddr(p.log)
		}
		if addr == "" {
			continue
		}
		for _, path := range []string{"/readyz", "/healthz"} {
			if code, body := httpGet(addr, path); code != 0 {
				a := fmt.Sprintf("%s %d", path, code)
				if m := regexp.MustCompile(`"state": "(\w+)"`).FindStringSubmatch(body); m != nil {
					a += " " + m[1]
				}
				if !slices.Contains(answers, a) {
					answers = append(answers, a)
				}
			}
		}
		if time.Now().After(next) {
			rec.scrape(addr, "a:9108")
			next = next.Add(time.Second)
		}
	}
	took := time.Since(began).Round(time.Millisecond)
	b, _ := os.ReadFile(p.log)
	if code := p.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(b), want) {
		t.Fatalf("run: exit %d after %s, want 1 naming %q:\n%s", code, took, want, tail(string(b), 10))
	}
	t.Logf("run exited 1 after %s; answers while it ran: %q", took, answers)
	for _, a := range answers {
		// It never took the lease: no readiness to count it in a rollout.
		if strings.HasPrefix(a, "/readyz 200") {
			t.Errorf("%s before the exit, want 503 (not ready)", a)
		}
	}
	// The recording goes on after the exit: each sample finds nothing
	// to scrape (up 0), as Prometheus would.
	for rec.n < samples {
		rec.scrape(cmp.Or(addr, freeAddr(t)), "a:9108")
	}
	if out, code := e.cli(nil, "status", "--timeout", "10s"); (cli >= 0 && code != cli) || !strings.Contains(out, cliSays) {
		t.Errorf("cdc-outbox status exit %d, want %d with %q", code, cli, cliSays)
	}
	firing := rec.firing(t)
	t.Logf("alerts firing: %v", firing)
	for _, a := range fire {
		if !slices.Contains(firing, a) {
			t.Errorf("%s does not fire on the recorded series (firing: %v)", a, firing)
		}
	}
	for _, a := range quiet {
		if slices.Contains(firing, a) {
			t.Errorf("%s fires on the recorded series (firing: %v)", a, firing)
		}
	}
}

// statusHealth returns each source's health state in a /status body (one
// source's object, or several sources' array); nil when it has none.
func statusHealth(body string) map[string]string {
	type st struct {
		Source string
		Health *struct{ State string }
	}
	var list []st
	if json.Unmarshal([]byte(body), &list) != nil {
		var one st
		if json.Unmarshal([]byte(body), &one) != nil {
			return nil
		}
		list = []st{one}
	}
	var out map[string]string
	for _, s := range list {
		if s.Health != nil {
			if out == nil {
				out = map[string]string{}
			}
			out[s.Source] = s.Health.State
		}
	}
	return out
}

// waitCommitted waits until pr committed at least n rows.
func waitCommitted(t *testing.T, pr *producer, n int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); pr.committed.Load() < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the workload committed %d rows in a minute, want %d", pr.committed.Load(), n)
		}
	}
}
