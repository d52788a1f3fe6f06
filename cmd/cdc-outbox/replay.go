package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

func replayCommand() *cobra.Command {
	var (
		path     string
		o        replayOptions
		serverID uint32
	)
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Re-publish the outbox events of a binlog range (never touches the checkpoint)",
		Long: `replay reads the binlog from --from to --to and publishes the outbox INSERTs
of that range again: to the topics router.topic gives them, or all to --topic.
Records are those of the live publisher (same key, value and headers, so the
same event_id for consumers to dedupe) plus replayed=true and replay_id (one
random UUID per replay run).

Positions: <file>:<pos> (a transaction boundary, e.g. the binlog_txn_end
header of a record), gtid:<set>, or an RFC 3339 time such as
2026-11-29T10:00:00Z. A time stands for the start of the first transaction
committed at or after it (binlog timestamps have a one-second resolution).
The range holds the transactions ending after --from and at or before --to;
without --to it ends at the end of the binlog when the replay starts (it
never waits for new transactions).

replay reads the binlog as a replica with its own server_id (--server-id,
default source.server-id + 1), so it runs beside the live publisher. It
never connects to Redis: the live checkpoint is untouched. Poison records
follow kafka.on-poison as for run.

With --binlog-files <dir or glob>, replay reads archived binlog files
instead (no server connection): --from defaults to the start of the first
file, --to to the end of the last; a <file>:<pos> must be a transaction
boundary of one of the files. Column names come from the binlog's table
maps (binlog_row_metadata=FULL) or from --schema-file / source.schema-file.
A last file that ends early (copied while the server wrote it) ends the
replay after its last complete transaction; the summary says where.

Progress (events/s, position, ETA) goes to stderr every --progress; the
summary (counts per topic, first and last position, transactions) to stdout.
--dry-run reads the range and prints the summary, publishing nothing.

Exit status: 0 done; 1 failed (write error, poison record under
kafka.on-poison: fail, lost connection, interrupted): the output names the
last acknowledged position to resume from with --from; 2 usage, invalid
range or connection error before anything was published.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			cfg.Source.Start = "" // not used here
			if o.files != "" && cfg.Source.User == "" {
				cfg.Source.User = "unused" // no connection: the source section only names the table
			}
			if err := cfg.Validate(); err != nil {
				return invalidConfig(err, os.Environ())
			}
			if o.fromArg == "" && o.files == "" {
				return errors.New(`required flag(s) "from" not set`)
			}
			if o.fromArg != "" {
				if o.from, err = parsePoint("--from", o.fromArg); err != nil {
					return err
				}
			}
			if o.toArg != "" {
				if o.to, err = parsePoint("--to", o.toArg); err != nil {
					return err
				}
			}
			if o.topic != "" {
				if err := router.ValidTopic(o.topic); err != nil {
					return fmt.Errorf("--topic %q: %w", o.topic, err)
				}
			}
			live := cfg.Source.ServerID
			if !cmd.Flags().Changed("server-id") {
				serverID = live + 1
			}
			if serverID == 0 || serverID == live {
				return fmt.Errorf("--server-id %d: want a replica server_id other than the live publisher's source.server-id %d", serverID, live)
			}
			cfg.Source.ServerID = serverID
			if o.progress <= 0 {
				return fmt.Errorf("--progress %s: want > 0", o.progress)
			}
			log, err := newLogger(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			o.out, o.errOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return replay(ctx, cfg, o, log)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file (source, router and kafka sections are used)")
	f.StringVar(&o.fromArg, "from", "", "start: <file>:<pos>, gtid:<set> or an RFC 3339 time (required)")
	f.StringVar(&o.toArg, "to", "", "end (included): <file>:<pos>, gtid:<set> or an RFC 3339 time; default: the binlog end at start")
	f.StringVar(&o.topic, "topic", "", "publish every record to this topic instead of the routed one")
	f.Uint32Var(&serverID, "server-id", 0, "replica server_id of the replay (default: source.server-id + 1)")
	f.BoolVar(&o.dryRun, "dry-run", false, "read the range and print what would be published; publish nothing")
	f.DurationVar(&o.progress, "progress", 5*time.Second, "interval of progress lines on stderr")
	f.StringVar(&o.files, "binlog-files", "", "read archived binlog files (a directory or a glob) instead of the server; --from defaults to the first file, --to to the end of the last")
	f.StringVar(&o.schemaFile, "schema-file", "", "with --binlog-files: a file with the outbox table's CREATE TABLE, for binlogs without column names (default: source.schema-file)")
	return cmd
}

type replayOptions struct {
	fromArg, toArg string
	from, to       point // to is zero when --to is not given
	topic          string
	dryRun         bool
	progress       time.Duration
	out, errOut    io.Writer
	files          string // --binlog-files: read these instead of the server
	schemaFile     string // --schema-file
}

// point is a parsed --from or --to: a time, or a file:pos or GTID start.
type point struct {
	start binlog.Start // StartFilePos or StartGTID; StartUnset for a time
	time  time.Time    // set for a time
}

func (p point) isZero() bool { return p.start.Kind == binlog.StartUnset && p.time.IsZero() }

// parsePoint parses a replay position: an RFC 3339 time (e.g.
// 2026-11-29T10:00:00Z or 2026-11-29T11:00:00+01:00; fractions of a second
// are dropped, binlog timestamps having a one-second resolution),
// <file>:<pos> or gtid:<set>. Errors wrap binlog.ErrStart.
func parsePoint(flag, s string) (point, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return point{}, fmt.Errorf("%w: %s: required: <file>:<pos>, gtid:<set> or an RFC 3339 time", binlog.ErrStart, flag)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return point{time: t.UTC().Truncate(time.Second)}, nil
	}
	if looksLikeDate(s) {
		// Looks like a date: say what a time must look like.
		return point{}, fmt.Errorf("%w: %s %q: a time must be RFC 3339 with a zone, e.g. 2026-11-29T10:00:00Z", binlog.ErrStart, flag, s)
	}
	st, err := binlog.ParseStart(s)
	if err != nil && strings.Contains(s, ":") {
		return point{}, fmt.Errorf("%s: %w", flag, err) // a malformed <file>:<pos> or gtid:<set>
	}
	if err != nil || st.Kind != binlog.StartFilePos && st.Kind != binlog.StartGTID {
		return point{}, fmt.Errorf("%w: %s %q: want <file>:<pos>, gtid:<set> or an RFC 3339 time", binlog.ErrStart, flag, s)
	}
	return point{start: st}, nil
}

// looksLikeDate reports whether s starts like an RFC 3339 date (YYYY-MM-DD).
func looksLikeDate(s string) bool {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for _, i := range []int{0, 1, 2, 3, 5, 6, 8, 9} {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// replayRouter routes like the configured router, then sends the record
// to topic when set, and adds the replay headers.
type replayRouter struct {
	inner *router.Router
	topic string // override; empty: as routed
	id    string // replay_id
}

func (r replayRouter) Topic(eventType string) (string, error) {
	if r.topic != "" {
		return r.topic, nil
	}
	return r.inner.Topic(eventType)
}

func (r replayRouter) Route(e *binlog.Event, end binlog.Position) (kafka.Message, error) {
	m, err := r.inner.Route(e, end)
	if r.topic != "" {
		m.Topic, err = r.topic, nil
	}
	m.Headers = append(m.Headers,
		kafka.Header{Key: router.HeaderReplayed, Value: []byte("true")},
		kafka.Header{Key: router.HeaderReplayID, Value: []byte(r.id)})
	return m, err
}

// newReplayID returns a random (version 4) UUID.
func newReplayID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// replayPlan is a resolved, checked range.
type replayPlan struct {
	from, to binlog.Position
	logs     []binlog.LogFile // SHOW BINARY LOGS at start, for the progress' ETA
	flavor   string
	columns  []string
	gtid     bool        // read by GTID set (--from gtid:<set>)
	files    *fileSource // --binlog-files; nil: read from the server
}

// replay resolves and checks the range (errors: exit 2), then reads and
// publishes it (errors: exit 1).
func replay(ctx context.Context, cfg Config, o replayOptions, log *zap.Logger) error {
	planner := planReplay
	if o.files != "" {
		planner = planFileReplay
	}
	plan, err := planner(ctx, cfg, o, log)
	if err != nil {
		return err
	}
	id := newReplayID()
	fmt.Fprintf(o.out, "replay %s: from %s to %s", id, describe(plan.from), describe(plan.to))
	if n := bytesBetween(plan.logs, plan.from, plan.to); n >= 0 {
		fmt.Fprintf(o.out, " (%d bytes of binlog)", n)
	}
	fmt.Fprintln(o.out)
	if plan.files != nil {
		fmt.Fprintf(o.out, "source: %s (no server connection)\n", plan.files.describeFiles())
	}
	if plan.from.File != "" && binlog.ComparePos(plan.from, plan.to) == 0 {
		fmt.Fprintln(o.out, "nothing to replay: the start is the end of the binlog")
		return nil
	}
	sum, err := runReplay(ctx, cfg, plan, o, id, log)
	sum.print(o.out)
	if plan.files != nil {
		plan.files.report(o.out)
	}
	if err != nil {
		resume := "the start of the range (nothing acknowledged)"
		if !sum.acked.IsZero() {
			resume = sum.acked.FilePos()
		}
		log.Error("replay failed", zap.Error(err))
		fmt.Fprintf(o.out, "result: FAILED: %v\nresume with --from %s\n", err, resume)
		return exitError{code: 1}
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(o.out, "result: INTERRUPTED; everything up to %s was published; resume with --from %s\n", sum.acked.FilePos(), sum.acked.FilePos())
		return exitError{code: 1}
	case o.dryRun:
		fmt.Fprintln(o.out, "result: dry run, nothing published")
	default:
		fmt.Fprintf(o.out, "result: published %d events (replayed=true, replay_id=%s)\n", sum.events, id)
	}
	return nil
}

// planReplay connects, checks the server and the replay's server_id like
// run does, resolves --from and --to and checks the range against what the
// server has.
func planReplay(ctx context.Context, cfg Config, o replayOptions, log *zap.Logger) (replayPlan, error) {
	var plan replayPlan
	srv, err := binlog.Connect(ctx, cfg.Source, log.Named("source"))
	if err != nil {
		return plan, err
	}
	defer srv.Close()
	if err := srv.Check(ctx); err != nil {
		return plan, err
	}
	plan.flavor = srv.Flavor()
	if plan.columns, err = srv.Columns(); err != nil {
		return plan, err
	}
	end, err := srv.Latest()
	if err != nil {
		return plan, err
	}
	if plan.logs, err = srv.BinaryLogSizes(); err != nil {
		return plan, err
	}
	resolve := func(flag string, p point) (binlog.Position, error) {
		if !p.time.IsZero() {
			pos, err := srv.PositionAt(ctx, p.time, plan.columns, end)
			if err != nil {
				return pos, fmt.Errorf("%s %s: %w", flag, p.time.Format(time.RFC3339), err)
			}
			log.Info("time resolved to a position", zap.String("flag", flag), zap.Time("time", p.time), zap.String("position", pos.FilePos()))
			return pos, nil
		}
		if p.start.Kind == binlog.StartFilePos {
			// On the server, and between two transactions.
			pos := binlog.Position{File: p.start.File, Pos: p.start.Pos}
			if err := srv.CheckPosition(pos); err != nil {
				return pos, fmt.Errorf("%s: %w", flag, err)
			}
			return pos, nil
		}
		pos, err := srv.Resolve(p.start)
		if err != nil {
			return pos, fmt.Errorf("%s: %w", flag, err)
		}
		return pos, nil
	}
	if plan.from, err = resolve("--from", o.from); err != nil {
		return plan, err
	}
	plan.to = end
	if !o.to.isZero() {
		if plan.to, err = resolve("--to", o.to); err != nil {
			return plan, err
		}
	}
	if err := binlog.CheckRange(plan.flavor, plan.from, plan.to, end); err != nil {
		if o.to.isZero() && plan.from.File != "" && binlog.ComparePos(plan.from, end) == 0 {
			return plan, nil // nothing to replay
		}
		return plan, fmt.Errorf("--from %s, --to %s: %w", describe(plan.from), describe(plan.to), err)
	}
	plan.gtid = plan.from.File == ""
	return plan, nil
}

func describe(p binlog.Position) string {
	if p.File == "" {
		return "gtid:" + p.GTIDSet
	}
	return p.FilePos()
}

// replaySummary counts what a replay read (and, unless dry, published:
// every counted event was acknowledged when the replay succeeds).
type replaySummary struct {
	txns, scanned, events int64
	perTopic              map[string]int64
	firstRow, firstEnd    string          // row and transaction-end positions of the first event
	lastRow, lastEnd      string          // and of the last
	acked                 binlog.Position // end of the last acknowledged transaction (dry run: read)
}

func (s *replaySummary) print(w io.Writer) {
	fmt.Fprintf(w, "transactions: %d with outbox rows (%d read)\n", s.txns, s.scanned)
	fmt.Fprintf(w, "events: %d\n", s.events)
	if s.events > 0 {
		fmt.Fprintf(w, "first: row at %s, transaction ending at %s\n", s.firstRow, s.firstEnd)
		fmt.Fprintf(w, "last: row at %s, transaction ending at %s\n", s.lastRow, s.lastEnd)
	}
	topics := make([]string, 0, len(s.perTopic))
	for t := range s.perTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		fmt.Fprintf(w, "topic %s: %d\n", t, s.perTopic[t])
	}
}

// runReplay runs reader → counter → writer (→ acknowledgements) under an
// errgroup. A signal stops the reader; what was read is then flushed.
func runReplay(ctx context.Context, cfg Config, plan replayPlan, o replayOptions, id string, log *zap.Logger) (*replaySummary, error) {
	sum := &replaySummary{perTopic: map[string]int64{}}
	src := cfg.Source
	if plan.gtid {
		src.PositionMode = binlog.ModeGTID
	}
	var reader interface {
		Run(context.Context) error
		Txns() <-chan binlog.Txn
	}
	if plan.files != nil {
		if err := plan.files.start(); err != nil {
			return sum, err
		}
		reader = plan.files
	} else {
		live := binlog.NewReader(src, plan.flavor, plan.columns, plan.from, log)
		if err := live.StopAt(plan.to); err != nil {
			return sum, err
		}
		reader = live
	}
	rt := replayRouter{inner: router.New(cfg.Router), topic: o.topic, id: id}

	g, gctx := errgroup.WithContext(context.Background())
	readCtx, stopRead := context.WithCancel(gctx)
	defer stopRead()
	unhook := context.AfterFunc(ctx, stopRead)
	defer unhook()

	// Progress counts what was acknowledged (dry run: read): the counter
	// stage queues each transaction's end with the running event count,
	// the acknowledgements pop them.
	type mark struct {
		end    binlog.Position
		events int64
	}
	var (
		mu       sync.Mutex
		read     binlog.Position // end of the last transaction read
		marks    []mark          // read, not yet acknowledged
		done     mark            // last acknowledged (dry run: read)
		finished = make(chan struct{})
	)
	toWriter := make(chan binlog.Txn, cfg.Source.TxnBuffer)
	g.Go(func() error { return reader.Run(readCtx) })
	g.Go(func() error {
		defer close(toWriter)
		for txn := range reader.Txns() {
			sum.scanned++
			if len(txn.Events) > 0 {
				sum.txns++
			}
			for i := range txn.Events {
				e := &txn.Events[i]
				topic, _ := rt.Topic(e.EventType)
				sum.perTopic[topic]++
				if sum.events == 0 {
					sum.firstRow, sum.firstEnd = e.Pos.FilePos(), txn.End.FilePos()
				}
				sum.lastRow, sum.lastEnd = e.Pos.FilePos(), txn.End.FilePos()
				sum.events++
			}
			mu.Lock()
			read = txn.End
			if o.dryRun {
				done = mark{txn.End, sum.events}
			} else {
				marks = append(marks, mark{txn.End, sum.events})
			}
			mu.Unlock()
			if o.dryRun {
				continue
			}
			select {
			case toWriter <- txn:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	var acked binlog.Position
	if !o.dryRun {
		writer := sink.NewWriter(cfg.Kafka, rt, router.Balancer(), log)
		g.Go(func() error { return writer.Run(gctx, toWriter) })
		g.Go(func() error {
			for p := range writer.Acks() {
				mu.Lock()
				acked = p
				for len(marks) > 0 && binlog.ComparePos(marks[0].end, p) <= 0 {
					done, marks = marks[0], marks[1:]
				}
				mu.Unlock()
			}
			return nil
		})
	}
	go func() {
		progress(o.errOut, o.progress, plan, finished, func() (int64, binlog.Position) {
			mu.Lock()
			defer mu.Unlock()
			return done.events, done.end
		})
	}()
	err := g.Wait()
	close(finished)
	mu.Lock()
	sum.acked = acked
	if o.dryRun {
		sum.acked = read
	}
	mu.Unlock()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	return sum, err
}

// progress prints a line to w every interval until finished is closed:
// events acknowledged (dry run: read), the rate over the interval
// (events/s), the end of the last transaction acknowledged (read) and, when the range is in file:pos terms, the share
// of the range's bytes done and the ETA at the average byte rate so far.
func progress(w io.Writer, interval time.Duration, plan replayPlan, finished <-chan struct{}, state func() (int64, binlog.Position)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	began := time.Now()
	last, lastAt := int64(0), began
	total := bytesBetween(plan.logs, plan.from, plan.to)
	for {
		select {
		case <-finished:
			return
		case now := <-t.C:
			n, at := state()
			rate := float64(n-last) / now.Sub(lastAt).Seconds()
			last, lastAt = n, now
			line := fmt.Sprintf("replay: %d events, %.0f events/s, at %s", n, rate, describe(at))
			if done := bytesBetween(plan.logs, plan.from, at); total > 0 && done >= 0 {
				line += fmt.Sprintf(", %.1f%% of %d bytes", 100*float64(done)/float64(total), total)
				if done > 0 {
					eta := time.Duration(float64(now.Sub(began)) * float64(total-done) / float64(done))
					line += ", ETA " + eta.Round(time.Second).String()
				}
			}
			fmt.Fprintln(w, line)
		}
	}
}

// bytesBetween returns the binlog bytes from a to b, given the files and
// their sizes (SHOW BINARY LOGS, oldest first), or -1 when a or b has no
// file or a file not in logs.
func bytesBetween(logs []binlog.LogFile, a, b binlog.Position) int64 {
	ia, ib := -1, -1
	for i, f := range logs {
		if f.Name == a.File {
			ia = i
		}
		if f.Name == b.File {
			ib = i
		}
	}
	if ia < 0 || ib < 0 || ib < ia {
		return -1
	}
	if ia == ib {
		return max(int64(b.Pos)-int64(a.Pos), 0)
	}
	n := max(logs[ia].Size-int64(a.Pos), 0)
	for i := ia + 1; i < ib; i++ {
		n += logs[i].Size
	}
	return n + int64(b.Pos)
}
