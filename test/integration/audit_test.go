//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/audit"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/health"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"
)

// auditRun is an audit running in the test's process, on its own
// metrics (served for the recorder).
type auditRun struct {
	stop   func()
	m      *health.Metrics
	srv    *httptest.Server
	obs    *tallyObserver
	errors chan error
}

// tallyObserver counts what the audit reports (and passes it on to the
// metrics).
type tallyObserver struct {
	audit.Observer
	mu      sync.Mutex
	counts  map[audit.Result]int
	audited uint64
}

func (o *tallyObserver) Count(table string, r audit.Result, n int) {
	o.mu.Lock()
	o.counts[r] += n
	o.mu.Unlock()
	o.Observer.Count(table, r, n)
}

func (o *tallyObserver) Progress(table string, audited, behind uint64) {
	o.mu.Lock()
	o.audited = audited
	o.mu.Unlock()
	o.Observer.Progress(table, audited, behind)
}

func (o *tallyObserver) snapshot() (map[audit.Result]int, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := make(map[audit.Result]int, len(o.counts))
	for k, v := range o.counts {
		c[k] = v
	}
	return c, o.audited
}

// startAudit runs the audit of the env's source against topic, with the
// env's checkpoint (the publisher's).
func (e *env) startAudit(topic string, cfg audit.Config) *auditRun {
	e.t.Helper()
	full, err := config.LoadFor(e.config(), config.ScopeOps)
	if err != nil {
		e.t.Fatal(err)
	}
	m := health.NewMetrics(health.BuildInfo{Version: "test"})
	obs := &tallyObserver{Observer: m.Audit("default"), counts: map[audit.Result]int{}}
	a := audit.New(cfg, audit.Source{Name: "default", Source: full.Source, Topic: topic, Kafka: full.Kafka, Checkpoint: full.Checkpoint}, obs, zaptest.NewLogger(e.t))
	ctx, cancel := context.WithCancel(context.Background())
	r := &auditRun{m: m, srv: httptest.NewServer(m.Handler()), obs: obs, errors: make(chan error, 1)}
	go func() { r.errors <- a.Run(ctx) }()
	r.stop = func() {
		cancel()
		if err := <-r.errors; err != nil {
			e.t.Errorf("audit: %v", err)
		}
		r.errors <- nil
		r.srv.Close()
	}
	e.t.Cleanup(r.stop)
	return r
}

// auditState reads the audit's state beside the env's checkpoint.
func (e *env) auditState() *audit.State {
	e.t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	b, err := rdb.Get(context.Background(), checkpoint.AuditKey(e.key)).Bytes()
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := audit.ParseState(checkpoint.AuditKey(e.key), b)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// waitAuditState waits until the audit stored its state (it began); log,
// when set, gives its output for the failure.
func (e *env) waitAuditState(log func() string) {
	e.t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	for deadline := time.Now().Add(30 * time.Second); rdb.Exists(context.Background(), checkpoint.AuditKey(e.key)).Val() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			msg := ""
			if log != nil {
				msg = log()
			}
			e.t.Fatalf("the audit did not store its state within 30s\n%s", msg)
		}
	}
}

// auditConfig is a quick audit: a 2 s lag, rounds of 200 ms.
func auditConfig(fromID uint64) audit.Config {
	c := audit.DefaultConfig()
	c.Lag, c.Interval, c.FromID = 2*time.Second, 200*time.Millisecond, fromID
	return c
}

// waitAudited waits until the audit's cursor reached id, scraping its
// metrics into rec once a round.
func (r *auditRun) waitAudited(t *testing.T, id uint64, rec *recorder, timeout time.Duration) map[audit.Result]int {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(250 * time.Millisecond) {
		if rec != nil {
			rec.scrape(strings.TrimPrefix(r.srv.URL, "http://"), "audit")
		}
		counts, at := r.obs.snapshot()
		if at >= id {
			return counts
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit reached id %d, not %d, within %s (counts %v)", at, id, timeout, counts)
		}
	}
}

// copyTopic writes recs to a new topic, each to its own partition, in
// order: the publisher's records with a fault injected.
func copyTopic(t *testing.T, topic string, recs []verify.Record) {
	t.Helper()
	createTopic(t, topic, partitions)
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition })}
	defer w.Close()
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = kafka.Message{Key: []byte(r.Key), Value: r.Value, Partition: r.Partition}
		for k, v := range r.Headers {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: k, Value: []byte(v)})
		}
		slices.SortFunc(msgs[i].Headers, func(a, b kafka.Header) int { return strings.Compare(a.Key, b.Key) })
	}
	// The writer's metadata may not know the new topic yet: retried (a
	// write refused so wrote nothing).
	for i := 0; ; i++ {
		err := w.WriteMessages(context.Background(), msgs...)
		if err == nil {
			return
		}
		if !errors.Is(err, kafka.UnknownTopicOrPartition) || i == 300 {
			t.Fatalf("copy to %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The continuous audit finds each fault injected into a copy of a topic
// the publisher wrote correctly, and only that fault: a record removed
// (missing, named by its event id, with the fix; the alert
// CdcOutboxAuditMissing fires), two records of one key swapped
// (reordered; CdcOutboxAuditReordered fires), a payload changed, a key's
// record on another partition (split), and a duplicate written by a
// second producer after the audit passed its range (beyond the replay
// window). Each within the lag: the audit reaches the last id.
func TestAuditFindsInjectedFaults(t *testing.T) {
	e := newEnv(t)
	e.start()
	w := e.writer()
	plan := workload.Generate(35, 0, 4, 40, 1, 4, 60)
	if err := produce(w, plan); err != nil {
		t.Fatal(err)
	}
	recs := pollTopic(t, e.topic, plan.Total, time.Minute)
	slices.SortFunc(recs, func(a, b verify.Record) int { return int(a.Offset - b.Offset) })
	byPart := map[int][]int{} // partition → indexes of its records, in offset order
	for i, r := range recs {
		byPart[r.Partition] = append(byPart[r.Partition], i)
	}
	// Two records of one key next to each other in one partition, and a
	// key's last record.
	var swapA, swapB, last int = -1, -1, -1
	lastOf := map[string]int{}
	for _, idx := range byPart {
		for j := 1; j < len(idx) && swapA < 0; j++ {
			if recs[idx[j-1]].Key == recs[idx[j]].Key {
				swapA, swapB = idx[j-1], idx[j]
			}
		}
	}
	for i, r := range recs {
		lastOf[r.Key] = i
	}
	// A key's last record not on the last partition: moved there, it is
	// read after the key's others (no reordering, only the split).
	for _, i := range lastOf {
		if recs[i].Partition < partitions-1 {
			last = max(last, i)
		}
	}
	if swapA < 0 || last < 0 {
		t.Fatal("no two adjacent records of one key in a partition: change the workload")
	}
	hole := len(recs) / 2
	maxID := uint64(plan.Total)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()

	cases := []struct {
		name   string
		fault  func([]verify.Record) []verify.Record
		want   map[audit.Result]int
		event  string // the event id the finding names
		alerts []string
	}{
		{"hole", func(rs []verify.Record) []verify.Record { return slices.Delete(rs, hole, hole+1) },
			map[audit.Result]int{audit.Missing: 1, audit.OK: plan.Total - 1}, recs[hole].EventID, []string{"CdcOutboxAuditMissing"}},
		{"swap", func(rs []verify.Record) []verify.Record { rs[swapA], rs[swapB] = rs[swapB], rs[swapA]; return rs },
			map[audit.Result]int{audit.Reordered: 1, audit.OK: plan.Total}, recs[swapA].EventID, []string{"CdcOutboxAuditReordered"}},
		{"payload", func(rs []verify.Record) []verify.Record {
			rs[hole].Value = []byte(`{"changed":true}`)
			return rs
		}, map[audit.Result]int{audit.Payload: 1, audit.OK: plan.Total - 1}, recs[hole].EventID, nil},
		{"wrong partition", func(rs []verify.Record) []verify.Record {
			rs[last].Partition = partitions - 1
			return rs
		}, map[audit.Result]int{audit.Split: 1, audit.OK: plan.Total}, recs[last].EventID, nil},
		{"late duplicate", func(rs []verify.Record) []verify.Record { return rs }, map[audit.Result]int{audit.Late: 1, audit.OK: plan.Total}, recs[hole].EventID, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rdb.Del(context.Background(), checkpoint.AuditKey(e.key))
			topic := e.topic + "." + strings.ReplaceAll(c.name, " ", "_")
			faulty := c.fault(slices.Clone(recs))
			copyTopic(t, topic, faulty)
			ar := e.startAudit(topic, auditConfig(1))
			var rec recorder
			counts := ar.waitAudited(t, maxID, &rec, time.Minute)
			if c.name == "late duplicate" {
				// A second producer writes one record again, after the
				// audit passed its range.
				dup := recs[hole]
				w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, RequiredAcks: kafka.RequireAll,
					Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition })}
				msg := kafka.Message{Key: []byte(dup.Key), Value: dup.Value, Partition: dup.Partition}
				for k, v := range dup.Headers {
					msg.Headers = append(msg.Headers, kafka.Header{Key: k, Value: []byte(v)})
				}
				if err := w.WriteMessages(context.Background(), msg); err != nil {
					t.Fatal(err)
				}
				w.Close()
			}
			// The suspects of the last range are confirmed a round after
			// it, and a late duplicate is read at the next round: wait for
			// the counts to settle (the wanted ones, or a wrong one).
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
				rec.scrape(strings.TrimPrefix(ar.srv.URL, "http://"), "audit")
				if counts, _ = ar.obs.snapshot(); sum(counts) >= sum(c.want) {
					break
				}
			}
			rec.scrape(strings.TrimPrefix(ar.srv.URL, "http://"), "audit")
			for _, r := range audit.Results {
				if counts[r] != c.want[r] {
					t.Errorf("%s: %d, want %d (all counts %v)", r, counts[r], c.want[r], counts)
				}
			}
			// The finding names the event id, in Redis beside the checkpoint.
			st := e.auditState()
			if len(st.Findings) != 1 || !slices.Contains(st.Findings[0].EventIDs, c.event) {
				t.Errorf("findings %+v: want one naming event %s", st.Findings, c.event)
			} else if c.name == "hole" && !strings.Contains(st.Findings[0].Fix, "cdc-outbox replay --from ") {
				t.Errorf("the missing event's finding gives no replay fix: %+v", st.Findings[0])
			}
			if c.name == "hole" {
				// status shows it, with the fix.
				out, _ := exec.Command(binary, "status", "--config", e.config()).CombinedOutput()
				if !strings.Contains(string(out), "missing 1,") || !strings.Contains(string(out), "1 missing, event ids "+c.event+"\n") || !strings.Contains(string(out), "cdc-outbox replay --from") {
					t.Errorf("status does not show the missing event %s and its fix:\n%s", c.event, out)
				}
			}
			ar.stop()
			got := rec.firing(t)
			for _, a := range []string{"CdcOutboxAuditMissing", "CdcOutboxAuditReordered"} {
				if slices.Contains(c.alerts, a) != slices.Contains(got, a) {
					t.Errorf("alerts firing %v: want %v among the audit's", got, c.alerts)
				}
			}
		})
	}
}

func sum(m map[audit.Result]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// A clean run under load, with the publisher killed (SIGKILL) and
// restarted and the audit stopped and restarted midway (it resumes from
// its state in Redis), its budget smaller than the load: the audit
// reports nothing but the publisher's replays, and audits every event
// exactly once.
func TestAuditCleanUnderKills(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	// A budget of 400 rows a round (2000/s, rounds of 200 ms): the
	// audit falls behind and catches up in steps.
	cfg := auditConfig(0)
	cfg.RowsPerSecond = 2000
	first := e.startAudit(e.topic, cfg)
	// The audit began (at the present) before the workload.
	e.waitAuditState(nil)
	plan := workload.Generate(36, 0, 20, 3000, 1, 50, 80)
	pr := e.produceBackground(plan, 1000)
	e.waitPublished(plan, 800, time.Minute)
	p.kill(t)
	first.stop()
	e.start()
	second := e.startAudit(e.topic, cfg)
	pr.wait(t)
	second.waitAudited(t, uint64(plan.Total), nil, 2*time.Minute)
	st := e.auditState()
	tot := st.Totals[mysqlDB+"."+e.outbox]
	t.Logf("audit totals %v, findings %+v", tot, st.Findings)
	for _, r := range []audit.Result{audit.Missing, audit.Reordered, audit.Split, audit.Late, audit.Payload, audit.Unseen, audit.NotInTable} {
		if tot[r] != 0 {
			t.Errorf("%s: %d on a clean run, want 0", r, tot[r])
		}
	}
	if tot[audit.OK] != int64(plan.Total) || len(st.Findings) != 0 {
		t.Errorf("ok %d, want every event (%d) once; findings %+v", tot[audit.OK], plan.Total, st.Findings)
	}
}

// audit.enabled in run: the audit runs beside the publisher (ha off), its
// series on the publisher's /metrics count every event ok; with
// ha.enabled, run refuses it and names the audit command.
func TestAuditInRun(t *testing.T) {
	t.Run("at-least-once", func(t *testing.T) { auditInRun(t, "") })
	// read_committed: the transaction markers and open transactions of
	// the topic are read past, nothing is reported.
	t.Run("exactly-once", func(t *testing.T) { auditInRun(t, "  delivery: exactly-once\n") })
}

func auditInRun(t *testing.T, kafkaExtra string) {
	e := newEnv(t)
	e.noHA = true
	e.kafkaExtra = kafkaExtra
	e.extra = "audit:\n  enabled: true\n  lag: 1s\n  interval: 200ms\n"
	p := e.start()
	// The audit begins after the table's largest id at its first session
	// that reads the topic's end (a just-created topic can answer Not
	// Leader first, and the session is retried after audit.interval):
	// rows written before then are not audited.
	e.waitLog(p, "audit begins", 60*time.Second)
	addr := metricsAddrOf(t, p)
	w := e.writer()
	plan := workload.Generate(37, 0, 5, 200, 1, 10, 60)
	if err := produce(w, plan); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`cdc_outbox_audit_events_total{result="ok",source="default",table="%s.%s"} %d`, mysqlDB, e.outbox, plan.Total)
	var body string
	for deadline := time.Now().Add(time.Minute); !strings.Contains(body, want); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the publisher's /metrics has no %s:\n%s", want, grepLines(body, "cdc_outbox_audit_"))
		}
		_, body = httpGet(addr, "/metrics")
	}
	for _, r := range []string{"missing", "reordered", "split", "duplicate_late", "payload_mismatch", "unseen"} {
		if !strings.Contains(body, `cdc_outbox_audit_events_total{result="`+r+`",source="default",table="`+mysqlDB+"."+e.outbox+`"} 0`) {
			t.Errorf("no %s series at 0:\n%s", r, grepLines(body, "cdc_outbox_audit_"))
		}
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	e.noHA = false
	out, err := exec.Command(binary, "run", "--config", e.config()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "audit.enabled: not with ha.enabled") || !strings.Contains(string(out), "cdc-outbox audit") {
		t.Fatalf("run with audit.enabled and ha.enabled: %v\n%s", err, out)
	}
}

// `cdc-outbox audit` as a process of its own beside an ha publisher:
// it serves the audit's metrics on --metrics-addr, counts every event ok,
// and exits 0 on SIGTERM.
func TestAuditCommand(t *testing.T) {
	e := newEnv(t)
	e.extra = "audit:\n  lag: 1s\n  interval: 200ms\n"
	e.start()
	addr := freeAddr(t)
	cmd := exec.Command(binary, "audit", "--config", e.config(), "--metrics-addr", addr)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		done <- nil
	})
	// Its state is stored once it began (at the present): then the workload.
	e.waitAuditState(out.String)
	plan := workload.Generate(39, 0, 5, 100, 1, 10, 60)
	if err := produce(e.writer(), plan); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`cdc_outbox_audit_events_total{result="ok",source="default",table="%s.%s"} %d`, mysqlDB, e.outbox, plan.Total)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		_, body := httpGet(addr, "/metrics")
		if strings.Contains(body, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit's /metrics has no %s:\n%s\nlog:\n%s", want, grepLines(body, "cdc_outbox_audit_"), out.String())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("audit exited with %v after SIGTERM:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the audit did not exit within 30 s of SIGTERM")
	}
}

// Rows the audit cannot compare: deleted in their own transaction (the
// record is published, the row gone: not_in_table) and a rolled-back
// insert (its id has neither row nor record: unseen). Nothing is missing.
func TestAuditDeletedRows(t *testing.T) {
	e := newEnv(t)
	e.start()
	ar := e.startAudit(e.topic, auditConfig(0))
	e.waitAuditState(nil)
	ins := func(conv, seq int) string {
		return fmt.Sprintf("INSERT INTO %s (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('message.created', %d, %d, %d, 1, 2, '{}')",
			e.outbox, conv, conv*1000+seq, seq)
	}
	e.exec("BEGIN", ins(1, 1), ins(1, 2), "COMMIT") // ids 1, 2
	e.exec("BEGIN", ins(2, 1), "DELETE FROM "+e.outbox+" WHERE id = LAST_INSERT_ID()", "COMMIT")
	e.exec("BEGIN", ins(3, 1), "ROLLBACK") // id 4 never committed
	e.exec("BEGIN", ins(1, 3), "COMMIT")   // id 5
	counts := ar.waitAudited(t, 5, nil, time.Minute)
	want := map[audit.Result]int{audit.OK: 3, audit.NotInTable: 1, audit.Unseen: 1}
	for _, r := range audit.Results {
		if counts[r] != want[r] {
			t.Errorf("%s: %d, want %d (all %v)", r, counts[r], want[r], counts)
		}
	}
}
