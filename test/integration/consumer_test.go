//go:build integration

package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/consumer"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// handledLog is what a consumer's handler saw, shared by consumer runs.
type handledLog struct {
	mu      sync.Mutex
	byEvent map[string]int             // event id → times handled
	order   map[int64][]int64          // conversation → seq_nos in handling order
	ends    map[string]binlog.Position // binlog_txn_end values seen
	late    int
}

func (h *handledLog) Handle(_ context.Context, r *consumer.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byEvent[r.EventID]++
	h.order[r.ConversationID] = append(h.order[r.ConversationID], r.SeqNo)
	if r.Late {
		h.late++
	}
	return nil
}

// requireInOrder fails t unless every conversation of last (its last
// seq_no) was handled 1, 2, … last, in order (the caller holds h.mu).
func (h *handledLog) requireInOrder(t *testing.T, last map[int64]int64) {
	t.Helper()
	for conv, n := range last {
		got := h.order[conv]
		if int64(len(got)) != n {
			t.Errorf("conversation %d: %d records handled, want %d", conv, len(got), n)
			continue
		}
		for i, s := range got {
			if s != int64(i+1) {
				t.Errorf("conversation %d: record %d has seq_no %d: out of order", conv, i, s)
				break
			}
		}
	}
}

// waitFor polls ok until it holds, failing t after timeout (total: the
// events planned, for the message).
func (h *handledLog) waitFor(t *testing.T, what string, total int, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (handled %d distinct of %d)", timeout, what, h.distinct(), total)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *handledLog) distinct() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byEvent)
}

// The consumer on the real stack: the publisher is killed with SIGKILL
// mid-stream and restarted (it resends from its checkpoint), the consumer
// is stopped and started again (a new process's view: empty window, the
// group's committed offsets, the Redis store), and a range is replayed into
// the live topic with "cdc-outbox replay". The handler gets every event
// exactly once, in seq_no order per conversation, with no gap; the
// replayed records are counted as replayed duplicates.
func TestConsumerAcrossPublisherKillAndReplay(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	w := e.writer()
	plan := workload.Generate(uint64(time.Now().UnixNano()), 0, 12, 2400, 1, 30, 120)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	store := consumer.NewRedisStore(rdb, "cdc-outbox:it:"+e.name+":seen:", 10*time.Minute)
	log := &handledLog{byEvent: map[string]int{}, order: map[int64][]int64{}}
	var gaps sync.Map
	reg := prometheus.NewRegistry()
	metrics := consumer.NewMetrics(reg)
	cfg := consumer.Config{Brokers: brokers, Topics: []string{e.topic}, Group: "it-" + e.name,
		CommitInterval: 200 * time.Millisecond, MaxWait: 100 * time.Millisecond, Window: 200}
	// run starts a consumer; stop ends it and returns Run's error.
	run := func() (stop func() error) {
		c, err := consumer.New(cfg, log, consumer.Options{Store: store, Metrics: metrics,
			OnGap: func(_ context.Context, g consumer.Gap) error { gaps.Store(g.String(), g); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var g errgroup.Group
		g.Go(func() error { return c.Run(ctx) })
		return func() error { cancel(); return g.Wait() }
	}
	waitFor := func(what string, timeout time.Duration, ok func() bool) {
		t.Helper()
		log.waitFor(t, what, plan.Total, timeout, ok)
	}

	stop := run()
	third := len(plan.Txns) / 3
	txns := func(from, to int) {
		for _, txn := range plan.Txns[from:to] {
			if err := w.Txn(txn, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	txns(0, third)
	waitFor("a checkpoint", 30*time.Second, func() bool { return e.checkpoint() != nil })
	p.kill(t) // SIGKILL: what was sent after the checkpoint is sent again
	txns(third, 2*third)
	p = e.start()
	// Stop the consumer while records flow and start a new one.
	waitFor("some records handled", time.Minute, func() bool { return log.distinct() > third })
	if err := stop(); err != nil {
		t.Fatalf("consumer Run: %v", err)
	}
	stop = run()
	txns(2*third, len(plan.Txns))
	waitFor("every event", 2*time.Minute, func() bool { return log.distinct() == plan.Total })

	// Replay the middle of the stream into the live topic.
	ends := e.txnEnds(t)
	from, to := ends[len(ends)/3], ends[len(ends)/2]
	if r := e.replay("--from", from.FilePos(), "--to", to.FilePos(), "--topic", e.topic); r.code != 0 {
		t.Fatalf("replay exit %d", r.code)
	}
	waitFor("the replayed records", time.Minute, func() bool {
		return testutil.ToFloat64(metricVec(t, reg, "cdc_consumer_replayed_records_total")) > 0
	})
	if err := stop(); err != nil {
		t.Fatalf("consumer Run: %v", err)
	}
	_ = p.stop(t, 20*time.Second)

	log.mu.Lock()
	defer log.mu.Unlock()
	for id, n := range log.byEvent {
		if n != 1 {
			t.Errorf("event %s handled %d times", id, n)
		}
	}
	log.requireInOrder(t, plan.Last)
	gaps.Range(func(k, _ any) bool { t.Errorf("gap reported: %s", k); return true })
	if log.late != 0 {
		t.Errorf("%d late records", log.late)
	}
	dups := testutil.ToFloat64(metricVec(t, reg, "cdc_consumer_records_total", "duplicate"))
	replayed := testutil.ToFloat64(metricVec(t, reg, "cdc_consumer_replayed_records_total"))
	t.Logf("handled %d events once each over %d conversations; duplicates skipped %v (replayed %v)", len(log.byEvent), len(plan.Last), dups, replayed)
	if dups < replayed || replayed == 0 {
		t.Errorf("duplicates %v, replayed %v: the replayed range should have been read and skipped", dups, replayed)
	}
}

// txnEnds returns the distinct binlog_txn_end positions of e's topic, sorted.
func (e *env) txnEnds(t *testing.T) []binlog.Position {
	t.Helper()
	seen := map[string]bool{}
	var ends []binlog.Position
	for _, r := range mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)) {
		if h := r.Headers["binlog_txn_end"]; h != "" && !seen[h] {
			seen[h] = true
			ends = append(ends, pos(t, h))
		}
	}
	sort.Slice(ends, func(i, j int) bool { return binlog.ComparePos(ends[i], ends[j]) < 0 })
	if len(ends) < 4 {
		t.Fatalf("only %d transactions on %s", len(ends), e.topic)
	}
	return ends
}

// metricVec sums a registered counter's series (those with every given
// label value, if any) into one collector for testutil.ToFloat64.
func metricVec(t *testing.T, reg *prometheus.Registry, name string, labelValues ...string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, want := range labelValues {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetValue() == want
				}
				if !found {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: fmt.Sprintf("sum_%s", name)})
	c.Add(sum)
	return c
}
