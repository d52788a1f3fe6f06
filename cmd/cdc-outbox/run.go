package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	_ "net/http/pprof" // --pprof
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

func runCommand() *cobra.Command {
	var (
		path      string
		start     string
		logFormat string
		logLevel  string
		pprofAddr string
		recoverCP bool
		accept    bool
		backfill  bool
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Stream the outbox table's INSERTs from the binlog to Kafka",
		Long: `run streams committed INSERTs of the outbox table to Kafka and checkpoints the
binlog position in Redis once Kafka acknowledged everything before it.

Configuration: defaults, then the YAML file (--config), then CDC_OUTBOX_*
environment variables (e.g. CDC_OUTBOX_SOURCE_PASSWORD), then flags.

Start: with a stored checkpoint, run resumes from it. Without one, a start
option is required: latest (the current end of the binlog), earliest (the
oldest binlog the server has), <file>:<pos>, or gtid:<set>.

Without a checkpoint but with records of cdc-outbox in the (fixed) topic,
run refuses to start and names the position to resume from; with
--recover-checkpoint (or checkpoint.recover: true) it resumes from there.

The partition count of each topic is stored with the checkpoint; run refuses
to start when it changed (the key → partition mapping changed) unless
--accept-partition-change is given.

SIGINT/SIGTERM stop reading, flush what was read, write the checkpoint and
exit 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			explicit := cmd.Flags().Changed("start")
			if explicit {
				cfg.Source.Start = start
			}
			if cmd.Flags().Changed("log-format") {
				cfg.Log.Format = logFormat
			}
			if cmd.Flags().Changed("log-level") {
				cfg.Log.Level = logLevel
			}
			if recoverCP {
				cfg.Checkpoint.Recover = true
			}
			if backfill {
				cfg.Source.Backfill = true
			}
			if err := cfg.Validate(); err != nil {
				return invalidConfig(err, os.Environ())
			}
			log, err := newLogger(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			if pprofAddr != "" {
				srv := &http.Server{Addr: pprofAddr, ReadHeaderTimeout: 5 * time.Second}
				defer srv.Close()
				go func() { // owned here: closed when run returns
					if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
						log.Warn("pprof server", zap.Error(err))
					}
				}()
			}
			m := newMetrics()
			if cfg.MetricsAddr != "" {
				ln, err := net.Listen("tcp", cfg.MetricsAddr)
				if err != nil {
					log.Error("metrics-addr", zap.Error(err))
					return exitError{code: 2}
				}
				srv := &http.Server{Handler: m.handler(), ReadHeaderTimeout: 5 * time.Second}
				defer srv.Close()
				go func() { // owned here: closed when run returns
					if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
						log.Warn("metrics server", zap.Error(err))
					}
				}()
				log.Info("serving metrics", zap.String("addr", ln.Addr().String()), zap.String("path", "/metrics"))
			}
			if err := supervise(ctx, cfg, runOptions{explicitStart: explicit, acceptPartitionChange: accept, backfill: backfill, metrics: m}, log); err != nil {
				log.Error("stopped", zap.Error(err))
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file")
	f.StringVar(&start, "start", "", "start position when no checkpoint exists: latest, earliest, <file>:<pos> or gtid:<set>")
	f.StringVar(&logFormat, "log-format", "", "json or console")
	f.StringVar(&logLevel, "log-level", "", "debug, info, warn or error")
	f.StringVar(&pprofAddr, "pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060) for profiling")
	f.BoolVar(&recoverCP, "recover-checkpoint", false, "when the checkpoint is missing but the topic holds records of cdc-outbox, resume from the position their binlog_txn_end headers give (same as checkpoint.recover: true)")
	f.BoolVar(&accept, "accept-partition-change", false, "start even though a topic's partition count differs from the one stored with the checkpoint, and store the new count")
	f.BoolVar(&backfill, "backfill", false, "first start only (no checkpoint): publish the outbox rows the polling dispatcher had not sent (source.backfill-where) from a consistent snapshot, then stream the binlog from the snapshot's position")
	cmd.MarkFlagsMutuallyExclusive("start", "recover-checkpoint")
	cmd.MarkFlagsMutuallyExclusive("backfill", "start", "recover-checkpoint")
	return cmd
}

// runOptions are run's command-line decisions that are not configuration.
type runOptions struct {
	// explicitStart: the start option came from --start, the operator's
	// choice for this run, rather than from the configuration file.
	explicitStart bool
	// acceptPartitionChange: --accept-partition-change.
	acceptPartitionChange bool
	// backfill: --backfill (refused when a checkpoint exists).
	backfill bool
	// metrics receive the writers' measurements and the restarts.
	metrics *metrics
}

// supervise runs the pipeline, restarting it from the last acknowledged
// position after retryable errors, until ctx is cancelled (nil) or a fatal
// error occurs.
func supervise(ctx context.Context, cfg Config, opts runOptions, log *zap.Logger) error {
	src := cfg.Source.Redacted()
	log.Info("starting", zap.String("version", version),
		zap.String("source", src.Addr), zap.String("user", src.User), zap.Uint32("server_id", src.ServerID),
		zap.String("table", src.Schema+"."+src.Table), zap.String("position_mode", src.PositionMode), zap.String("start", src.Start),
		zap.String("topic", cfg.Router.Topic), zap.Strings("brokers", cfg.Kafka.Brokers), zap.String("on_poison", cfg.Kafka.OnPoison),
		zap.String("checkpoint_key", cfg.Checkpoint.Key), zap.String("redis", cfg.Checkpoint.Addr),
		zap.Duration("checkpoint_interval", cfg.Checkpoint.Interval), zap.Bool("checkpoint_recover", cfg.Checkpoint.Recover))
	store := checkpoint.NewStore(cfg.Checkpoint)
	defer store.Close()
	if opts.metrics == nil {
		opts.metrics = newMetrics()
	}
	p := &pipeline{cfg: cfg, store: store, log: log, explicitStart: opts.explicitStart, acceptPartitionChange: opts.acceptPartitionChange, backfillFlag: opts.backfill,
		metrics: opts.metrics}
	defer func() {
		if p.deadLettered > 0 {
			log.Warn("poison records were sent to the dead-letter topic; see docs/poison.md to republish them",
				zap.Uint64("dead_lettered", p.deadLettered), zap.String("dead_letter_topic", cfg.Kafka.DeadLetterTopic))
		}
	}()
	backoff := time.Second
	for attempt := 0; ; attempt++ {
		began := time.Now()
		err := p.run(ctx, attempt)
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			log.Info("stopped")
			return nil
		}
		if err == nil {
			return nil
		}
		if fatal(err) {
			return err
		}
		if time.Since(began) > time.Minute {
			backoff = time.Second
		}
		resume := "the stored checkpoint or the start option (nothing acknowledged yet)"
		if p.known {
			resume = p.resume.String()
		}
		fields := []zap.Field{zap.Error(err), zap.Duration("backoff", backoff), zap.String("resume", resume)}
		if h := reachHint(err, cfg); h != "" {
			fields = append(fields, zap.String("hint", h))
		}
		log.Warn("pipeline stopped; restarting from the last acknowledged position", fields...)
		p.metrics.restarted()
		select {
		case <-ctx.Done():
			log.Info("stopped")
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, cfg.RetryBackoffMax)
	}
}

// reachHint names the setting behind a failed connection to Kafka or Redis
// in err, for the restart warning, or returns "" (no dial or DNS failure,
// or one to the source, whose errors name source.addr already). The failed
// address is compared with kafka.brokers and checkpoint.addr; a broker
// address that is neither (in a Kafka error) is one the cluster advertises
// (advertised.listeners).
func reachHint(err error, cfg Config) string {
	var dns *net.DNSError
	var op *net.OpError
	var we *sink.WriteError
	var me *sink.MetadataError
	target := ""
	switch {
	case errors.As(err, &dns):
		target = dns.Name
	case errors.As(err, &op) && op.Op == "dial" && op.Addr != nil:
		target = op.Addr.String()
	case (errors.As(err, &we) || errors.As(err, &me)) && errors.Is(err, context.DeadlineExceeded):
		// No connection error: Kafka did not answer in time (often a
		// firewall dropping packets).
		return fmt.Sprintf("no answer from Kafka in time: can this host reach kafka.brokers %v (a firewall dropping packets looks like this), and the addresses the brokers advertise?",
			cfg.Kafka.Brokers)
	default:
		return ""
	}
	is := func(addrs ...string) bool {
		for _, a := range addrs {
			if host, _, _ := net.SplitHostPort(a); a == target || host == target {
				return true
			}
		}
		return false
	}
	switch {
	case is(cfg.Kafka.Brokers...):
		return fmt.Sprintf("cannot reach Kafka at %s: is the broker up, and kafka.brokers right?", target)
	case is(cfg.Checkpoint.Addr):
		return fmt.Sprintf("cannot reach Redis at %s: is it up, and checkpoint.addr right?", target)
	case errors.As(err, &we) || errors.As(err, &me):
		return fmt.Sprintf("cannot reach %s, a broker address the Kafka cluster advertises (advertised.listeners), not one of kafka.brokers: this host must resolve and reach it", target)
	}
	return "" // the source's errors name source.addr themselves
}

// fatal decides, in one place, which errors stop the process instead of
// restarting the pipeline: configuration, privileges, server settings,
// unavailable positions, undecodable rows and poison records under
// kafka.on-poison: fail (sink.ErrPoison: invalid JSON, unroutable or
// oversize records).
func fatal(err error) bool {
	return binlog.IsFatal(err) || sink.IsFatal(err) || errors.Is(err, router.ErrTopic) ||
		errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, ErrPartitionsChanged) || errors.Is(err, ErrRecover) ||
		errors.Is(err, ErrTopicMissing)
}

type pipeline struct {
	cfg     Config
	store   *checkpoint.Store
	log     *zap.Logger
	metrics *metrics
	resume  binlog.Position // newest acknowledged position, once known
	known   bool
	// explicitStart: the start option came from --start, the operator's
	// choice for this run, rather than from the configuration file.
	explicitStart bool
	// acceptPartitionChange: start even though a topic's partition count
	// differs from the checkpoint's (first pipeline start only).
	acceptPartitionChange bool
	// parts: each target topic's partition count, read at the first
	// pipeline start and stored with every checkpoint; nil until read.
	parts map[string]int
	// deadLettered counts the records the sink dead-lettered, over restarts.
	deadLettered uint64
	// headroomWarned: when the oldest-binlog warning was last logged.
	headroomWarned time.Time
	// backfillFlag: --backfill was given (refused when a checkpoint exists).
	backfillFlag bool
}

// run connects, resolves the start position and runs the stages once.
func (p *pipeline) run(ctx context.Context, attempt int) error {
	cfg := p.cfg
	srv, err := binlog.Connect(ctx, cfg.Source, p.log.Named("source"))
	if err != nil {
		return err
	}
	defer srv.Close()
	if attempt == 0 {
		if err := srv.Check(ctx); err != nil {
			return err
		}
		if ok, err := p.store.Persistent(ctx); err == nil && !ok {
			p.log.Warn("Redis does not persist (appendonly no, no save points): a Redis restart loses the checkpoint; enable appendonly yes")
		}
	}
	saved := binlog.Position{}
	from := p.resume
	if !p.known {
		cp, err := p.store.Load(ctx)
		if err != nil {
			return err
		}
		if err := p.checkPartitions(ctx, cp); err != nil {
			return err
		}
		if cp != nil {
			if err := p.refuseBackfill(cp); err != nil {
				return err
			}
			from, saved = cp.Position(), cp.Position()
			if cp.Flavor != "" && cp.Flavor != srv.Flavor() {
				return fmt.Errorf("%w: checkpoint %s was written for a %s server but the source is %s", binlog.ErrStart, p.store.Key(), cp.Flavor, srv.Flavor())
			}
			otherServer := (cp.ServerID != 0 && cp.ServerID != srv.ServerID()) ||
				(cp.ServerUUID != "" && srv.ServerUUID() != "" && cp.ServerUUID != srv.ServerUUID())
			if otherServer && cfg.Source.PositionMode == binlog.ModeFile {
				return fmt.Errorf("%w: checkpoint %s (%s:%d) was written for the server with server_id %d uuid %q, but the source has server_id %d uuid %q: "+
					"a binlog file:pos of another server is meaningless. After a failover, resume with position-mode: gtid; "+
					"if source.addr is wrong, fix it; to start anew, cdc-outbox checkpoint set <position> (or checkpoint reset --yes for key %s, then --start)",
					binlog.ErrStart, p.store.Key(), cp.File, cp.Pos, cp.ServerID, cp.ServerUUID, srv.ServerID(), srv.ServerUUID(), p.store.Key())
			}
			if otherServer {
				p.log.Warn("checkpoint was written for another server; resuming by GTID set (failover)",
					zap.Uint32("checkpoint_server_id", cp.ServerID), zap.Uint32("source_server_id", srv.ServerID()), zap.String("gtid_set", cp.GTIDSet))
			}
			if p.explicitStart {
				p.log.Warn("--start is ignored: a checkpoint exists; to start elsewhere, use cdc-outbox checkpoint set <position> (or checkpoint reset --yes, then --start)",
					zap.String("key", p.store.Key()), zap.String("start", cfg.Source.Start))
			}
			p.log.Info("resuming from checkpoint", zap.String("key", p.store.Key()), zap.String("file", cp.File),
				zap.Uint32("pos", cp.Pos), zap.String("gtid_set", cp.GTIDSet), zap.Time("updated_at", cp.UpdatedAt))
		} else if cfg.Source.Backfill && !p.explicitStart {
			if from, err = p.backfill(ctx, srv); err != nil {
				return err
			}
			saved = from
		} else {
			start := cfg.Source.Start
			if !p.explicitStart {
				recovered, err := p.guardLostCheckpoint(ctx)
				if err != nil {
					return err
				}
				if recovered != "" {
					start = recovered
				}
			}
			st, err := binlog.ParseStart(start)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrRecover, err)
			}
			from, err = p.resolveStart(srv, st)
			if err != nil {
				return fmt.Errorf("no checkpoint under Redis key %s: %w", p.store.Key(), err)
			}
			// Store the start at once: a crash before the first
			// acknowledgement then resumes here instead of finding no
			// checkpoint (and a later "latest" would skip what came since).
			if err := p.store.Save(ctx, checkpoint.Checkpoint{File: from.File, Pos: from.Pos, GTIDSet: from.GTIDSet,
				ServerID: srv.ServerID(), ServerUUID: srv.ServerUUID(), Flavor: srv.Flavor(), Partitions: p.parts}); err != nil {
				return err
			}
			saved = from
			p.log.Info("no checkpoint; starting from the configured start (stored as the first checkpoint)", zap.String("key", p.store.Key()),
				zap.String("start", start), zap.String("file", from.File), zap.Uint32("pos", from.Pos), zap.String("gtid_set", from.GTIDSet))
		}
		p.resume, p.known = from, true
	} else {
		saved = from
		if err := p.checkPartitions(ctx, nil); err != nil {
			return err
		}
	}
	// source.archive: catch up from archived binlogs the server purged.
	if from, saved, err = p.catchUp(ctx, srv, from, saved); err != nil {
		return err
	}
	// The binlog after from still on the server? (source.on-purged)
	var skipped bool
	if from, skipped, err = p.checkResume(ctx, srv, from); err != nil {
		return err
	} else if skipped {
		saved = from
	}
	cols, err := srv.Columns()
	if err != nil {
		return err
	}

	reader := binlog.NewReader(cfg.Source, srv.Flavor(), cols, from, p.log)
	writer := sink.NewWriter(cfg.Kafka, router.New(cfg.Router), router.Balancer(), p.log)
	budget := binlog.NewBudget(cfg.Source.BufferBytes)
	reader.SetBudget(budget)
	writer.SetBudget(budget)
	committer := checkpoint.NewCommitter(p.store, checkpoint.Source{ServerID: srv.ServerID(), ServerUUID: srv.ServerUUID(), Flavor: srv.Flavor(), Counts: writer.Partitions},
		cfg.Checkpoint.Interval, saved, p.log)
	srv.Close()

	return p.stages(ctx, "reader", reader.Run, reader.Txns(), writer, committer)
}

// stages runs the source stage read (sending on txns), the writer and the
// committer under one errgroup. A signal (ctx) or any stage's error stops
// the source; the writer and the committer then drain what was read,
// bounded by shutdown-timeout. It records the committer's acknowledged
// position in p.resume and adds the dead-lettered records to
// p.deadLettered. what names the source in the signal's log line.
func (p *pipeline) stages(ctx context.Context, what string, read func(context.Context) error, txns <-chan binlog.Txn,
	writer *sink.Writer, committer *checkpoint.Committer) error {
	g, gctx := errgroup.WithContext(context.Background())
	readCtx, stopRead := context.WithCancel(gctx)
	defer stopRead()
	drainCtx, stopDrain := context.WithCancel(gctx)
	defer stopDrain()
	unhook := context.AfterFunc(ctx, func() {
		p.log.Info("signal received: stopping the " + what + ", flushing, writing the checkpoint")
		stopRead()
		time.AfterFunc(p.cfg.ShutdownTimeout, stopDrain)
	})
	defer unhook()
	writer.SetObserver(p.metrics)
	writer.PinPartitions(p.parts)
	g.Go(func() error { return read(readCtx) })
	g.Go(func() error { return writer.Run(drainCtx, txns) })
	g.Go(func() error { return committer.Run(drainCtx, writer.Acks()) })
	err := g.Wait()
	p.resume = committer.Acked()
	p.deadLettered += writer.DeadLettered()
	// Topics first written during this run (a template topic's new event
	// types) are guarded from now on, as the checkpoint stores them.
	if counts := writer.Partitions(); len(counts) > 0 {
		if p.parts == nil {
			p.parts = map[string]int{}
		}
		maps.Copy(p.parts, counts)
	}
	var pce *sink.PartitionCountError
	if errors.As(err, &pce) {
		// Partitions added while running: nothing was produced with the
		// new count; the same decision as at start.
		err = fmt.Errorf("%w (noticed while running: nothing was published with the new count)",
			partitionChangeError(p.store.Key(), []partitionChange{{Topic: pce.Topic, Stored: pce.Pinned, Now: pce.Now}}))
	}
	return err
}

// guardLostCheckpoint refuses to start from the configured start when the
// checkpoint is missing but the topic shows that a publisher already ran:
// starting from "latest" then would silently lose what was committed since
// the last checkpoint. The operator decides with --start; the error names
// the position that resumes without loss. With checkpoint.recover
// (--recover-checkpoint) it returns that position as a start option
// instead; "" means there is nothing to recover.
func (p *pipeline) guardLostCheckpoint(ctx context.Context) (string, error) {
	topic := p.cfg.Router.Topic
	if strings.Contains(topic, "{") {
		if p.cfg.Checkpoint.Recover {
			return "", fmt.Errorf("%w: router.topic %s is a template: the position to resume from is only computed for a fixed topic; "+
				"give --start <file>:<pos> (the smallest binlog_txn_end among the newest records of every partition of every topic)", ErrRecover, topic)
		}
		p.log.Warn("no checkpoint, and the topic is a template: cannot tell whether cdc-outbox ran before; starting from the configured start",
			zap.String("start", p.cfg.Source.Start))
		return "", nil
	}
	heads, err := sink.PublishedPartitions(ctx, p.cfg.Kafka.Brokers, topic)
	if err != nil {
		return "", err
	}
	resume, from := leastAdvanced(heads)
	if resume == "" {
		if p.cfg.Checkpoint.Recover {
			p.log.Info("no checkpoint and nothing to recover: the topic holds no records of cdc-outbox; starting from the configured start",
				zap.String("topic", topic), zap.String("start", p.cfg.Source.Start))
		}
		return "", nil
	}
	if p.cfg.Checkpoint.Recover {
		p.log.Warn("no checkpoint: recovering it from the topic (checkpoint.recover / --recover-checkpoint): resuming from the least advanced partition's newest binlog_txn_end; records after it are published again",
			zap.String("key", p.store.Key()), zap.String("topic", topic), zap.String("resume", resume), zap.Int("from_partition", from),
			zap.Any("partitions", heads))
		return resume, nil
	}
	return "", fmt.Errorf("%w: no checkpoint under Redis key %s, but topic %s already holds records published by cdc-outbox "+
		"(the least advanced partition ends at %s): the checkpoint was lost (Redis flushed, or no persistence) or the key changed. "+
		"Restart once with --start %s to resume without loss (some records may be published twice), or with --recover-checkpoint to do so automatically, "+
		"or with --start latest to skip to now, losing what was committed since",
		binlog.ErrStart, p.store.Key(), topic, resume, resume)
}

// leastAdvanced returns the smallest file:pos among the partitions' newest
// binlog_txn_end headers, and its partition: every transaction before it
// was acknowledged. Unparsable headers are ignored; "" and -1 when none.
func leastAdvanced(heads map[int]string) (string, int) {
	var oldest binlog.Start
	part := -1
	for _, id := range slices.Sorted(maps.Keys(heads)) {
		st, err := binlog.ParseStart(heads[id])
		if err != nil || st.Kind != binlog.StartFilePos {
			continue
		}
		if oldest.File == "" || st.File < oldest.File || (st.File == oldest.File && st.Pos < oldest.Pos) {
			oldest, part = st, id
		}
	}
	if oldest.File == "" {
		return "", -1
	}
	return fmt.Sprintf("%s:%d", oldest.File, oldest.Pos), part
}

// checkPartitions reads the target topics' partition counts and compares
// them with those stored with cp (first pipeline start) or read at the
// previous pipeline start (restarts, cp nil). A change refuses to start
// (ErrPartitionsChanged), except at the first start with
// --accept-partition-change, which stores the new counts at once.
func (p *pipeline) checkPartitions(ctx context.Context, cp *checkpoint.Checkpoint) error {
	var ref map[string]int
	var topics []string
	if p.parts != nil {
		ref = p.parts
		topics = slices.Sorted(maps.Keys(p.parts))
	} else {
		if cp != nil {
			ref = cp.Partitions
		}
		var err error
		if topics, err = routedTopics(ctx, p.cfg); err != nil {
			return err
		}
		for t := range ref {
			if !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	now, err := partitionCounts(ctx, p.cfg.Kafka.Brokers, topics)
	if err != nil {
		return err
	}
	if t := p.cfg.Router.Topic; p.parts == nil && !strings.Contains(t, "{") && !p.cfg.Kafka.AllowAutoTopicCreation {
		if _, ok := now[t]; !ok {
			return fmt.Errorf("%w: router.topic %s on %s: create it with the partition count you want (kafka-topics.sh --create --topic %s --partitions N), or set kafka.allow-auto-topic-creation: true",
				ErrTopicMissing, t, strings.Join(p.cfg.Kafka.Brokers, ","), t)
		}
	}
	changes := partitionChanges(ref, now)
	if len(changes) > 0 && (p.parts != nil || !p.acceptPartitionChange) {
		return partitionChangeError(p.store.Key(), changes)
	}
	p.parts = now
	if len(changes) > 0 {
		for _, c := range changes {
			p.log.Warn("partition count change accepted (--accept-partition-change): per-conversation order is not kept across it",
				zap.String("topic", c.Topic), zap.Int("stored", c.Stored), zap.Int("now", c.Now))
		}
		cp.Partitions = now
		if err := p.store.Save(ctx, *cp); err != nil {
			return err
		}
		p.log.Info("new partition counts stored with the checkpoint", zap.String("key", p.store.Key()), zap.Any("partitions", now))
	}
	return nil
}
