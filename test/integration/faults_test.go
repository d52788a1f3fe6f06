//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/segmentio/kafka-go"
)

// The fault matrix: each trial runs a producer workload while a fault
// happens, then checks every event against what was committed. Quick by
// default (CI); CDC_FAULTS=full gives the full-size matrix (make faults).
// The table of results is printed at the end of the test binary and written
// to $CDC_FAULT_REPORT when set.

var fullMatrix = os.Getenv("CDC_FAULTS") == "full"

// pick returns quick or full.
func pick[T any](quick, full T) T {
	if fullMatrix {
		return full
	}
	return quick
}

type faultRow struct {
	fault                                string
	trials, events, lost, reordered, dup int
	recovery                             []time.Duration
}

var matrix struct {
	sync.Mutex
	rows  map[string]*faultRow
	order []string
}

func record(fault string, events int, rep verify.Report, recovery time.Duration) {
	matrix.Lock()
	defer matrix.Unlock()
	if matrix.rows == nil {
		matrix.rows = map[string]*faultRow{}
	}
	r := matrix.rows[fault]
	if r == nil {
		r = &faultRow{fault: fault}
		matrix.rows[fault] = r
		matrix.order = append(matrix.order, fault)
	}
	r.trials++
	r.events += events
	r.lost += rep.Missing
	r.reordered += rep.Reordered + rep.Split + rep.Conflicts
	r.dup += rep.Duplicates
	if recovery >= 0 {
		r.recovery = append(r.recovery, recovery)
	}
}

// matrixTable renders the results; "" when no fault ran.
func matrixTable() string {
	matrix.Lock()
	defer matrix.Unlock()
	if len(matrix.order) == 0 {
		return ""
	}
	var b strings.Builder
	mode := "quick"
	if fullMatrix {
		mode = "full"
	}
	fmt.Fprintf(&b, "\nfault matrix (%s), %s\n\n", mode, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "| fault | trials | events | lost | reordered | duplicates | recovery p50 | recovery max |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, name := range matrix.order {
		r := matrix.rows[name]
		p50, mx := "n/a", "n/a"
		if len(r.recovery) > 0 {
			d := append([]time.Duration(nil), r.recovery...)
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			p50, mx = d[len(d)/2].Round(time.Millisecond).String(), d[len(d)-1].Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %s | %s |\n", r.fault, r.trials, r.events, r.lost, r.reordered, r.dup, p50, mx)
	}
	return b.String()
}

// stack runs scripts/dev-stack.sh with the test's environment.
func stack(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("../../scripts/dev-stack.sh", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("dev-stack.sh %v: %v\n%s", args, err, out)
	}
}

// endOffsets is the sum of the topic's partitions' high watermarks.
func endOffsets(topic string) int64 {
	conn, err := kafka.Dial("tcp", brokers[0])
	if err != nil {
		return -1
	}
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	if err != nil {
		return -1
	}
	var sum int64
	for _, p := range parts {
		c, err := kafka.DialLeader(context.Background(), "tcp", brokers[0], topic, p.ID)
		if err != nil {
			return -1
		}
		last, err := c.ReadLastOffset()
		c.Close()
		if err != nil {
			return -1
		}
		sum += last
	}
	return sum
}

// waitGrowth returns how long after since the topic grew past its size at
// the call, or -1 if it did not within timeout.
func waitGrowth(topic string, since time.Time, timeout time.Duration) time.Duration {
	return waitGrowthFrom(topic, endOffsets(topic), since, timeout)
}

// waitGrowthFrom is waitGrowth past the end offsets base, read by the
// caller when the fault struck: a new owner may publish the backlog
// before the caller gets to look (a loaded machine), which waitGrowth's
// own base would then include.
func waitGrowthFrom(topic string, base int64, since time.Time, timeout time.Duration) time.Duration {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if n := endOffsets(topic); n > base && base >= 0 {
			return time.Since(since)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1
}

// producer writes a plan in the background at about rate rows/s, retrying
// through database faults.
type producer struct {
	committed atomic.Int64 // rows committed so far
	plan      *workload.Plan
	stop      chan struct{}
	done      chan error
}

func (e *env) produceBackground(plan *workload.Plan, rate int) *producer {
	w := e.writer()
	pr := &producer{plan: plan, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		start, n := time.Now(), 0
		for _, txn := range plan.Txns {
			if err := w.TxnRetry(txn, pr.stop); err != nil {
				pr.done <- err
				return
			}
			n += len(txn)
			pr.committed.Store(int64(n))
			if ahead := time.Duration(float64(n)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		pr.done <- nil
	}()
	e.t.Cleanup(func() { close(pr.stop) })
	return pr
}

func (pr *producer) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-pr.done:
		if err != nil {
			t.Fatalf("producer: %v", err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("producer did not finish")
	}
}

// waitPublished polls until n distinct events of plan were published.
func (e *env) waitPublished(plan *workload.Plan, n int, timeout time.Duration) {
	e.t.Helper()
	chk := verify.NewChecker(plan.Last)
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		recs, _ := cons.Poll(context.Background())
		chk.Add(recs...)
		if chk.Report().Unique >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("fewer than %d events published within %s", n, timeout)
}

// requireDuplicatesAfter checks that every event published more than once
// belongs to a transaction ending after cp (its binlog_txn_end header):
// a restart re-publishes only what came after the last checkpoint.
func (e *env) requireDuplicatesAfter(cp *checkpoint.Checkpoint) {
	e.t.Helper()
	if cp == nil {
		e.t.Fatal("no checkpoint before the kill")
	}
	recs, err := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic).Poll(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range recs {
		seen[r.EventID]++
	}
	dups := 0
	for _, r := range recs {
		if seen[r.EventID] < 2 {
			continue
		}
		dups++
		st, err := binlog.ParseStart(r.Headers["binlog_txn_end"])
		if err != nil {
			e.t.Fatalf("event %s: binlog_txn_end %q: %v", r.EventID, r.Headers["binlog_txn_end"], err)
		}
		if binlog.ComparePos(binlog.Position{File: st.File, Pos: st.Pos}, cp.Position()) <= 0 {
			e.t.Fatalf("event %s (transaction ending at %s) was published twice, though the checkpoint %s:%d before the kill was past it",
				r.EventID, r.Headers["binlog_txn_end"], cp.File, cp.Pos)
		}
	}
	e.t.Logf("%d duplicate records, all of transactions after the checkpoint %s:%d", dups, cp.File, cp.Pos)
}

// finish waits for the producer and checks the topic against the plan.
func (e *env) finish(fault string, pr *producer, recovery time.Duration) verify.Report {
	e.t.Helper()
	pr.wait(e.t)
	rep := e.consume(verify.NewChecker(pr.plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 3*time.Minute)
	record(fault, pr.plan.Total, rep, recovery)
	requireOK(e.t, rep)
	return rep
}

// SIGKILL of the publisher at random moments while a workload with
// transactions of 1 to 5,000 rows (quick: 500) is written.
func TestFaultKillRandom(t *testing.T) {
	for i := range pick(3, 20) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newEnv(t)
			p := e.start()
			plan := workload.Generate(uint64(100+i), 0, 300, pick(6000, 30000), 1, pick(500, 5000), 200)
			pr := e.produceBackground(plan, pick(6000, 15000))
			time.Sleep(time.Duration(100+rand.IntN(900)) * time.Millisecond)
			p.kill(t)
			cp := e.checkpoint() // the last checkpoint of the killed publisher
			base := endOffsets(e.topic)
			restart := time.Now()
			e.start()
			rec := waitGrowthFrom(e.topic, base, restart, time.Minute)
			e.finish("SIGKILL publisher, random moment", pr, rec)
			e.requireDuplicatesAfter(cp)
		})
	}
}

// SIGKILL in the middle of a 5,000-row transaction: some of its records
// are in Kafka, the rest not, and the checkpoint is before it. Small produce
// rounds (50 records) stretch each transaction over a hundred rounds; a kill
// counts as inside a transaction when, after it, Kafka holds part of one.
func TestFaultKillMidTransaction(t *testing.T) {
	for i := range pick(1, 3) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newEnv(t)
			e.batchSize = 50
			p := e.start()
			plan := workload.Generate(uint64(200+i), 0, 100, 5000*pick(6, 10), 5000, 5000, 100)
			pr := e.produceBackground(plan, 10000)
			cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
			perTxn := map[string]int{}
			partial := func() bool {
				recs, _ := cons.Poll(context.Background())
				for _, r := range recs {
					perTxn[r.Headers["binlog_txn_end"]]++ // duplicates cannot occur before the first kill
				}
				for _, n := range perTxn {
					if n > 0 && n < 5000 {
						return true
					}
				}
				return false
			}
			hit := false
			for attempt := 0; attempt < 10 && !hit; attempt++ {
				deadline := time.Now().Add(30 * time.Second)
				for !partial() && time.Now().Before(deadline) {
				}
				p.kill(t)
				hit = partial() // what Kafka holds now is final for this run
				if !hit {
					p = e.start()
				}
			}
			if !hit {
				t.Fatal("no kill landed inside a 5,000-row transaction in 10 attempts")
			}
			base := endOffsets(e.topic)
			restart := time.Now()
			e.start()
			rec := waitGrowthFrom(e.topic, base, restart, time.Minute)
			e.finish("SIGKILL publisher inside a 5,000-row transaction", pr, rec)
		})
	}
}

// The broker stopped while publishing and restarted 10–60 s later (quick:
// 3 s); the publisher recovers by itself.
func TestFaultBrokerDown(t *testing.T) {
	for i := range pick(1, 3) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newEnv(t)
			addr := metricsAddrOf(t, e.start())
			plan := workload.Generate(uint64(300+i), 0, 200, pick(8000, 40000), 1, 500, 200)
			down := pick(3*time.Second, time.Duration(10+rand.IntN(51))*time.Second)
			// Keep producing through the outage and well after it.
			pr := e.produceBackground(plan, max(500, plan.Total/int((down+20*time.Second)/time.Second)))
			e.waitPublished(plan, 500, time.Minute)
			stopped := time.Now()
			stack(t, "stop-kafka")
			t.Cleanup(func() { stack(t, "start-kafka") })
			time.Sleep(down)
			// The round in flight has waited for an answer since the broker
			// stopped (what the CdcOutboxProduceUnanswered alert follows).
			// Until kafka.delivery-timeout (30 s) ends the retries in a
			// pipeline restart, which begins again at 0.
			const unanswered = `cdc_outbox_produce_unanswered_seconds{source="default"}`
			if u, since := metricFloat(t, addr, unanswered), time.Since(stopped); since < 25*time.Second && !(u >= since.Seconds()-2) {
				t.Fatalf("%s after the broker stopped: %s = %v, want at least %.1f", since.Round(time.Millisecond), unanswered, u, since.Seconds()-2)
			} else {
				t.Logf("%s after the broker stopped: %s = %v", since.Round(time.Millisecond), unanswered, u)
			}
			// Recovery: from the broker's restart until everything committed
			// during the outage is published.
			backlog := int(pr.committed.Load())
			up := time.Now()
			stack(t, "start-kafka") // returns once the broker answers
			e.waitPublished(plan, backlog, 2*time.Minute)
			rec := time.Since(up)
			for deadline := time.Now().Add(30 * time.Second); metricFloat(t, addr, unanswered) >= 1; time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("after the recovery: %s = %v, want under a second", unanswered, metricFloat(t, addr, unanswered))
				}
			}
			e.finish(fmt.Sprintf("Kafka broker down %s (recovery: backlog published)", pick("3 s", "10–60 s")), pr, rec)
		})
	}
}

// SIGTERM while the broker is down: the publisher exits within
// shutdown-timeout and has checkpointed nothing it did not publish (a
// restart after the broker is back loses nothing).
func TestFaultTermWhileBrokerDown(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	plan := workload.Generate(400, 0, 100, 4000, 1, 200, 200)
	pr := e.produceBackground(plan, 2000)
	e.waitPublished(plan, 300, time.Minute)
	stack(t, "stop-kafka")
	t.Cleanup(func() { stack(t, "start-kafka") })
	time.Sleep(500 * time.Millisecond)
	began := time.Now()
	p.stop(t, 10*time.Second+10*time.Second) // shutdown-timeout 10s in tests, plus slack
	t.Logf("exited %s after SIGTERM with the broker down", time.Since(began).Round(time.Millisecond))
	stack(t, "start-kafka")
	// Recovery: from the restart until everything committed so far is
	// published (the producer may have finished meanwhile, so waiting for
	// growth alone could wait for nothing).
	backlog := int(pr.committed.Load())
	restart := time.Now()
	e.start()
	e.waitPublished(plan, backlog, 2*time.Minute)
	rec := time.Since(restart)
	e.finish("SIGTERM while the broker is down", pr, rec)
}

// Redis stopped and restarted: publishing goes on, the failure is logged;
// then Redis down and a SIGKILL: the restart resumes from the last stored
// checkpoint, which never passed unacknowledged records.
func TestFaultRedisDown(t *testing.T) {
	e := newEnv(t)
	e.noHA = true // without a lease (ha.enabled: false), publishing goes on; with one it stops (TestHARedisRestart)
	p := e.start()
	plan := workload.Generate(500, 0, 100, 6000, 1, 200, 200)
	pr := e.produceBackground(plan, 1500)
	e.waitPublished(plan, 300, time.Minute)
	stack(t, "stop-redis")
	t.Cleanup(func() { stack(t, "start-redis") })
	e.waitLog(p, "cannot write checkpoint; publishing continues", 30*time.Second)
	e.waitPublished(plan, 2000, time.Minute) // still publishing without Redis
	p.kill(t)
	stack(t, "start-redis")
	restart := time.Now()
	e.start()
	rec := waitGrowth(e.topic, restart, time.Minute)
	e.finish("Redis down, then SIGKILL", pr, rec)
}

// MariaDB restarted under the publisher, and the replication connection
// killed with KILL <id>: reconnect and continue with no gap, in file/pos
// and in GTID mode.
func TestFaultDatabase(t *testing.T) {
	for _, mode := range []string{"file", "gtid"} {
		t.Run("restart_"+mode, func(t *testing.T) {
			e := newEnv(t)
			e.positionMode = mode
			e.start()
			plan := workload.Generate(600, 0, 100, 6000, 1, 200, 200)
			pr := e.produceBackground(plan, 1500)
			e.waitPublished(plan, 300, time.Minute)
			stack(t, "restart-db")
			up := time.Now()
			rec := waitGrowth(e.topic, up, 2*time.Minute)
			e.finish("database restart ("+mode+" mode)", pr, rec)
		})
		t.Run("kill_connection_"+mode, func(t *testing.T) {
			e := newEnv(t)
			e.positionMode = mode
			p := e.start()
			plan := workload.Generate(700, 0, 100, 6000, 1, 200, 200)
			pr := e.produceBackground(plan, 1500)
			e.waitPublished(plan, 300, time.Minute)
			killed := e.killDumpThreads()
			if killed == 0 {
				t.Fatal("no binlog dump thread to kill")
			}
			at := time.Now()
			rec := waitGrowth(e.topic, at, time.Minute)
			e.finish("KILL replication connection ("+mode+" mode)", pr, rec)
			if !logHas(p.log, "restarting from the last acknowledged position") {
				t.Fatal("the publisher did not log the reconnect")
			}
		})
	}
}

// killDumpThreads kills the binlog dump threads of this test's publisher
// (found by its replica server_id's connection) and returns how many.
func (e *env) killDumpThreads() int {
	c := e.sql()
	defer c.Close()
	r, err := c.Execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for i := 0; i < r.RowNumber(); i++ {
		id, _ := r.GetUint(i, 0)
		if _, err := c.Execute(fmt.Sprintf("KILL %d", id)); err == nil {
			n++
		}
	}
	return n
}

// Kafka down for several read-timeouts while rows keep coming: the byte
// budget fills and the reader stops taking events from the binlog stream
// (backpressure) for longer than source.read-timeout. That wait must not
// time out the replication connection (go-mysql counts the read timeout
// from each socket read, not from the previous packet) nor restart the
// pipeline: 0 restarts, nothing lost, no duplicates. The one restart
// allowed is the server's: it ends a dump connection that is not read
// for net_write_timeout (60 s by default; docs/ha.md relies on it), which
// the broker's stop and start alone can outlast on a loaded machine.
func TestFaultBrokerDownBackpressure(t *testing.T) {
	e := newEnv(t)
	e.readTimeout, e.sourceExtra = "2s", "  buffer-bytes: 1048576\n"
	// The subject is the binlog stream under backpressure, not the
	// producer's retry budget: on a loaded machine stop-kafka, the 8 s and
	// start-kafka until the partitions have leaders can outlast the 30 s
	// default kafka.delivery-timeout, whose expiry restarts the pipeline
	// by design (sink.Config.DeliveryTimeout).
	t.Setenv("CDC_OUTBOX_KAFKA_DELIVERY_TIMEOUT", "3m")
	p := e.start()
	plan := workload.Generate(350, 0, 100, 12000, 1, 20, 500)
	pr := e.produceBackground(plan, 1500)
	e.waitPublished(plan, 500, time.Minute)
	writeTimeout, err := time.ParseDuration(e.variable("@@net_write_timeout") + "s")
	if err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	stack(t, "stop-kafka")
	t.Cleanup(func() { stack(t, "start-kafka") })
	time.Sleep(8 * time.Second) // the outage: four read-timeouts
	backlog := int(pr.committed.Load())
	up := time.Now()
	stack(t, "start-kafka")
	e.waitPublished(plan, backlog, 2*time.Minute)
	rec := time.Since(up)
	e.finish("Kafka broker down 8 s with the read-ahead budget full (read-timeout 2 s)", pr, rec)
	for _, r := range restartLines(t, p) {
		// the server's end of the dump: the binlog socket closed or reset
		// (go-mysql's "...: connection was bad": unexpected EOF on MySQL,
		// connection reset by peer on MariaDB), not the read timeout
		serverEnded := strings.Contains(r.err, "connection was bad") && !strings.Contains(r.err, "i/o timeout")
		if !serverEnded || r.at.Sub(down) < writeTimeout {
			t.Fatalf("pipeline restart %s after the broker stopped (the server's net_write_timeout is %s): a wait on backpressure longer than read-timeout must not time out the binlog stream: %s",
				r.at.Sub(down).Round(time.Millisecond), writeTimeout, r.err)
		}
		t.Logf("pipeline restart %s after the broker stopped, past the server's net_write_timeout %s (the server ended the unread dump connection): %s",
			r.at.Sub(down).Round(time.Millisecond), writeTimeout, r.err)
	}
}

// restartLine is one "pipeline stopped; restarting" line of a publisher's log.
type restartLine struct {
	at  time.Time
	err string
}

// restartLines returns the publisher's pipeline restarts, in log order.
func restartLines(t *testing.T, p *publisher) []restartLine {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []restartLine
	for _, line := range strings.Split(string(b), "\n") {
		var l struct {
			TS    string `json:"ts"`
			Msg   string `json:"msg"`
			Error string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || !strings.HasPrefix(l.Msg, "pipeline stopped; restarting") {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05.000Z0700", l.TS)
		if err != nil {
			t.Fatalf("%s: ts %q: %v", p.log, l.TS, err)
		}
		out = append(out, restartLine{at: at, err: l.Error})
	}
	return out
}
