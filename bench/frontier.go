package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/consumer"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
)

// The whole-system cost of live publishing (issue 37): the publisher's and
// the broker's CPU side by side, what drives the broker's (produce
// requests per second, records per request, transactions per second, from
// the publisher's own metrics) and the latency they buy, per rate,
// delivery mode and latency budget, while one read_committed consumer
// reads along (as every consumer group of a deployment does: it fetches
// about once per round). Cases run in interleaved rounds (a, b, c, a, b,
// c, ...) so that a slow spell of the shared machine hits all alike; the
// table gives each case's median round with the range.

// frontierCase is one publisher setup: a label, its binary and the
// latency budget it is given ("": its default; the key is not written,
// so a binary without the setting runs too), and the read-along
// consumer: readerKgo (franz-go, one Fetch per broker, as the Java
// consumer) or readerConsumer (this project's package consumer, in a
// consumer group).
type frontierCase struct {
	label, bin, budget, reader string
}

// The read-along consumers of a frontier case.
const (
	readerKgo      = "kgo"
	readerConsumer = "consumer"
)

// parseCases parses "label=bin@budget[@reader],..." (budget may be
// empty; reader kgo, the default, or consumer).
func parseCases(s string) ([]frontierCase, error) {
	var out []frontierCase
	for _, f := range strings.Split(s, ",") {
		label, rest, ok := strings.Cut(strings.TrimSpace(f), "=")
		bin, budget, _ := strings.Cut(rest, "@")
		budget, reader, _ := strings.Cut(budget, "@")
		if !ok || label == "" || bin == "" {
			return nil, fmt.Errorf("frontier case %q: want label=binary@budget[@reader] (budget may be empty)", f)
		}
		if budget != "" {
			if _, err := time.ParseDuration(budget); err != nil {
				return nil, fmt.Errorf("frontier case %q: budget: %v", f, err)
			}
		}
		switch reader = cmp.Or(reader, readerKgo); reader {
		case readerKgo, readerConsumer:
		default:
			return nil, fmt.Errorf("frontier case %q: reader %q: want %s or %s", f, reader, readerKgo, readerConsumer)
		}
		out = append(out, frontierCase{label, bin, budget, reader})
	}
	return out, nil
}

// liveRun is one measured window of one case.
type liveRun struct {
	pubCores, brokerCores float64
	events                int
	secs                  float64
	requests, records     float64 // produce requests and their records over the window
	txns                  float64 // committed transactions over the window
	p50, p99, max         time.Duration
	readP99               time.Duration // commit → received by the read_committed consumer
	histP99               time.Duration // the publisher's own cdc_outbox_commit_to_ack_seconds: the bucket bound holding p99
	missing, dups, reord  int
}

// brokerCPU returns the CPU time (user+system) of the stack's broker:
// the process in CDC_STACK_DIR's kafka/kafka.pid (scripts/dev-stack.sh).
func brokerCPU() time.Duration {
	dir := cmp.Or(os.Getenv("CDC_STACK_DIR"), "/tmp/cdc-outbox-stack")
	b, err := os.ReadFile(filepath.Join(dir, "kafka/kafka.pid"))
	fail(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	fail(err)
	return pidCPU(pid)
}

// pidCPU returns the CPU time (user+system, /proc/<pid>/stat) of pid.
func pidCPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	fail(err)
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// scrape returns the lines of the publisher's metrics at addr (the
// Prometheus text format; none when it does not answer).
func scrape(addr string) []string {
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: scrape:", err)
		return nil
	}
	defer res.Body.Close()
	var lines []string
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines
}

// sums returns the samples of lines (scrape) summed by name, the labels
// dropped (cdc_outbox_produce_request_records_count, ...), aborted and
// failed results left out.
func sums(lines []string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range lines {
		name, rest, _ := strings.Cut(line, " ")
		labels := ""
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name, labels = name[:i], name[i:]
		}
		if strings.Contains(labels, `result="aborted"`) || strings.Contains(labels, `result="error"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err == nil {
			out[name] += v
		}
	}
	return out
}

// buckets returns the cumulative bucket counts of histogram name in lines
// (scrape), summed over its series, by upper bound (seconds; +Inf
// included).
func buckets(lines []string, name string) map[float64]float64 {
	out := map[float64]float64{}
	for _, line := range lines {
		if !strings.HasPrefix(line, name+"_bucket{") {
			continue
		}
		_, le, ok := strings.Cut(line, `le="`)
		le, rest, ok2 := strings.Cut(le, `"}`)
		if !ok || !ok2 {
			continue
		}
		ub, err1 := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		v, err2 := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err1 == nil && err2 == nil {
			out[ub] += v
		}
	}
	return out
}

// bucketQuantile returns the upper bound of the first bucket holding the
// q quantile of the observations between two scrapes (b1 - b0, cumulative
// counts by upper bound), as Prometheus's histogram_quantile would bound
// it from above; 0 without observations.
func bucketQuantile(q float64, b0, b1 map[float64]float64) time.Duration {
	var ubs []float64
	for ub := range b1 {
		ubs = append(ubs, ub)
	}
	slices.Sort(ubs)
	if len(ubs) == 0 {
		return 0
	}
	total := b1[ubs[len(ubs)-1]] - b0[ubs[len(ubs)-1]]
	if total <= 0 {
		return 0
	}
	for _, ub := range ubs {
		if b1[ub]-b0[ub] >= q*total {
			if math.IsInf(ub, 1) {
				return time.Duration(math.MaxInt64)
			}
			return time.Duration(ub * float64(time.Second))
		}
	}
	return time.Duration(math.MaxInt64)
}

// requests returns the produce requests and their records in m: the
// histogram of records per request, or, from a publisher without it, the
// produce rounds (one request per round with one broker) and records.
func requests(m map[string]float64) (float64, float64) {
	if n, ok := m["cdc_outbox_produce_request_records_count"]; ok {
		return n, m["cdc_outbox_produce_request_records_sum"]
	}
	return m["cdc_outbox_produce_seconds_count"], m["cdc_outbox_records_produced_total"]
}

// readAlong consumes topic with isolation read_committed from its start
// until stop is closed and want records arrived (or a minute after stop):
// per record, the time it was received minus the commit-side timestamp in
// its payload, and the event ids by partition in log order.
func readAlong(topic string, want func() int, stop <-chan struct{}) ([]time.Duration, map[int32][]int64) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(time.Second))
	fail(err)
	defer cl.Close()
	var lat []time.Duration
	ids := map[int32][]int64{}
	n := 0
	var deadline time.Time
	for {
		select {
		case <-stop:
			if deadline.IsZero() {
				deadline = time.Now().Add(time.Minute)
			}
			if n >= want() || time.Now().After(deadline) {
				return lat, ids
			}
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			n++
			var v struct {
				TS int64 `json:"ts_us"`
			}
			if json.Unmarshal(r.Value, &v) == nil && v.TS > 0 {
				lat = append(lat, now.Sub(time.UnixMicro(v.TS)))
			}
			for _, h := range r.Headers {
				if h.Key == router.HeaderEventID {
					id, _ := strconv.ParseInt(string(h.Value), 10, 64)
					ids[r.Partition] = append(ids[r.Partition], id)
				}
			}
		})
	}
}

// readAlongConsumer is readAlong with package consumer (read_committed,
// the im layout, a group of its own, from the topic's start): what a
// deployment's gateway built on it costs the broker.
func readAlongConsumer(topic string, want func() int, stop <-chan struct{}) ([]time.Duration, map[int32][]int64) {
	var mu sync.Mutex
	var lat []time.Duration
	ids := map[int32][]int64{}
	n := 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := consumer.New(consumer.Config{Brokers: brokers, Topics: []string{topic}, Group: "bench-" + topic,
		Isolation: consumer.ReadCommitted, Start: consumer.StartEarliest, MaxWait: time.Second},
		consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
			now := time.Now()
			var v struct {
				TS int64 `json:"ts_us"`
			}
			id, _ := strconv.ParseInt(r.EventID, 10, 64)
			mu.Lock()
			defer mu.Unlock()
			n++
			if json.Unmarshal(r.Payload, &v) == nil && v.TS > 0 {
				lat = append(lat, now.Sub(time.UnixMicro(v.TS)))
			}
			ids[int32(r.Partition)] = append(ids[int32(r.Partition)], id)
			return nil
		}), consumer.Options{})
	fail(err)
	var run errgroup.Group
	run.Go(func() error { return c.Run(ctx) })
	<-stop
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		got := n
		mu.Unlock()
		if got >= want() || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	fail(run.Wait())
	mu.Lock()
	defer mu.Unlock()
	return lat, ids
}

// verify counts, from the event ids read by partition, the events of n
// written (ids consecutive from the smallest) that are missing, the
// duplicates, and the records not in ascending id order within their
// partition (per-key order: a conversation's rows commit in id order).
func verify(ids map[int32][]int64, n int) (missing, dups, reordered int) {
	seen := map[int64]int{}
	lo := int64(-1)
	for _, part := range ids {
		for i, id := range part {
			seen[id]++
			if lo < 0 || id < lo {
				lo = id
			}
			if i > 0 && id <= part[i-1] {
				reordered++
			}
		}
	}
	for id := lo; id < lo+int64(n); id++ {
		switch c := seen[id]; {
		case c == 0:
			missing++
		case c > 1:
			dups += c - 1
		}
	}
	return missing, dups, reordered
}

// frontierRun runs case c at rate events/s (1–10-row transactions) for d
// under delivery ("": at-least-once).
func (b *bench) frontierRun(ctx context.Context, c frontierCase, delivery string, rate int, d time.Duration, i int) liveRun {
	tag := fmt.Sprintf("%s_%d_%s_%d", c.label, rate, cmp.Or(delivery, "alo"), i)
	tag = strings.NewReplacer("-", "", ".", "").Replace(tag)
	table := "bench_fr_" + tag + "_" + b.run
	b.table2(table)
	topic := "bench.fr." + strings.ReplaceAll(tag, "_", ".") + "." + b.run
	createTopic(topic)
	key := "cdc-outbox:bench:fr" + tag + ":" + b.run
	addr := fmt.Sprintf("127.0.0.1:%d", 19100+rand.IntN(800))
	b.delivery, b.extra = delivery, fmt.Sprintf("metrics-addr: %q\n", addr)
	if c.budget != "" {
		b.extra += "latency-budget: " + c.budget + "\n"
	}
	cfg := b.config(table, topic, key)
	b.delivery, b.extra = "", ""
	saved := b.bin
	b.bin = c.bin
	p := b.start(cfg, "--start", "latest")
	b.bin = saved
	p.waitLog("streaming binlog")
	var mu sync.Mutex
	written := 0
	stop := make(chan struct{})
	var lat []time.Duration
	var ids map[int32][]int64
	var read errgroup.Group
	read.Go(func() error {
		want := func() int { mu.Lock(); defer mu.Unlock(); return written }
		if c.reader == readerConsumer {
			lat, ids = readAlongConsumer(topic, want, stop)
		} else {
			lat, ids = readAlong(topic, want, stop)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // the consumer joined
	const hist = "cdc_outbox_commit_to_ack_seconds"
	l0, pc0, bc0, t0 := scrape(addr), p.cpu(), brokerCPU(), time.Now()
	n := liveWorkloadTxns(table, rate, d, 1000, func() int { return 1 + rand.IntN(10) })
	time.Sleep(200 * time.Millisecond) // the last rounds land
	l1, pc1, bc1, t1 := scrape(addr), p.cpu(), brokerCPU(), time.Now()
	m0, m1, h0, h1 := sums(l0), sums(l1), buckets(l0, hist), buckets(l1, hist)
	mu.Lock()
	written = n
	mu.Unlock()
	close(stop)
	_ = read.Wait()
	p.stop()
	app := latencies(ctx, topic, n)
	slices.Sort(app)
	slices.Sort(lat)
	wall := t1.Sub(t0)
	r := liveRun{pubCores: float64(pc1-pc0) / float64(wall), brokerCores: float64(bc1-bc0) / float64(wall), events: n, secs: wall.Seconds(),
		p50: pct(app, .5), p99: pct(app, .99), max: pct(app, 1), readP99: pct(lat, .99),
		txns: m1["cdc_outbox_kafka_transactions_total"] - m0["cdc_outbox_kafka_transactions_total"], histP99: bucketQuantile(.99, h0, h1)}
	q1, rec1 := requests(m1)
	q0, rec0 := requests(m0)
	r.requests, r.records = q1-q0, rec1-rec0
	r.missing, r.dups, r.reord = verify(ids, n)
	return r
}

// histBound formats a bucket bound of bucketQuantile ("none" without
// observations, "+Inf" past the last bound).
func histBound(d time.Duration) string {
	switch d {
	case 0:
		return "none"
	case time.Duration(math.MaxInt64):
		return "+Inf"
	}
	return d.String()
}

// cpu returns the process's CPU time (user+system).
func (p *proc) cpu() time.Duration { return pidCPU(p.cmd.Process.Pid) }

// frontier measures every case × delivery mode ("" at-least-once,
// "exactly-once") × rate in rounds interleaved, and adds one row per
// combination: the median round by publisher + broker cores, with the
// ranges.
func (b *bench) frontier(ctx context.Context, cases []frontierCase, rates []int, deliveries []string, rounds int, d time.Duration) {
	type key struct {
		c        frontierCase
		delivery string
		rate     int
	}
	var keys []key
	for _, rate := range rates {
		for _, dl := range deliveries {
			for _, c := range cases {
				keys = append(keys, key{c, dl, rate})
			}
		}
	}
	runs := map[key][]liveRun{}
	var idle []float64
	for i := range rounds {
		b0, t0 := brokerCPU(), time.Now()
		time.Sleep(5 * time.Second)
		idle = append(idle, float64(brokerCPU()-b0)/float64(time.Since(t0)))
		for _, k := range keys {
			r := b.frontierRun(ctx, k.c, k.delivery, k.rate, d, i)
			runs[k] = append(runs[k], r)
			fmt.Fprintf(os.Stderr, "bench: frontier round %d: %s %s %d/s: publisher %.3f + broker %.3f cores, %.0f req/s × %.1f records, %.0f txn/s, p50 %s p99 %s max %s, read_committed p99 %s; %d events, %d missing, %d duplicates, %d reordered\n",
				i+1, k.c.label, cmp.Or(k.delivery, "at-least-once"), k.rate, r.pubCores, r.brokerCores, r.requests/r.secs, r.records/max(r.requests, 1), r.txns/r.secs,
				ms(r.p50), ms(r.p99), ms(r.max), ms(r.readP99), r.events, r.missing, r.dups, r.reord)
		}
	}
	slices.Sort(idle)
	var load string
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	b.add("frontier: broker idle", fmt.Sprintf("%.3f cores", idle[len(idle)/2]),
		fmt.Sprintf("the broker alone before each round (median of %d; included in every broker figure below); load average at the end %s", len(idle), load))
	const hist = "cdc_outbox_commit_to_ack_seconds"
	secondsNote := ""
	if !strings.HasPrefix(b.server, "MySQL") {
		secondsNote = " (MariaDB's binlog gives commit times in whole seconds)"
	}
	var points []plotPoint
	for _, k := range keys {
		rs := runs[k]
		sum := func(r liveRun) float64 { return r.pubCores + r.brokerCores }
		slices.SortFunc(rs, func(a, b liveRun) int { return cmp.Compare(sum(a), sum(b)) })
		m := rs[len(rs)/2]
		bad := 0
		for _, r := range rs {
			bad += r.missing + r.dups + r.reord
		}
		verdict := "0 missing, 0 duplicates, 0 reordered in every round"
		if bad > 0 {
			verdict = fmt.Sprintf("NOT VERIFIED: %d missing/duplicate/reordered records over the rounds (see stderr)", bad)
		}
		budget := cmp.Or(k.c.budget, "default")
		points = append(points, plotPoint{k.c.label, cmp.Or(k.delivery, "at-least-once"), k.rate, sum(m), float64(m.p99) / float64(time.Millisecond)})
		b.add(fmt.Sprintf("frontier %d/s, %s, %s (latency-budget %s)", k.rate, cmp.Or(k.delivery, "at-least-once"), k.c.label, budget),
			fmt.Sprintf("publisher %.3f + broker %.3f = %.3f cores; p50 %s, p99 %s, max %s", m.pubCores, m.brokerCores, sum(m), ms(m.p50), ms(m.p99), ms(m.max)),
			fmt.Sprintf("%.0f events/s written; broker %.1f µs CPU per event; %.0f produce requests/s × %.1f records; %.0f transactions/s; read_committed p99 %s; the publisher's %s p99 ≤ %s%s; sums %.3f–%.3f cores over %d rounds; %s",
				float64(m.events)/m.secs, m.brokerCores*1e6/(float64(m.events)/m.secs), m.requests/m.secs, m.records/max(m.requests, 1), m.txns/m.secs, ms(m.readP99), hist, histBound(m.histP99), secondsNote,
				sum(rs[0]), sum(rs[len(rs)-1]), len(rs), verdict))
	}
	if b.svg != "" {
		if err := frontierSVG(b.svg, points); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
}
