// Command bench measures cdc-outbox on the local stack (scripts/dev-stack.sh)
// and prints one table per run, every figure measured side by side in that
// run: raw binlog read and Kafka produce limits, draining a backlog,
// commit-to-acknowledgement latency at fixed rates, recovery after SIGKILL,
// and the seeds' polling dispatcher on the same data and broker.
//
//	go run ./bench [-rows 1000000] [-convs 10000] [-payload 500] [-repeat 3] [-out BENCHMARKS.md]
//
// The raw limits and the drain run -repeat times, alternated, and the
// table gives each one's median trial with the range: the two cores are
// shared with MariaDB and the broker, and single runs vary by ±20 %.
//
// It expects the stack's addresses in the CDC_* environment variables that
// `scripts/dev-stack.sh env` prints, and the cdc-outbox binary at -bin.
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cdc-outbox/cdc-outbox/audit"
	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

var (
	mysqlAddr = env("CDC_MYSQL_ADDR", "127.0.0.1:33306")
	mysqlUser = env("CDC_MYSQL_USER", "root")
	mysqlPass = env("CDC_MYSQL_PASSWORD", "root")
	mysqlDB   = env("CDC_MYSQL_DB", "im")
	redisAddr = env("CDC_REDIS_ADDR", "127.0.0.1:36379")
	brokers   = strings.Split(env("CDC_KAFKA_BROKERS", "127.0.0.1:39092"), ",")
)

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type row struct{ name, value, note string }

type bench struct {
	rows, convs, payload int
	bin                  string
	profile              string
	heap                 string // with -only live-cost: the file prefix of the publisher's heap profile and MemStats at the window's end
	repeat               int
	drainOnly            bool
	delivery             string // kafka.delivery of the publishers started ("": the default, at-least-once)
	audit                bool   // the publishers started run the continuous audit (audit.enabled; ha off)
	extra                string // top-level YAML lines added to the publishers' configurations (metrics-addr replaces the default "")
	server               string // the source server's name for the table: "MariaDB 10.11.6", "MySQL 9.7.4"
	run                  string
	dir                  string
	table                string
	results              []row
	svg                  string // -frontier-svg: where the frontier's picture goes ("": none)
}

func main() {
	b := &bench{}
	flag.IntVar(&b.rows, "rows", 1_000_000, "backlog rows to drain")
	flag.IntVar(&b.convs, "convs", 10_000, "conversations")
	flag.IntVar(&b.payload, "payload", 500, "payload bytes")
	flag.StringVar(&b.bin, "bin", "bin/cdc-outbox", "cdc-outbox binary")
	out := flag.String("out", "", "append the table to this Markdown file")
	flag.StringVar(&b.profile, "cpuprofile", "", "write a CPU profile of the publisher during the drain to this file (then stop after the drain)")
	flag.IntVar(&b.repeat, "repeat", 3, "trials of the raw limits and the drain, alternated; the table gives medians")
	only := flag.String("only", "", "run one case only: live-cost (with the round floor), live-rss (the live cost of 1–10-row transactions and the live RSS, no floor), audit-cost (live cost with the audit off, then on), recovery, or frontier (the whole-system cost: publisher and broker CPU per rate, delivery and latency budget)")
	frCases := flag.String("frontier-cases", "default=bin/cdc-outbox@,20ms=bin/cdc-outbox@20ms,100ms=bin/cdc-outbox@100ms", "with -only frontier: label=binary@latency-budget[@reader],... (an empty budget writes no key: the binary's default; reader kgo, the default, or consumer: package consumer reads along)")
	frRates := flag.String("frontier-rates", "1000,5000,20000", "with -only frontier: events/s, comma-separated")
	frRounds := flag.Int("frontier-rounds", 3, "with -only frontier: interleaved rounds of every case")
	frD := flag.Duration("frontier-d", 15*time.Second, "with -only frontier: the measured window of each run")
	frDeliveries := flag.String("frontier-deliveries", "at-least-once,exactly-once", "with -only frontier: the delivery modes measured, comma-separated")
	frFrom := flag.String("frontier-from", "", "with -frontier-svg: draw the picture from the frontier rows of this results file (a run on record) instead of running")
	flag.StringVar(&b.svg, "frontier-svg", "", "write the frontier's picture (publisher + broker cores against p99, per delivery mode and rate) to this SVG file")
	costProfile := flag.String("live-cost-profile", "", "with -only live-cost: write a CPU profile of the publisher to this file")
	flag.StringVar(&b.heap, "live-cost-heap", "", "with -only live-cost or live-rss: write the publisher's heap profile (PREFIX.heap) and MemStats (PREFIX.txt, /debug/pprof/heap?debug=1) at the end of the window")
	costRows := flag.Int("live-cost-rows", 0, "with -only live-cost: rows per transaction (0: uniform 1–10)")
	flag.BoolVar(&b.drainOnly, "drain-only", false, "measure the raw limits and the drain only (no latency, recovery or dispatcher runs): the second flavour of make bench")
	floorRole := flag.String("floor-role", "", "internal: a process of the round floor (client or peer)")
	floorTxns := flag.Float64("floor-txns", 900, "internal: the round floor's transactions per second")
	floorRows := flag.String("floor-rows", "1-10", "internal: the round floor's rows per transaction, N-M")
	floorD := flag.Duration("floor-d", 15*time.Second, "internal: the round floor's measuring time")
	flag.Parse()
	if *floorRole != "" {
		floorMain(*floorRole, *floorTxns, *floorRows, *floorD)
		return
	}
	b.run = time.Now().UTC().Format("20060102150405")
	b.table = "bench_outbox_" + b.run
	var err error
	if b.dir, err = os.MkdirTemp("", "cdc-bench"); err != nil {
		fail(err)
	}
	ctx := context.Background()
	start := time.Now()
	if *only == "live-cost" {
		lo, hi := 1, 10
		if *costRows > 0 {
			lo, hi = *costRows, *costRows
		}
		b.liveCost(ctx, 5000, lo, hi, 15*time.Second, *costProfile)
		b.floor(5000, lo, hi, 15*time.Second)
		fmt.Print(b.render(time.Since(start)))
		b.cleanup(ctx)
		return
	}
	if *only == "live-rss" {
		b.liveCost(ctx, 5000, 1, 10, 15*time.Second, *costProfile)
		fmt.Print(b.render(time.Since(start)))
		b.cleanup(ctx)
		return
	}
	if *only == "audit-cost" {
		b.liveCost(ctx, 5000, 1, 10, 15*time.Second, "")
		b.audit = true
		b.liveCost(ctx, 5000, 1, 10, 15*time.Second, "")
		fmt.Print(b.render(time.Since(start)))
		b.cleanup(ctx)
		return
	}
	if *frFrom != "" {
		md, err := os.ReadFile(*frFrom)
		fail(err)
		fail(frontierSVG(b.svg, plotPointsFrom(string(md))))
		return
	}
	if *only == "frontier" {
		cases, err := parseCases(*frCases)
		fail(err)
		var rates []int
		for _, f := range strings.Split(*frRates, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(f))
			fail(err)
			rates = append(rates, r)
		}
		var deliveries []string
		for _, f := range strings.Split(*frDeliveries, ",") {
			switch f = strings.TrimSpace(f); f {
			case "at-least-once":
				deliveries = append(deliveries, "")
			case "exactly-once":
				deliveries = append(deliveries, f)
			default:
				fail(fmt.Errorf("-frontier-deliveries: %q: want at-least-once or exactly-once", f))
			}
		}
		b.frontier(ctx, cases, rates, deliveries, *frRounds, *frD)
		b.write(*out, time.Since(start), ctx)
		return
	}
	if *only == "recovery" {
		b.recovery(ctx)
		fmt.Print(b.render(time.Since(start)))
		b.cleanup(ctx)
		return
	}
	fail(b.setup())
	from, to := b.backlog()
	b.throughput(ctx, from, to)
	if b.profile != "" {
		fmt.Print(b.render(time.Since(start)))
		b.cleanup(ctx)
		return
	}
	if b.drainOnly {
		b.write(*out, time.Since(start), ctx)
		return
	}
	b.latency(ctx, 1000, 10*time.Second)
	b.latency(ctx, 5000, 10*time.Second)
	b.delivery = "exactly-once"
	b.latency(ctx, 5000, 10*time.Second)
	b.delivery = ""
	b.latency(ctx, 0, 10*time.Second)
	b.liveCost(ctx, 5000, 1, 10, 15*time.Second, "")
	b.liveCost(ctx, 5000, 100, 100, 15*time.Second, "")
	b.audit = true
	b.liveCost(ctx, 5000, 1, 10, 15*time.Second, "")
	b.audit = false
	b.floor(5000, 1, 10, 15*time.Second)
	b.frontier(ctx, []frontierCase{{"default", b.bin, "", readerKgo}, {"20ms", b.bin, "20ms", readerKgo}, {"100ms", b.bin, "100ms", readerKgo}}, []int{1000, 5000, 20000}, []string{"", "exactly-once"}, 1, 10*time.Second)
	b.recovery(ctx)
	b.dispatcher(ctx)
	b.write(*out, time.Since(start), ctx)
}

// write prints the table, cleans up, and appends the table to out ("":
// nowhere).
func (b *bench) write(out string, total time.Duration, ctx context.Context) {
	table := b.render(total)
	fmt.Print(table)
	b.cleanup(ctx)
	if out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		fail(err)
		_, err = f.WriteString(table)
		fail(err)
		fail(f.Close())
	}
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func (b *bench) add(name, value, note string) {
	fmt.Fprintf(os.Stderr, "bench: %-55s %s %s\n", name, value, note)
	b.results = append(b.results, row{name, value, note})
}

func sqlConn() *client.Conn {
	c, err := client.Connect(mysqlAddr, mysqlUser, mysqlPass, mysqlDB)
	fail(err)
	return c
}

// setup creates the outbox table from the schema file of the server's
// kind (schema/mysql.sql for MySQL, schema/mariadb.sql otherwise) and
// names the server for the table.
func (b *bench) setup() error {
	c := sqlConn()
	defer c.Close()
	r, err := c.Execute("SELECT VERSION(), @@version_comment")
	if err != nil {
		return err
	}
	ver, _ := r.GetString(0, 0)
	comment, _ := r.GetString(0, 1)
	schema := "schema/mariadb.sql"
	if strings.Contains(strings.ToLower(ver+comment), "mariadb") {
		b.server = "MariaDB " + strings.SplitN(ver, "-", 2)[0]
	} else {
		b.server, schema = "MySQL "+strings.SplitN(ver, "-", 2)[0], "schema/mysql.sql"
	}
	ddl, err := os.ReadFile(schema)
	if err != nil {
		return err
	}
	var lines []string
	for _, l := range strings.Split(string(ddl), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	for _, stmt := range strings.Split(strings.Join(lines, "\n"), ";") {
		if strings.Contains(stmt, "CREATE TABLE IF NOT EXISTS im_event_outbox") {
			if _, err := c.Execute(strings.Replace(stmt, "im_event_outbox", b.table, 1)); err != nil {
				return err
			}
		}
	}
	return nil
}

// cleanup deletes what this run created: its topics (several GB of
// records), its tables and its Redis checkpoints. Its binlog files stay,
// like any other writes (binlog_expire_logs_seconds on the dev stack).
func (b *bench) cleanup(ctx context.Context) {
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: time.Minute}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
	if err == nil {
		var topics []string
		for _, t := range md.Topics {
			if strings.HasPrefix(t.Name, "bench.") && strings.Contains(t.Name, b.run) {
				topics = append(topics, t.Name)
			}
		}
		if len(topics) > 0 {
			_, err = cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics})
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: cleanup: delete topics:", err)
	}
	c := sqlConn()
	defer c.Close()
	r, err := c.Execute("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?", "bench\\_%"+b.run)
	if err == nil {
		for i := range r.RowNumber() {
			name, _ := r.GetString(i, 0)
			if _, err := c.Execute("DROP TABLE `" + name + "`"); err != nil {
				fmt.Fprintln(os.Stderr, "bench: cleanup:", err)
			}
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	if keys, err := rdb.Keys(ctx, "cdc-outbox:bench:*"+b.run+"*").Result(); err == nil && len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
	if os.Getenv("BENCH_KEEP") == "" {
		_ = os.RemoveAll(b.dir)
	}
}

// createTopic creates a topic whose record timestamps are the broker's
// append time (message.timestamp.type=LogAppendTime), so a record's
// timestamp is when the broker acknowledged it.
func createTopic(name string) {
	conn, err := kafka.Dial("tcp", brokers[0])
	fail(err)
	defer conn.Close()
	ctrl, err := conn.Controller()
	fail(err)
	cc, err := kafka.Dial("tcp", fmt.Sprintf("%s:%d", ctrl.Host, ctrl.Port))
	fail(err)
	defer cc.Close()
	fail(cc.CreateTopics(kafka.TopicConfig{Topic: name, NumPartitions: 6, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "message.timestamp.type", ConfigValue: "LogAppendTime"}}}))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ids, err := sink.Partitions(context.Background(), sink.Config{Brokers: brokers}, name); err == nil && len(ids) == 6 {
			return
		}
	}
	fail(fmt.Errorf("topic %s not visible", name))
}

// masterPos returns the end of the binlog (SHOW BINARY LOG STATUS, or
// SHOW MASTER STATUS on servers without it).
func masterPos() binlog.Position {
	c := sqlConn()
	defer c.Close()
	p, err := binlog.LatestOn(c.Execute, "")
	fail(err)
	return binlog.Position{File: p.File, Pos: p.Pos}
}

// backlog writes rows outbox rows in transactions of 1,000 while no
// publisher runs, and returns the binlog range holding them.
func (b *bench) backlog() (binlog.Position, binlog.Position) {
	w, err := workload.Open(mysqlAddr, mysqlUser, mysqlPass, mysqlDB, b.table, "")
	fail(err)
	defer w.Close()
	from := masterPos()
	seq := make([]int64, b.convs+1)
	rng := rand.New(rand.NewPCG(1, 2))
	began := time.Now()
	for n := 0; n < b.rows; {
		txn := make([]workload.Row, min(1000, b.rows-n))
		for i := range txn {
			c := int64(1 + rng.IntN(b.convs))
			seq[c]++
			txn[i] = workload.Row{ConversationID: c, SeqNo: seq[c], SenderID: 1, ReceiverID: 2, Payload: workload.Payload(c, seq[c], b.payload)}
		}
		fail(w.Txn(txn, false))
		n += len(txn)
	}
	to := masterPos()
	d := time.Since(began)
	b.add(fmt.Sprintf("backlog written (%s insert rate, for scale)", b.server), fmt.Sprintf("%.0f rows/s", float64(b.rows)/d.Seconds()),
		fmt.Sprintf("%d rows, %d conversations, %d B payloads, %s", b.rows, b.convs, b.payload, d.Round(time.Millisecond)))
	return from, to
}

func nopLog() *zap.Logger { return zap.NewNop() }

func srcConfig(table string) binlog.Config {
	c := binlog.DefaultConfig()
	c.Addr, c.User, c.Password, c.Schema, c.Table = mysqlAddr, mysqlUser, mysqlPass, mysqlDB, table
	c.ServerID = 7900 + uint32(rand.IntN(90))
	return c
}

// rawBinlog: read and decode the backlog's binlog range, no sink.
// trial is one measurement of a throughput: events per second, and for
// a drain the process's CPU time and peak RSS.
type trial struct {
	rate float64
	d    time.Duration
	cpu  time.Duration
	rss  int64
	lag  time.Duration // drain: last acknowledgement → checkpoint at the end seen
	mcpu time.Duration // CPU time of every process on the machine during the trial
	bcpu time.Duration // drain: CPU time of the stack's broker during the trial
}

// machineCPU returns the CPU time every process on the machine has used
// so far (/proc/stat: all but idle and iowait; USER_HZ = 100).
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	fail(err)
	line, _, _ := strings.Cut(string(b), "\n")
	var busy int64
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return time.Duration(busy) * time.Second / 100
}

// throughput measures the two raw limits and the drain b.repeat times,
// alternated (raw binlog, raw Kafka, drain, raw binlog, ...), so that a
// slow spell of the shared machine hits all three alike, and reports the
// median trial of each with the range.
func (b *bench) throughput(ctx context.Context, from, to binlog.Position) {
	var dec, prod, drain, eos []trial
	for i := range max(b.repeat, 1) {
		dec = append(dec, b.rawBinlog(ctx, from, to))
		prod = append(prod, b.rawKafka(ctx, i))
		drain = append(drain, b.drain(from, to, i))
		b.delivery = "exactly-once"
		eos = append(eos, b.drain(from, to, 100+i))
		b.delivery = ""
		fmt.Fprintf(os.Stderr, "bench: trial %d: decode %.0f/s, produce %.0f/s, drain %.0f/s, exactly-once drain %.0f/s\n", i+1, dec[i].rate, prod[i].rate, drain[i].rate, eos[i].rate)
	}
	defer func() {
		e, r := median(eos), median(drain)
		b.add("drain, kafka.delivery: exactly-once", fmt.Sprintf("%.0f events/s (%.0f %% of the at-least-once drain)", e.rate, 100*e.rate/r.rate),
			fmt.Sprintf("Kafka transactions spanning rounds (kafka.transaction-interval; up to 5 rounds in flight); %.3f CPU s per 10,000 events, the broker %.3f s; median of %d trials, each after the at-least-once drain; target ≥ 70 %%",
				e.cpu.Seconds()/float64(b.rows)*10000, e.bcpu.Seconds()/float64(b.rows)*10000, len(eos)))
	}()
	spread := func(ts []trial) string {
		lo, hi := ts[0].rate, ts[0].rate
		for _, t := range ts {
			lo, hi = min(lo, t.rate), max(hi, t.rate)
		}
		return fmt.Sprintf("median of %d trials (%.0f–%.0f)", len(ts), lo, hi)
	}
	d, p, r := median(dec), median(prod), median(drain)
	b.add("raw limit: binlog read + decode, no sink", fmt.Sprintf("%.0f events/s", d.rate), fmt.Sprintf("%d events in %s; %s", b.rows, d.d.Round(time.Millisecond), spread(dec)))
	b.add("raw limit: Kafka produce via sink.Writer, no binlog", fmt.Sprintf("%.0f events/s", p.rate), fmt.Sprintf("acks=all, %s; %s", p.d.Round(time.Millisecond), spread(prod)))
	b.add("drain: backlog published and checkpointed", fmt.Sprintf("%.0f events/s", r.rate),
		fmt.Sprintf("%d events in %s, from process start to the last record's append (acknowledgement) time; the checkpoint reached the end %s later; %s",
			b.rows, r.d.Round(time.Millisecond), r.lag.Round(time.Millisecond), spread(drain)))
	per10k := func(t trial) float64 { return t.mcpu.Seconds() / float64(b.rows) * 10000 }
	b.add(fmt.Sprintf("machine CPU per 10,000 events (every process: publisher or bench, %s, Kafka, Redis)", b.server),
		fmt.Sprintf("decode %.3f s, produce %.3f s, drain %.3f s", per10k(d), per10k(p), per10k(r)),
		"/proc/stat, the median trials; the drain does both halves' work")
	cores := float64(runtime.NumCPU())
	ceiling := cores / ((per10k(d) + per10k(p)) / 10000)
	b.add("drain: CPU-bound ceiling on this machine", fmt.Sprintf("%.0f events/s", ceiling),
		fmt.Sprintf("%.0f cores / (decode + produce CPU per event); the drain reached %.0f %% of it, the produce limit is %.0f %% of it",
			cores, 100*r.rate/ceiling, 100*p.rate/ceiling))
	var each []string
	for i := range drain {
		each = append(each, fmt.Sprintf("%.0f %%", 100*drain[i].rate/min(dec[i].rate, prod[i].rate)))
	}
	b.add("drain: share of the slower raw limit", fmt.Sprintf("%.0f %%", 100*r.rate/min(d.rate, p.rate)),
		fmt.Sprintf("medians above; each trial against the raw limits measured just before it: %s; target ≥ 80 %%", strings.Join(each, ", ")))
	b.add("drain: CPU per 10,000 events", fmt.Sprintf("%.3f s", r.cpu.Seconds()/float64(b.rows)*10000), fmt.Sprintf("%.1f CPU s in all (median trial)", r.cpu.Seconds()))
	b.add("drain: broker CPU per 10,000 events", fmt.Sprintf("%.3f s", r.bcpu.Seconds()/float64(b.rows)*10000),
		fmt.Sprintf("the stack's broker process (/proc of the pid in CDC_STACK_DIR/kafka/kafka.pid) over the median trial, %.1f CPU s in all", r.bcpu.Seconds()))
	var rss int64
	for _, t := range drain {
		rss = max(rss, t.rss)
	}
	b.add("drain: peak RSS", fmt.Sprintf("%.1f MB", float64(rss)/(1<<20)), "VmHWM, highest of the trials")
}

func median(ts []trial) trial {
	s := slices.Clone(ts)
	slices.SortFunc(s, func(a, b trial) int { return cmp.Compare(a.rate, b.rate) })
	return s[len(s)/2]
}

// rawBinlog: binlog.Reader over the backlog's range, no sink.
func (b *bench) rawBinlog(ctx context.Context, from, to binlog.Position) trial {
	cfg := srcConfig(b.table)
	srv, err := binlog.Connect(ctx, cfg, nopLog())
	fail(err)
	cols, err := srv.Columns()
	fail(err)
	flavor := srv.Flavor()
	srv.Close()
	r := binlog.NewReader(cfg, flavor, cols, from, nopLog())
	fail(r.StopAt(to))
	m0 := machineCPU()
	began := time.Now()
	var g errgroup.Group
	g.Go(func() error { return r.Run(ctx) })
	n := 0
	for t := range r.Txns() {
		n += len(t.Events)
	}
	fail(g.Wait())
	d := time.Since(began)
	return trial{rate: float64(n) / d.Seconds(), d: d, mcpu: machineCPU() - m0}
}

// rawKafka: produce the same number of records through sink.Writer
// (acks=all, same rounds), no binlog.
func (b *bench) rawKafka(ctx context.Context, i int) trial {
	topic := fmt.Sprintf("bench.raw.%s.%d", b.run, i)
	createTopic(topic)
	cfg := sink.DefaultConfig()
	cfg.Brokers = brokers
	w := sink.NewWriter(cfg, router.New(router.Config{Topic: topic}, router.Reserved{}), router.Balancer(), nopLog())
	in := make(chan binlog.Txn, 64)
	var g errgroup.Group
	defer func() { _ = g.Wait() }()
	g.Go(func() error {
		defer close(in)
		payload := workload.Payload(1, 1, b.payload)
		id := uint64(0)
		for n := 0; n < b.rows; n += 1000 {
			evs := make([]binlog.Event, min(1000, b.rows-n))
			for i := range evs {
				id++
				evs[i] = binlog.Event{ID: id, EventType: "message.created", ConversationID: int64(id % uint64(b.convs)), SeqNo: int64(id), Payload: payload,
					CreatedAt: "2026-11-29 00:00:00", Pos: binlog.Position{File: "f.000001", Pos: uint32(id)}}
			}
			in <- binlog.Txn{Events: evs, End: binlog.Position{File: "f.000001", Pos: uint32(id)}}
		}
		return nil
	})
	g.Go(func() error {
		for range w.Acks() {
		}
		return nil
	})
	m0 := machineCPU()
	began := time.Now()
	fail(w.Run(ctx, in))
	d := time.Since(began)
	return trial{rate: float64(b.rows) / d.Seconds(), d: d, mcpu: machineCPU() - m0}
}

type proc struct {
	cmd *exec.Cmd
	log string
}

func (b *bench) config(table, topic, key string) string {
	ha := "ha: {instance-file: %q}"
	if b.audit {
		// In run, the audit needs ha off (docs/verify-and-audit.md).
		ha = "audit: {enabled: true, lag: 2s, interval: 1s}\nha: {enabled: false, instance-file: %q}"
	}
	cfg := fmt.Sprintf(`source: {addr: %q, user: %q, password: %q, server-id: %d, schema: %q, table: %q, heartbeat-period: 1s, read-timeout: 5s}
router: {topic: %q}
kafka: {brokers: [%s], delivery: %s}
checkpoint: {addr: %q, key: %q, interval: 200ms}
`+ha+`
log: {format: json, level: info}
retry-backoff-max: 2s
metrics-addr: ""
`, mysqlAddr, mysqlUser, mysqlPass, 7800+rand.IntN(90), mysqlDB, table, topic, strings.Join(brokers, ","), cmp.Or(b.delivery, "at-least-once"), redisAddr, key,
		// As deployed (the Kubernetes manifests' emptyDir): a restart after
		// SIGKILL takes its dead predecessor's lease at once, not after
		// the lease TTL (the recovery row measured the TTL without it).
		filepath.Join(b.dir, key[strings.LastIndexByte(key, ':')+1:]+".instance"))
	if b.extra != "" {
		if strings.Contains(b.extra, "metrics-addr:") {
			cfg = strings.Replace(cfg, "metrics-addr: \"\"\n", "", 1)
		}
		cfg += b.extra
	}
	path := filepath.Join(b.dir, key[strings.LastIndexByte(key, ':')+1:]+".yaml")
	fail(os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

func (b *bench) start(cfgPath string, args ...string) *proc {
	log := filepath.Join(b.dir, fmt.Sprintf("pub-%d.log", time.Now().UnixNano()))
	f, err := os.Create(log)
	fail(err)
	cmd := exec.Command(b.bin, append([]string{"run", "--config", cfgPath}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	fail(cmd.Start())
	return &proc{cmd: cmd, log: log}
}

func (p *proc) waitLog(msg string) time.Time {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(p.log); strings.Contains(string(b), msg) {
			return time.Now()
		}
	}
	b, _ := os.ReadFile(p.log)
	fail(fmt.Errorf("publisher did not log %q:\n%s", msg, b))
	return time.Time{}
}

// cpuAndRSS returns the process's CPU time (user+system) and peak RSS.
func (p *proc) cpuAndRSS() (time.Duration, int64) {
	cpu := p.cpu()
	status, _ := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	defer status.Close()
	sc := bufio.NewScanner(status)
	var rss int64
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	return cpu, rss
}

// memory is a process's resident memory from /proc/pid/status, bytes:
// rss (VmRSS) now, hwm (VmHWM) its peak so far, anon and file the
// anonymous and file-backed parts of rss (RssAnon, RssFile: the binary's
// pages the process touched are file-backed).
type memory struct{ rss, hwm, anon, file int64 }

func (p *proc) memory() memory {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	var m memory
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			m.rss = kb << 10
		case "VmHWM":
			m.hwm = kb << 10
		case "RssAnon":
			m.anon = kb << 10
		case "RssFile":
			m.file = kb << 10
		}
	}
	return m
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

func checkpointPos(rdb *redis.Client, key string) binlog.Position {
	s, err := rdb.Get(context.Background(), key).Result()
	if err != nil {
		return binlog.Position{}
	}
	var cp struct {
		File string `json:"file"`
		Pos  uint32 `json:"pos"`
	}
	_ = json.Unmarshal([]byte(s), &cp)
	return binlog.Position{File: cp.File, Pos: cp.Pos}
}

// drain: the publisher starts with the backlog in the binlog; time until
// the checkpoint reaches its end (every record acknowledged).
func (b *bench) drain(from, to binlog.Position, i int) trial {
	topic := fmt.Sprintf("bench.drain.%s.%d", b.run, i)
	createTopic(topic)
	key := fmt.Sprintf("cdc-outbox:bench:drain:%s:%d", b.run, i)
	args := []string{"--start", from.FilePos()}
	profile := b.profile != "" && i == 0
	if profile {
		args = append(args, "--pprof", "127.0.0.1:6061")
	}
	m0, b0 := machineCPU(), brokerCPU()
	p := b.start(b.config(b.table, topic, key), args...)
	began := time.Now()
	var prof errgroup.Group
	defer func() { _ = prof.Wait() }()
	if profile {
		prof.Go(func() error {
			// 3 s from 0.3 s in: inside a drain of 500,000 rows or more
			// here (the profile is lost when the publisher stops first).
			time.Sleep(300 * time.Millisecond)
			out, err := exec.Command("curl", "-sf", "-o", b.profile, "http://127.0.0.1:6061/debug/pprof/profile?seconds=3").CombinedOutput()
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench: profile:", err, string(out))
			}
			return nil
		})
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	for binlog.ComparePos(checkpointPos(rdb, key), to) < 0 {
		if time.Since(began) > 10*time.Minute {
			fail(fmt.Errorf("drain did not finish"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cpDone := time.Now()
	mcpu, bcpu := machineCPU()-m0, brokerCPU()-b0
	cpu, rss := p.cpuAndRSS()
	p.stop()
	// The drain ends with the last acknowledgement: the broker's append
	// time of the newest record (LogAppendTime, ms; one replica, so the
	// append is the acknowledgement), as the raw produce limit ends when
	// its last round is acknowledged. The checkpoint, which follows within
	// checkpoint.interval (200 ms here), is reported apart.
	last, n := lastAppend(context.Background(), topic, b.delivery == "")
	if n < int64(b.rows) {
		fail(fmt.Errorf("drain: topic %s holds %d records, want at least %d", topic, n, b.rows))
	}
	d := last.Sub(began)
	if b.delivery != "" {
		// Transaction markers end each partition's log: the checkpoint
		// (written after the commit, within checkpoint.interval) ends the
		// drain, a little later than the last append.
		d, last = cpDone.Sub(began), cpDone
	}
	return trial{rate: float64(b.rows) / d.Seconds(), d: d, cpu: cpu, rss: rss, lag: cpDone.Sub(last), mcpu: mcpu, bcpu: bcpu}
}

// lastAppend returns the broker's append time of topic's newest record
// (when times is set) and the number of offsets in the topic.
func lastAppend(ctx context.Context, topic string, times bool) (time.Time, int64) {
	ids, err := sink.Partitions(ctx, sink.Config{Brokers: brokers}, topic)
	fail(err)
	var newest time.Time
	var n int64
	for _, p := range ids {
		conn, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, p)
		fail(err)
		first, last, err := conn.ReadOffsets()
		fail(err)
		n += last - first
		if last > 0 && times {
			_, err = conn.Seek(last-1, kafka.SeekAbsolute)
			fail(err)
			batch := conn.ReadBatch(1, 1<<20)
			m, err := batch.ReadMessage()
			fail(err)
			if m.Time.After(newest) {
				newest = m.Time
			}
			batch.Close()
		}
		conn.Close()
	}
	return newest, n
}

// liveWorkload writes rows at rate rows/s (0: as fast as MariaDB takes
// them) for d, each payload carrying its commit-side timestamp in µs.
func liveWorkload(table string, rate int, d time.Duration, convs int) int {
	batch := 1
	if rate == 0 || rate > 2000 {
		batch = 10
	}
	return liveWorkloadTxns(table, rate, d, convs, func() int { return batch })
}

// liveWorkloadTxns is liveWorkload with transactions of size() rows.
func liveWorkloadTxns(table string, rate int, d time.Duration, convs int, size func() int) int {
	w, err := workload.Open(mysqlAddr, mysqlUser, mysqlPass, mysqlDB, table, "")
	fail(err)
	defer w.Close()
	seq := map[int64]int64{}
	began := time.Now()
	n := 0
	for time.Since(began) < d {
		batch := size()
		rows := make([]workload.Row, batch)
		for i := range rows {
			c := int64(1 + rand.IntN(convs))
			seq[c]++
			rows[i] = workload.Row{ConversationID: c, SeqNo: seq[c], SenderID: 1, ReceiverID: 2,
				Payload: []byte(fmt.Sprintf(`{"ts_us":%d,"text":"%s"}`, time.Now().UnixMicro(), strings.Repeat("x", 400)))}
		}
		fail(w.Txn(rows, false))
		n += batch
		if rate > 0 {
			if ahead := time.Duration(float64(n)/float64(rate)*float64(time.Second)) - time.Since(began); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	return n
}

// latencies reads a topic and returns, per record, broker append time
// minus the µs timestamp written in the row before COMMIT.
func latencies(ctx context.Context, topic string, want int) []time.Duration {
	var out []time.Duration
	ids, err := sink.Partitions(ctx, sink.Config{Brokers: brokers}, topic)
	fail(err)
	deadline := time.Now().Add(2 * time.Minute)
	next := map[int]int64{}
	for len(out) < want && time.Now().Before(deadline) {
		for _, p := range ids {
			conn, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, p)
			fail(err)
			last, _ := conn.ReadLastOffset()
			if next[p] < last {
				_, _ = conn.Seek(next[p], kafka.SeekAbsolute)
				batch := conn.ReadBatch(1, 64<<20)
				for {
					m, err := batch.ReadMessage()
					if err != nil {
						break
					}
					next[p] = m.Offset + 1
					var v struct {
						TS int64 `json:"ts_us"`
					}
					if json.Unmarshal(m.Value, &v) == nil && v.TS > 0 {
						out = append(out, m.Time.Sub(time.UnixMicro(v.TS)))
					}
					if m.Offset >= last-1 {
						break
					}
				}
				batch.Close()
			}
			conn.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func (b *bench) latency(ctx context.Context, rate int, d time.Duration) {
	tag := strconv.Itoa(rate)
	if b.delivery != "" {
		tag += "e" // the exactly-once run's own table, topic and key
	}
	table := fmt.Sprintf("bench_live_%s_%s", tag, b.run)
	b.table2(table)
	topic := "bench.live." + tag + "." + b.run
	createTopic(topic)
	key := "cdc-outbox:bench:live" + tag + ":" + b.run
	p := b.start(b.config(table, topic, key), "--start", "latest")
	p.waitLog("streaming binlog")
	n := liveWorkload(table, rate, d, 1000)
	lat := latencies(ctx, topic, n)
	_, rss := p.cpuAndRSS()
	p.stop()
	slices.Sort(lat)
	name := fmt.Sprintf("live latency at %d events/s", rate)
	if b.delivery != "" {
		name += ", kafka.delivery: " + b.delivery
	}
	if rate == 0 {
		name = fmt.Sprintf("live latency at the most MariaDB sustains here (%.0f events/s)", float64(n)/d.Seconds())
	}
	b.add(name, fmt.Sprintf("p50 %s, p95 %s, p99 %s, max %s", ms(pct(lat, .5)), ms(pct(lat, .95)), ms(pct(lat, .99)), ms(pct(lat, 1))),
		fmt.Sprintf("%d events, commit → broker append (LogAppendTime); peak RSS %.1f MB", len(lat), float64(rss)/(1<<20)))
}

// serverLoad returns the source server's global counters of SELECT and
// UPDATE statements and of rows read by the handlers (SHOW GLOBAL STATUS:
// Com_select, Com_update, Handler_read_first/key/next/rnd_next), for the
// load a stage adds between two calls.
func serverLoad() map[string]int64 {
	c := sqlConn()
	defer c.Close()
	r, err := c.Execute("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select','Com_update','Handler_read_first','Handler_read_key','Handler_read_next','Handler_read_rnd_next')")
	fail(err)
	m := map[string]int64{}
	for i := 0; i < r.RowNumber(); i++ {
		k, _ := r.GetString(i, 0)
		v, _ := r.GetString(i, 1)
		m[k], _ = strconv.ParseInt(v, 10, 64)
	}
	return m
}

// rowsRead is the rows the handlers read between before and after
// (serverLoad).
func rowsRead(before, after map[string]int64) int64 {
	var n int64
	for _, k := range []string{"Handler_read_first", "Handler_read_key", "Handler_read_next", "Handler_read_rnd_next"} {
		n += after[k] - before[k]
	}
	return n
}

// liveCost: the publisher's CPU (cores: CPU seconds per second) and the
// commit → broker append latency while rate events/s arrive in
// transactions of minRows–maxRows rows (uniform): the cost per transaction
// and produce round, which a backlog drain does not show (issue 14 item 6;
// 100-row transactions are its reference: the per-event cost alone).
// With pprof set, a CPU profile of the publisher over the window is
// written there.
func (b *bench) liveCost(ctx context.Context, rate, minRows, maxRows int, d time.Duration, pprof string) {
	table := fmt.Sprintf("bench_cost_%d_%d_%s", rate, maxRows, b.run)
	b.table2(table)
	topic := "bench.cost." + strconv.Itoa(rate) + "." + strconv.Itoa(maxRows) + "." + b.run
	createTopic(topic)
	key := "cdc-outbox:bench:cost" + strconv.Itoa(rate) + ":" + strconv.Itoa(maxRows) + ":" + b.run
	var args []string
	heap := b.heap != "" && !b.audit
	if pprof != "" || heap {
		args = append(args, "--pprof", "127.0.0.1:6062")
	}
	p := b.start(b.config(table, topic, key), append(args, "--start", "latest")...)
	p.waitLog("streaming binlog")
	cpu0, _ := p.cpuAndRSS()
	load0 := serverLoad()
	t0 := time.Now()
	var prof errgroup.Group
	if pprof != "" {
		secs := int(d.Seconds()) - 1
		prof.Go(func() error {
			out, err := exec.Command("curl", "-s", "-o", pprof, fmt.Sprintf("http://127.0.0.1:6062/debug/pprof/profile?seconds=%d", secs)).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}
	n := liveWorkloadTxns(table, rate, d, 1000, func() int { return minRows + rand.IntN(maxRows-minRows+1) })
	// The resident memory at the window's end, while live (VmHWM also
	// holds the start-up's peak).
	mem := p.memory()
	lat := latencies(ctx, topic, n)
	cpu1, rss := p.cpuAndRSS()
	wall := time.Since(t0)
	load1 := serverLoad()
	if heap { // after the CPU is read: the profile's own CPU is not the window's
		for file, path := range map[string]string{b.heap + ".heap": "heap", b.heap + ".txt": "heap?debug=1"} {
			if out, err := exec.Command("curl", "-sf", "-o", file, "http://127.0.0.1:6062/debug/pprof/"+path).CombinedOutput(); err != nil {
				fmt.Fprintln(os.Stderr, "bench: heap profile:", err, string(out))
			}
		}
	}
	if err := prof.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: profile:", err)
	}
	p.stop()
	slices.Sort(lat)
	cores := float64(cpu1-cpu0) / float64(wall)
	shape := fmt.Sprintf("%d–%d-row", minRows, maxRows)
	if minRows == maxRows {
		shape = fmt.Sprintf("%d-row", maxRows)
	}
	name := fmt.Sprintf("live cost at %d events/s in %s transactions", rate, shape)
	if b.audit {
		name += fmt.Sprintf(", with the audit in run (%s)", auditRead(key, wall))
	}
	b.add(name,
		fmt.Sprintf("%.3f cores (%.1f µs CPU per event); p50 %s, p99 %s", cores, float64(cpu1-cpu0)/float64(time.Microsecond)/float64(n), ms(pct(lat, .5)), ms(pct(lat, .99))),
		fmt.Sprintf("%d events over %.1f s incl. the read-back; publisher CPU (user+system) from /proc; peak RSS %.1f MB; the database meanwhile (every client: the bench's writes too) %.0f SELECT/s, %.0f rows read/s (Handler_read_*); target ≤ 0.05 cores, p99 ≤ 5 ms",
			n, wall.Seconds(), float64(rss)/(1<<20), float64(load1["Com_select"]-load0["Com_select"])/wall.Seconds(), float64(rowsRead(load0, load1))/wall.Seconds()))
	if !b.audit && minRows == 1 {
		b.add(fmt.Sprintf("live RSS at %d events/s in %s transactions", rate, shape),
			fmt.Sprintf("%s (VmRSS at the window's end), peak %s (VmHWM)", mb(mem.rss), mb(mem.hwm)),
			fmt.Sprintf("anonymous %s, file-backed %s (the binary's pages); /proc/pid/status; target VmRSS ≤ 32 MB", mb(mem.anon), mb(mem.file)))
	}
}

// auditRead says what the audit of checkpoint key read: the events it
// audited (its state beside the checkpoint), per second of wall.
func auditRead(key string, wall time.Duration) string {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	b, err := rdb.Get(context.Background(), checkpoint.AuditKey(key)).Bytes()
	if err != nil {
		return "no audit state: " + err.Error()
	}
	st, err := audit.ParseState(checkpoint.AuditKey(key), b)
	if err != nil {
		return err.Error()
	}
	var ok, bad int64
	for _, t := range st.Totals {
		for r, n := range t {
			if r == audit.OK {
				ok += n
			} else if r != audit.Duplicate {
				bad += n
			}
		}
	}
	return fmt.Sprintf("%d events audited, %.0f rows/s; %d problems", ok, float64(ok)/wall.Seconds(), bad)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func (b *bench) table2(name string) {
	saved := b.table
	b.table = name
	fail(b.setup())
	b.table = saved
}

// recovery: SIGKILL under load, restart, time until a record appended
// after the restart.
func (b *bench) recovery(ctx context.Context) {
	table := "bench_recovery_" + b.run
	b.table2(table)
	topic := "bench.recovery." + b.run
	createTopic(topic)
	key := "cdc-outbox:bench:recovery:" + b.run
	cfg := b.config(table, topic, key)
	p := b.start(cfg, "--start", "latest")
	p.waitLog("streaming binlog")
	stop := make(chan struct{})
	var load errgroup.Group
	defer func() { _ = load.Wait() }()
	load.Go(func() error {
		for {
			select {
			case <-stop:
				return nil
			default:
				liveWorkload(table, 1000, 200*time.Millisecond, 100)
			}
		}
	})
	time.Sleep(2 * time.Second)
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	restart := time.Now()
	p = b.start(cfg)
	var first time.Duration
	for deadline := time.Now().Add(time.Minute); first == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		first = newestAfter(ctx, topic, restart)
	}
	close(stop)
	p.stop()
	b.add("recovery: SIGKILL → restart → first new acknowledged record", ms(first), "under 1,000 events/s; includes process start and server_id re-check")
}

// newestAfter returns how long after t the first record appended after t
// was appended, or 0 when none yet.
func newestAfter(ctx context.Context, topic string, t time.Time) time.Duration {
	ids, _ := sink.Partitions(ctx, sink.Config{Brokers: brokers}, topic)
	best := time.Duration(0)
	for _, p := range ids {
		conn, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, p)
		if err != nil {
			continue
		}
		last, _ := conn.ReadLastOffset()
		if last > 0 {
			_, _ = conn.Seek(last-1, kafka.SeekAbsolute)
			batch := conn.ReadBatch(1, 1<<20)
			if m, err := batch.ReadMessage(); err == nil && m.Time.After(t) {
				// the first after t: walk back is costly; the newest bounds it
				if d := m.Time.Sub(t); best == 0 || d < best {
					best = d
				}
			}
			batch.Close()
		}
		conn.Close()
	}
	return best
}

// dispatcher is the seeds' polling dispatcher: every 3 s, SELECT … FOR
// UPDATE SKIP LOCKED a batch of 100, publish, mark SENT.
func (b *bench) dispatcher(ctx context.Context) {
	table := "bench_poll_" + b.run
	b.table2(table)
	topic := "bench.poll." + b.run
	createTopic(topic)
	const backlog = 1000
	w, err := workload.Open(mysqlAddr, mysqlUser, mysqlPass, mysqlDB, table, "")
	fail(err)
	rows := make([]workload.Row, backlog)
	for i := range rows {
		rows[i] = workload.Row{ConversationID: int64(1 + i%100), SeqNo: int64(1 + i/100), SenderID: 1, ReceiverID: 2,
			Payload: []byte(fmt.Sprintf(`{"ts_us":%d,"text":"%s"}`, time.Now().UnixMicro(), strings.Repeat("x", 400)))}
	}
	fail(w.Txn(rows, false))
	w.Close()
	kw := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: router.Balancer(), RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer kw.Close()
	c := sqlConn()
	defer c.Close()
	before := serverLoad()
	began := time.Now()
	sent := 0
	for sent < backlog {
		_, err := c.Execute("BEGIN")
		fail(err)
		r, err := c.Execute(fmt.Sprintf("SELECT id, conversation_id, payload FROM `%s` WHERE (status IN ('PENDING','FAILED') AND next_retry_at <= NOW()) OR (status = 'SENDING' AND claimed_at < NOW() - INTERVAL 60 SECOND) ORDER BY next_retry_at ASC, id ASC LIMIT 100 FOR UPDATE SKIP LOCKED", table))
		fail(err)
		var ids []string
		var msgs []kafka.Message
		for i := 0; i < r.RowNumber(); i++ {
			id, _ := r.GetString(i, 0)
			conv, _ := r.GetString(i, 1)
			pl, _ := r.GetString(i, 2)
			ids = append(ids, id)
			msgs = append(msgs, kafka.Message{Key: []byte(conv), Value: []byte(pl)})
		}
		if len(msgs) > 0 {
			fail(kw.WriteMessages(ctx, msgs...))
			_, err = c.Execute(fmt.Sprintf("UPDATE `%s` SET status='SENT' WHERE id IN (%s)", table, strings.Join(ids, ",")))
			fail(err)
		}
		_, err = c.Execute("COMMIT")
		fail(err)
		sent += len(ids)
		if sent < backlog {
			time.Sleep(3 * time.Second) // fixed-delay-ms: 3000
		}
	}
	d := time.Since(began)
	after := serverLoad()
	lat := latencies(ctx, topic, backlog)
	slices.Sort(lat)
	b.add("polling dispatcher (seeds): drain", fmt.Sprintf("%.0f events/s", float64(backlog)/d.Seconds()), fmt.Sprintf("%d events in %s (batch 100 every 3 s)", backlog, d.Round(time.Millisecond)))
	b.add("polling dispatcher (seeds): commit → broker append for that backlog", fmt.Sprintf("p50 %s, max %s", ms(pct(lat, .5)), ms(pct(lat, 1))), "the backlog was committed at once")
	b.add("polling dispatcher (seeds): load on MariaDB per 1,000 events",
		fmt.Sprintf("%d SELECT, %d UPDATE, %d rows examined (Handler_read_*)", after["Com_select"]-before["Com_select"], after["Com_update"]-before["Com_update"],
			rowsRead(before, after)),
		"cdc-outbox: 0 queries (reads the binlog stream)")
}

func (b *bench) render(total time.Duration) string {
	host, _ := os.Hostname()
	var s strings.Builder
	only := ""
	if b.drainOnly {
		only = " -drain-only"
	}
	fmt.Fprintf(&s, "\n## Run %s (%s)\n\n", time.Now().UTC().Format(time.RFC3339), b.server)
	fmt.Fprintf(&s, "Command: `make bench` (`go run ./bench -rows %d -convs %d -payload %d%s`). Machine: %s, %d cores (GOMAXPROCS %d), %s; %s, Kafka, Redis and the publisher all on loopback. Total %s.\n\n",
		b.rows, b.convs, b.payload, only, host, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), b.server, total.Round(time.Second))
	s.WriteString("| measure | result | notes |\n|---|---|---|\n")
	for _, r := range b.results {
		fmt.Fprintf(&s, "| %s | %s | %s |\n", r.name, r.value, r.note)
	}
	return s.String()
}
