//go:build integration

package integration

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/segmentio/kafka-go"
)

// Broker faults on a real 3-node KRaft cluster (scripts/dev-stack.sh
// up-cluster: replication factor 3, min.insync.replicas 2), skipped unless
// CDC_KAFKA_CLUSTER_BROKERS is set (make test-cluster). Each test runs a
// steady workload over every partition of a topic with replication factor
// 3, injects a fault, measures how long until every partition's high
// watermark grew again (publishing resumed), restores the cluster and
// checks every event: nothing lost or reordered, and no duplicate unless
// the publisher restarted its pipeline (counted from its log).

var (
	clusterBrokers = strings.FieldsFunc(os.Getenv("CDC_KAFKA_CLUSTER_BROKERS"), func(r rune) bool { return r == ',' })
	// sessionTimeout is the cluster's broker.session.timeout.ms: how long
	// Kafka takes to fence a broker that stopped heartbeating (and move
	// its partitions' leadership).
	sessionTimeout = time.Duration(must(strconv.Atoi(envOr("CDC_KAFKA_CLUSTER_SESSION_TIMEOUT_MS", "9000")))) * time.Millisecond
)

// resumeBound is the correctness bound on a resumption after a fault:
// Kafka's fencing time plus the 2 s the producer may add (a metadata
// refresh, a dial to a dead broker), plus 3 s of margin for the
// measurement (polling every partition's leader) on a loaded machine.
var resumeBound = sessionTimeout + 2*time.Second + 3*time.Second

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func needCluster(t *testing.T) {
	t.Helper()
	if len(clusterBrokers) != 3 {
		t.Skip("CDC_KAFKA_CLUSTER_BROKERS not set to the 3 nodes (scripts/dev-stack.sh up-cluster; make test-cluster)")
	}
}

// node returns the 1-based node number of a cluster broker address.
func node(addr string) int { return slices.Index(clusterBrokers, addr) + 1 }

// broker returns node n's address.
func broker(n int) string { return clusterBrokers[n-1] }

// newClusterEnv is newEnv with its topic on the cluster: partitions
// partitions, replication factor 3, partition p's replicas (preferred
// leader first) given by replicas(p) as node numbers.
func newClusterEnv(t *testing.T, replicas func(p int) []int) *env {
	t.Helper()
	needCluster(t)
	e := newTables(t)
	e.kafka = clusterBrokers
	assign := make([]kafka.ReplicaAssignment, partitions)
	for p := range assign {
		assign[p] = kafka.ReplicaAssignment{Partition: p, Replicas: replicas(p)}
	}
	conn := dialAny(t)
	err := conn.CreateTopics(kafka.TopicConfig{Topic: e.topic, NumPartitions: -1, ReplicationFactor: -1, ReplicaAssignments: assign})
	conn.Close()
	if err != nil {
		t.Fatalf("create topic %s on the cluster: %v", e.topic, err)
	}
	// Wait until every partition has its preferred leader and full ISR.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ps, err := clusterPartitions(e.topic)
		ok := err == nil && len(ps) == partitions
		for _, p := range ps {
			ok = ok && p.Leader.ID == replicas(p.ID)[0] && len(p.Isr) == 3
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not ready on the cluster: %v %+v", e.topic, err, ps)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() { restoreCluster(t) })
	return e
}

// roundRobin gives partition p the replicas p, p+1, p+2 (mod 3): each node
// leads two of the six partitions.
func roundRobin(p int) []int { return []int{p%3 + 1, (p+1)%3 + 1, (p+2)%3 + 1} }

// leadNone gives node n no leadership: the preferred leaders alternate
// between the two others.
func leadNone(n int) func(p int) []int {
	var others []int
	for m := 1; m <= 3; m++ {
		if m != n {
			others = append(others, m)
		}
	}
	return func(p int) []int { return []int{others[p%2], others[(p+1)%2], n} }
}

// dialAny connects to the first cluster node answering within 2 s.
func dialAny(t *testing.T) *kafka.Conn {
	t.Helper()
	c, err := dialLive()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func dialLive() (*kafka.Conn, error) {
	var errs []string
	// A short wait first, so that a paused node costs the measurements
	// little; then a patient one (a loaded machine).
	for _, wait := range []time.Duration{300 * time.Millisecond, 2 * time.Second} {
		for _, b := range clusterBrokers {
			d := &kafka.Dialer{Timeout: wait}
			c, err := d.Dial("tcp", b)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			// A paused broker accepts the connection but never answers.
			_ = c.SetDeadline(time.Now().Add(wait))
			if _, err := c.Brokers(); err != nil {
				c.Close()
				errs = append(errs, err.Error())
				continue
			}
			_ = c.SetDeadline(time.Time{})
			return c, nil
		}
	}
	return nil, fmt.Errorf("no cluster node answers: %s", strings.Join(errs, "; "))
}

// clusterPartitions returns topic's partitions as a live node sees them.
func clusterPartitions(topic string) ([]kafka.Partition, error) {
	c, err := dialLive()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	return c.ReadPartitions(topic)
}

// highWatermarks returns each partition's high watermark (the offset
// after the last record acknowledged to acks=all producers), -1 for a
// partition whose leader does not answer within 1 s.
func highWatermarks(topic string) []int64 {
	out := make([]int64, partitions)
	for i := range out {
		out[i] = -1
	}
	ps, err := clusterPartitions(topic)
	if err != nil {
		return out
	}
	for _, p := range ps {
		addr := net.JoinHostPort(p.Leader.Host, strconv.Itoa(p.Leader.Port))
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		c := kafka.NewConnWith(nc, kafka.ConnConfig{Topic: topic, Partition: p.ID})
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if last, err := c.ReadLastOffset(); err == nil && p.ID < len(out) {
			out[p.ID] = last
		}
		c.Close()
	}
	return out
}

// waitResumed returns how long after since every partition's high
// watermark passed its value in base, or -1 when that did not happen
// within timeout.
func waitResumed(topic string, base []int64, since time.Time, timeout time.Duration) time.Duration {
	r, _ := watchResume(topic, base, since, timeout, func([]kafka.Partition) bool { return true })
	return r
}

// watchResume is waitResumed that also returns how long after since the
// cluster was first seen in the state ready describes (Kafka's own part
// of the recovery: a fenced leader replaced, replicas back in sync), -1
// if never.
func watchResume(topic string, base []int64, since time.Time, timeout time.Duration, ready func([]kafka.Partition) bool) (resumed, kafka time.Duration) {
	kafka = -1
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if kafka < 0 {
			if ps, err := clusterPartitions(topic); err == nil && len(ps) == partitions && ready(ps) {
				kafka = time.Since(since)
			}
		}
		hw := highWatermarks(topic)
		grown := true
		for i := range hw {
			grown = grown && hw[i] > base[i]
		}
		if grown {
			if kafka < 0 {
				kafka = time.Since(since)
			}
			return time.Since(since), kafka
		}
	}
	return -1, kafka
}

// stallReport is what watchStall saw after a fault.
type stallReport struct {
	// worst is the longest time a partition's high watermark did not grow.
	worst time.Duration
	// kafka is when the cluster was first seen ready (Kafka's own part),
	// -1 if never.
	kafka time.Duration
	// later is the longest stall of a partition that began after Kafka
	// was ready: a second stall after publishing had resumed, the
	// producer's own (the checkpoint mirror copy on the acknowledgement
	// path once did that). It is the stall the polls prove: from the end
	// of the poll that first saw the partition's high watermark at a
	// value to the start of the last poll that still saw it there, so
	// that a slow poll (a broker slow to answer the watcher's own
	// metadata and ListOffsets requests; every partition then seems to
	// stall together) is not counted as the producer's.
	later time.Duration
	// slowest is the longest poll of the high watermarks.
	slowest time.Duration
	// gaps lists every stall of a partition of laterMin or more, as
	// "p<partition> <from>–<to>" seconds after the fault.
	gaps []string
	// spans are those stalls, as times after the fault.
	spans [][2]time.Duration
}

// share is the producer's share of the stall: how long, after Kafka was
// ready, some partition was in a stall of laterMin or more (the union of
// the stalls' parts after Kafka was ready: the main stall's tail plus any
// later stall); -1 when Kafka was never seen ready.
func (r stallReport) share() time.Duration {
	if r.kafka < 0 {
		return -1
	}
	var cut [][2]time.Duration
	for _, sp := range r.spans {
		if sp[1] > r.kafka {
			cut = append(cut, [2]time.Duration{max(sp[0], r.kafka), sp[1]})
		}
	}
	slices.SortFunc(cut, func(a, b [2]time.Duration) int { return cmp.Compare(a[0], b[0]) })
	var total, end time.Duration
	for _, sp := range cut {
		if sp[0] > end {
			end = sp[0]
		}
		if sp[1] > end {
			total += sp[1] - end
			end = sp[1]
		}
	}
	return total
}

// laterMin is the shortest stall stallReport lists: the steady workload
// writes to every partition several times a second.
const laterMin = 500 * time.Millisecond

// watchStall watches every partition's high watermark from since (when
// they were base) until since+window and reports how long publishing
// stalled, in the worst partition, after the fault at since (a steady
// workload writes to every partition several times a second), when the
// cluster was first seen in the state ready describes, and the stalls
// that began after that.
func watchStall(topic string, base []int64, since time.Time, window time.Duration, ready func([]kafka.Partition) bool) stallReport {
	r := stallReport{kafka: -1}
	last := slices.Clone(base)
	// at: the end of the poll that first saw a partition at last (the
	// fault's time for base); same: the start of the latest poll that
	// still saw it there (the value held at least from at to same).
	at := make([]time.Time, len(base))
	same := make([]time.Time, len(base))
	for i := range at {
		at[i], same[i] = since, since
	}
	gap := func(i int, now time.Time) {
		d := now.Sub(at[i])
		r.worst = max(r.worst, d)
		if d < laterMin {
			return
		}
		from := at[i].Sub(since)
		r.gaps = append(r.gaps, fmt.Sprintf("p%d %.1f–%.1f s", i, from.Seconds(), now.Sub(since).Seconds()))
		r.spans = append(r.spans, [2]time.Duration{from, now.Sub(since)})
		if r.kafka >= 0 && from > r.kafka {
			r.later = max(r.later, same[i].Sub(at[i]))
		}
	}
	for time.Since(since) < window {
		if r.kafka < 0 {
			if ps, err := clusterPartitions(topic); err == nil && len(ps) == partitions && ready(ps) {
				r.kafka = time.Since(since)
			}
		}
		start := time.Now()
		hw := highWatermarks(topic)
		now := time.Now()
		r.slowest = max(r.slowest, now.Sub(start))
		for i := range hw {
			switch {
			case hw[i] > last[i]:
				gap(i, now)
				last[i], at[i], same[i] = hw[i], now, now
			case hw[i] == last[i]:
				same[i] = start
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	now := time.Now()
	for i := range at {
		gap(i, now)
	}
	return r
}

// stallWindow is how long watchStall watches after a fault: past the bound.
var stallWindow = resumeBound + 5*time.Second

// notInSync: node n is in no partition's ISR any more (Kafka fenced it).
func notInSync(n int) func([]kafka.Partition) bool {
	return func(ps []kafka.Partition) bool {
		for _, p := range ps {
			for _, r := range p.Isr {
				if r.ID == n {
					return false
				}
			}
		}
		return true
	}
}

// notLedBy returns a ready function: no partition is led by node n any more
// (Kafka fenced it and moved its leadership).
func notLedBy(n int) func([]kafka.Partition) bool {
	return func(ps []kafka.Partition) bool {
		for _, p := range ps {
			if p.Leader.ID == n || p.Leader.ID < 0 {
				return false
			}
		}
		return true
	}
}

// writable: every partition has a leader and min.insync.replicas (2) in sync.
func writable(ps []kafka.Partition) bool {
	for _, p := range ps {
		if p.Leader.ID < 0 || len(p.Isr) < 2 {
			return false
		}
	}
	return true
}

// allKnown reports whether hw has every partition's high watermark.
func allKnown(hw []int64) bool { return !slices.Contains(hw, -1) }

// restoreCluster resumes and starts every node, then waits until the
// cluster is fully replicated again, so that the next test starts whole.
func restoreCluster(t *testing.T) {
	for n := 1; n <= 3; n++ {
		_ = exec.Command("../../scripts/dev-stack.sh", "cont-broker", strconv.Itoa(n)).Run()
	}
	for n := 1; n <= 3; n++ {
		if !clusterNodeUp(n) {
			stack(t, "start-broker", strconv.Itoa(n))
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ps, err := clusterPartitions("__cdc_cluster_probe")
		ok := err == nil && len(ps) > 0
		for _, p := range ps {
			ok = ok && len(p.Isr) == 3
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not fully replicated 2 min after the test: %v %+v", err, ps)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func clusterNodeUp(n int) bool {
	out, _ := exec.Command("../../scripts/dev-stack.sh", "status-cluster").Output()
	return regexp.MustCompile(fmt.Sprintf(`(?m)^kafka node %d: up `, n)).Match(out)
}

// connectedTo reports whether process pid has an established TCP
// connection to addr.
func connectedTo(t *testing.T, pid int, addr string) bool {
	t.Helper()
	out, err := exec.Command("ss", "-Htnp", "state", "established", "dst", addr).Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	return strings.Contains(string(out), fmt.Sprintf("pid=%d,", pid))
}

// restarts counts the publisher's pipeline restarts in its log.
func restarts(p *publisher) int {
	b, _ := os.ReadFile(p.log)
	return strings.Count(string(b), "pipeline stopped; restarting")
}

// clusterWorkload is a steady workload over every partition: 100
// conversations, transactions of 1–20 rows, about 800 rows/s for ~ d.
func (e *env) clusterWorkload(seed uint64, d time.Duration) *producer {
	const rate = 800
	plan := workload.Generate(seed, 0, 100, rate*int(d/time.Second), 1, 20, 200)
	return e.produceBackground(plan, rate)
}

// steady waits until the workload is being published to every partition
// and returns the high watermarks then.
func (e *env) steady(pr *producer) []int64 {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	first := highWatermarks(e.topic)
	for {
		hw := highWatermarks(e.topic)
		grown := allKnown(first) && allKnown(hw)
		for i := range hw {
			grown = grown && hw[i] > first[i]
		}
		if grown {
			return hw
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the workload is not published to every partition: %v then %v", first, hw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clusterFinish waits for the workload, checks the topic against it
// (nothing lost or reordered) and the duplicates: none unless the
// pipeline restarted (a retry never duplicates).
func (e *env) clusterFinish(fault string, p *publisher, pr *producer, rec time.Duration) verify.Report {
	e.t.Helper()
	pr.wait(e.t)
	rep := e.consumeFrom(clusterBrokers, verify.NewChecker(pr.plan.Last), 3*time.Minute)
	n := restarts(p)
	record("3 brokers: "+fault, pr.plan.Total, rep, rec)
	e.t.Logf("%s: publishing stalled %s (bound %s), %d pipeline restarts, %d duplicates", fault, rec.Round(time.Millisecond), resumeBound, n, rep.Duplicates)
	requireOK(e.t, rep)
	if rep.Duplicates > 0 && n == 0 {
		e.t.Fatalf("%d duplicates without a pipeline restart: the idempotent producer's retries duplicated", rep.Duplicates)
	}
	return rep
}

// assertResumed fails unless rec is a resumption within resumeBound of
// the fault, or, when Kafka itself took longer to be ready again (its
// fencing is checked periodically, a restarted broker must catch up: on
// a loaded machine that can pass the session timeout), within 2 s plus
// the margin of Kafka being ready (kafka, measured like rec).
func assertResumed(t *testing.T, what string, rec, kafka time.Duration) {
	t.Helper()
	t.Logf("%s: Kafka ready after %s, publishing resumed after %s (the producer's part: %s)", what, kafka.Round(time.Millisecond), rec.Round(time.Millisecond), (rec - kafka).Round(time.Millisecond))
	bound := max(resumeBound, kafka+resumeBound-sessionTimeout)
	if rec < 0 || rec > bound {
		t.Fatalf("%s: publishing resumed after %s (Kafka ready after %s), want within broker.session.timeout.ms + 2 s (+3 s margin) = %s of the fault, or 5 s of Kafka being ready", what, rec, kafka, resumeBound)
	}
}

// assertStalls is assertResumed for a watchStall report, which also
// fails when publishing, once resumed after Kafka was ready, stalled
// again for longer than laterBound: the producer's own share of a
// broker fault comes on top of Kafka's fencing, not after it.
func assertStalls(t *testing.T, what string, st stallReport) {
	t.Helper()
	t.Logf("%s: stalls of %s or more: %s; the longest that began after Kafka was ready: %s (as the polls prove it; the slowest poll took %s); stalled %s in all after Kafka was ready (the producer's share)",
		what, laterMin, strings.Join(st.gaps, ", "), st.later.Round(time.Millisecond), st.slowest.Round(time.Millisecond), st.share().Round(time.Millisecond))
	assertResumed(t, what, st.worst, st.kafka)
	if st.later > laterBound {
		t.Fatalf("%s: publishing stalled again for %s after it had resumed (Kafka ready after %s), want at most %s", what, st.later, st.kafka, laterBound)
	}
}

// laterBound bounds a stall that begins after Kafka was ready again: the
// goal for the producer's share of a broker fault (issue 30 item 10).
var laterBound = 2 * time.Second

// The leader of two partitions SIGKILLed, then started again: the
// partitions' leadership moves once Kafka fenced it, and the producer
// follows without restarting its pipeline.
func TestClusterKillLeader(t *testing.T) {
	e := newClusterEnv(t, roundRobin)
	// Node 1 first in the list: the metadata connection is not the victim's.
	e.kafka = []string{broker(1), broker(2), broker(3)}
	p := e.start()
	pr := e.clusterWorkload(1401, 30*time.Second)
	base := e.steady(pr)
	at := time.Now()
	stack(t, "kill-broker", "3")
	st := watchStall(e.topic, base, at, stallWindow, notLedBy(3))
	rec := st.worst
	stack(t, "start-broker", "3")
	e.clusterFinish("SIGKILL of a partition leader", p, pr, rec)
	assertStalls(t, "SIGKILL of the leader", st)
	if n := restarts(p); n != 0 {
		t.Fatalf("%d pipeline restarts: the producer should retry through a leader move", n)
	}
}

// The leader of two partitions paused (SIGSTOP) beyond Kafka's fencing
// time: its TCP connections stay open and unanswered; the producer must
// not wait for them but follow the new leaders.
func TestClusterPauseLeader(t *testing.T) {
	e := newClusterEnv(t, roundRobin)
	e.kafka = []string{broker(1), broker(2), broker(3)}
	p := e.start()
	pr := e.clusterWorkload(1402, 30*time.Second)
	base := e.steady(pr)
	at := time.Now()
	stack(t, "stop-broker", "3")
	st := watchStall(e.topic, base, at, stallWindow, notLedBy(3))
	rec := st.worst
	stack(t, "cont-broker", "3")
	e.clusterFinish("SIGSTOP of a partition leader", p, pr, rec)
	assertStalls(t, "SIGSTOP of the leader", st)
	if n := restarts(p); n != 0 {
		t.Fatalf("%d pipeline restarts: the producer should retry through a leader move", n)
	}
}

// The start-up tests come before the tests that kill or pause the
// metadata broker, two brokers or the bootstrap broker: those may move
// the active KRaft controller, after which brokers hand out producer ids
// slowly for a while (docs/delivery.md, "Producer ids after a controller
// pause"), which a start measures; go test runs them in this order.

// The publisher started while one broker (the first configured, a leader
// of two partitions) is paused: it starts, and publishes to every
// partition within Kafka's fencing time.
func TestClusterStartWhilePaused(t *testing.T) {
	e := newClusterEnv(t, roundRobin)
	e.kafka = []string{broker(1), broker(2), broker(3)}
	base := highWatermarks(e.topic)
	stack(t, "stop-broker", "1")
	at := time.Now()
	fenced := make(chan time.Duration, 1)
	go func() { // Kafka's part, while the publisher starts
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if ps, err := clusterPartitions(e.topic); err == nil && len(ps) == partitions && notLedBy(1)(ps) {
				fenced <- time.Since(at)
				return
			}
		}
		fenced <- -1
	}()
	p := e.start()
	started := time.Since(at)
	pr := e.clusterWorkload(1406, 30*time.Second)
	rec := waitResumed(e.topic, base, at, time.Minute)
	t.Logf("started (streaming) %s after the pause; every partition written after %s", started.Round(time.Millisecond), rec.Round(time.Millisecond))
	stack(t, "cont-broker", "1")
	e.clusterFinish("publisher started while a broker is paused", p, pr, rec)
	assertResumed(t, "start with a paused broker", rec, <-fenced)
}

// The exactly-once start while one of three brokers is paused (SIGSTOP):
// InitProducerId with the transactional id, the read of the committed
// transactions' headers and the first transactions go through the
// brokers that answer, within Kafka's fencing; a read_committed consumer
// then sees each event exactly once, in order.
func TestClusterStartWhilePausedExactlyOnce(t *testing.T) {
	e := newClusterEnv(t, roundRobin)
	e.kafka = []string{broker(1), broker(2), broker(3)}
	e.kafkaExtra = "  delivery: exactly-once\n"
	base := highWatermarks(e.topic)
	stack(t, "stop-broker", "1")
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			stack(t, "cont-broker", "1")
		}
	})
	at := time.Now()
	p := e.start()
	started := time.Since(at)
	pr := e.clusterWorkload(1408, 30*time.Second)
	rec := waitResumed(e.topic, base, at, time.Minute)
	t.Logf("exactly-once: started (streaming) %s after the pause; every partition written after %s", started.Round(time.Millisecond), rec.Round(time.Millisecond))
	stack(t, "cont-broker", "1")
	resumed = true
	pr.wait(t)
	cons := newCommittedConsumerOn(t, clusterBrokers, e.topic)
	chk := verify.NewChecker(pr.plan.Last)
	for deadline := time.Now().Add(3 * time.Minute); !chk.Complete() && time.Now().Before(deadline); {
		chk.Add(cons.poll(context.Background())...)
	}
	rep := chk.Report()
	t.Logf("read_committed: %s; %d pipeline restarts", rep.String(), restarts(p))
	requireOK(t, rep)
	if rep.Duplicates > 0 {
		t.Fatalf("exactly-once: %d duplicates for a read_committed consumer", rep.Duplicates)
	}
}

// The broker holding the publisher's metadata connection (the first
// configured broker, leading none of the topic's partitions) SIGKILLed or
// paused: metadata comes from another broker within the dial timeout.
func TestClusterMetadataBroker(t *testing.T) {
	for _, fault := range []string{"kill", "stop"} {
		t.Run(fault, func(t *testing.T) {
			e := newClusterEnv(t, leadNone(2))
			e.kafka = []string{broker(2), broker(3), broker(1)}
			p := e.start()
			pr := e.clusterWorkload(1403, 30*time.Second)
			base := e.steady(pr)
			if !connectedTo(t, p.cmd.Process.Pid, broker(2)) {
				t.Fatalf("the publisher has no connection to %s, its first configured broker", broker(2))
			}
			at := time.Now()
			stack(t, fault+"-broker", "2")
			// A follower of every partition: acks=all waits for it until
			// Kafka fences it and takes it out of the ISR.
			st := watchStall(e.topic, base, at, stallWindow, notInSync(2))
			rec := st.worst
			if fault == "kill" {
				stack(t, "start-broker", "2")
			} else {
				stack(t, "cont-broker", "2")
			}
			e.clusterFinish(map[string]string{"kill": "SIGKILL", "stop": "SIGSTOP"}[fault]+" of the metadata connection's broker", p, pr, rec)
			assertStalls(t, fault+" of the metadata broker", st)
			if n := restarts(p); n != 0 {
				t.Fatalf("%d pipeline restarts", n)
			}
		})
	}
}

// Two of three brokers down: below min.insync.replicas 2, publishing
// pauses (the broker left refuses acks=all writes); nothing is lost, and
// once one broker is back publishing resumes.
func TestClusterTwoDown(t *testing.T) {
	e := newClusterEnv(t, roundRobin)
	e.kafka = []string{broker(1), broker(2), broker(3)}
	p := e.start()
	pr := e.clusterWorkload(1404, 50*time.Second)
	base := e.steady(pr)
	stack(t, "kill-broker", "2")
	stack(t, "kill-broker", "3")
	downAt := time.Now()
	// Kafka fences the two within the session timeout; from then on
	// nothing can be acknowledged.
	time.Sleep(sessionTimeout + 2*time.Second)
	paused := highWatermarks(e.topic)
	time.Sleep(3 * time.Second)
	if still := highWatermarks(e.topic); !slices.Equal(paused, still) {
		t.Fatalf("records acknowledged with 1 of 3 brokers (min.insync.replicas 2): %v then %v", paused, still)
	}
	t.Logf("publishing paused with two brokers down (high watermarks %v, at fault %v)", paused, base)
	up := time.Now()
	stack(t, "start-broker", "2")
	rec, ready := watchResume(e.topic, paused, up, time.Minute, writable)
	t.Logf("down %s; resumed %s after node 2's start returned", up.Sub(downAt).Round(time.Millisecond), rec.Round(time.Millisecond))
	stack(t, "start-broker", "3")
	e.clusterFinish("two brokers SIGKILLed (below min.insync), one restarted", p, pr, rec)
	assertResumed(t, "a second broker back", rec, ready)
}

// The only configured broker (kafka.brokers lists one) SIGKILLed: the
// publisher knows the others from the metadata and carries on.
func TestClusterBootstrapDies(t *testing.T) {
	e := newClusterEnv(t, roundRobin)
	e.kafka = []string{broker(1)}
	p := e.start()
	pr := e.clusterWorkload(1405, 30*time.Second)
	base := e.steady(pr)
	at := time.Now()
	stack(t, "kill-broker", "1")
	st := watchStall(e.topic, base, at, stallWindow, notLedBy(1))
	rec := st.worst
	stack(t, "start-broker", "1")
	e.clusterFinish("SIGKILL of the only configured (bootstrap) broker", p, pr, rec)
	assertStalls(t, "the bootstrap broker killed", st)
	if n := restarts(p); n != 0 {
		t.Fatalf("%d pipeline restarts", n)
	}
}
