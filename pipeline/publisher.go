package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// Observer receives the publisher's measurements besides the Writer's.
type Observer interface {
	sink.Observer
	// Restarted counts a pipeline restart after a retryable error.
	Restarted()
	// PurgedSkip counts a skip over purged binlogs (source.on-purged) and
	// returns the count so far.
	PurgedSkip() uint64
}

// Options are run's command-line decisions that are not configuration.
type Options struct {
	// ExplicitStart: the start option came from --start, the operator's
	// choice for this run, rather than from the configuration file.
	ExplicitStart bool
	// AcceptPartitionChange: --accept-partition-change (first start only).
	AcceptPartitionChange bool
	// Backfill: --backfill (refused when a checkpoint exists).
	Backfill bool
	// Version is logged at start.
	Version string
}

// Publisher is run: it decides where to start (Decide), then runs the
// pipeline from the server's binlog, catching up from source.archive and
// applying source.on-purged first, restarting from the last acknowledged
// position after retryable errors.
type Publisher struct {
	cfg   config.Config
	opts  Options
	store *checkpoint.Store
	obs   Observer
	log   *zap.Logger

	resume binlog.Position // newest acknowledged position, once known
	known  bool
	// parts: each target topic's partition count, read at the first
	// pipeline start and stored with every checkpoint; nil until read.
	parts map[string]int
	// deadLettered counts the records the sink dead-lettered, over restarts.
	deadLettered uint64
	headroom     *logging.Limiter // the oldest-binlog warning: once per 10 min
}

// NewPublisher returns a Publisher for a configuration valid for
// config.ScopeRun. obs may be nil.
func NewPublisher(cfg config.Config, opts Options, obs Observer, log *zap.Logger) *Publisher {
	if obs == nil {
		obs = nopObserver{}
	}
	return &Publisher{cfg: cfg, opts: opts, store: checkpoint.NewStore(cfg.Checkpoint), obs: obs, log: log,
		headroom: logging.NewLimiter(10*time.Minute, 1)}
}

// Run runs the pipeline until ctx is cancelled (nil, after draining) or a
// fatal error (IsFatal) occurs, restarting it after retryable errors with
// a backoff capped at retry-backoff-max.
func (p *Publisher) Run(ctx context.Context) error {
	defer p.store.Close()
	cfg := p.cfg
	src := cfg.Source.Redacted()
	p.log.Info("starting", zap.String("version", p.opts.Version),
		zap.String("source", src.Addr), zap.String("user", src.User), zap.Uint32("server_id", src.ServerID),
		zap.String("table", src.Schema+"."+src.Table), zap.String("position_mode", src.PositionMode), zap.String("start", src.Start),
		zap.String("topic", cfg.Router.Topic), zap.Strings("brokers", cfg.Kafka.Brokers), zap.String("on_poison", cfg.Kafka.OnPoison),
		zap.String("checkpoint_key", cfg.Checkpoint.Key), zap.String("redis", cfg.Checkpoint.Addr),
		zap.Duration("checkpoint_interval", cfg.Checkpoint.Interval), zap.Bool("checkpoint_recover", cfg.Checkpoint.Recover))
	defer func() {
		if p.deadLettered > 0 {
			p.log.Warn("poison records were sent to the dead-letter topic; see docs/poison.md to republish them",
				zap.Uint64("dead_lettered", p.deadLettered), zap.String("dead_letter_topic", cfg.Kafka.DeadLetterTopic))
		}
	}()
	backoff := time.Second
	for attempt := 0; ; attempt++ {
		began := time.Now()
		err := p.attempt(ctx, attempt)
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			p.log.Info("stopped")
			return nil
		}
		if err == nil || IsFatal(err) {
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
		if h := ReachHint(err, cfg); h != "" {
			fields = append(fields, zap.String("hint", h))
		}
		p.log.Warn("pipeline stopped; restarting from the last acknowledged position", fields...)
		p.obs.Restarted()
		select {
		case <-ctx.Done():
			p.log.Info("stopped")
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, cfg.RetryBackoffMax)
	}
}

// attempt connects, resolves the start position and runs the stages once.
func (p *Publisher) attempt(ctx context.Context, n int) error {
	cfg := p.cfg
	srv, err := binlog.Connect(ctx, cfg.Source, p.log.Named("source"))
	if err != nil {
		return err
	}
	defer srv.Close()
	if n == 0 {
		if err := srv.Check(ctx); err != nil {
			return err
		}
		if ok, err := p.store.Persistent(ctx); err == nil && !ok {
			p.log.Warn("Redis does not persist (appendonly no, no save points): a Redis restart loses the checkpoint; enable appendonly yes")
		}
	}
	ident := checkpoint.Source{ServerID: srv.ServerID(), ServerUUID: srv.ServerUUID(), Flavor: srv.Flavor()}
	var cp *checkpoint.Checkpoint
	if !p.known {
		if cp, err = p.store.Load(ctx); err != nil {
			return err
		}
	}
	if err := p.checkPartitions(ctx, cp); err != nil {
		return err
	}
	cpw := checkpoint.NewWriter(p.store, ident, p.parts)
	from := p.resume
	saved := from
	if !p.known {
		if from, err = p.first(ctx, srv, cp, cpw); err != nil {
			return err
		}
		saved = from
		p.resume, p.known = from, true
	}
	// source.archive: catch up from archived binlogs the server purged.
	if from, saved, err = p.catchUp(ctx, srv, cpw, from, saved); err != nil {
		return err
	}
	// The binlog after from still on the server? (source.on-purged)
	var skipped bool
	if from, skipped, err = p.checkResume(ctx, srv, cpw, from); err != nil {
		return err
	} else if skipped {
		saved = from
	}
	tables, cols, err := Tables(cfg, srv)
	if err != nil {
		return err
	}
	reader := binlog.NewReader(cfg.Source, srv.Flavor(), cols, from, p.log)
	reader.SetTables(tables)
	budget := binlog.NewBudget(cfg.Source.BufferBytes)
	reader.SetBudget(budget)
	srv.Close()
	return p.stream(ctx, "reader", reader, budget, cpw, saved)
}

// legacy reports whether cfg reads the single im table of before mappings
// (router.topic is then its topic).
func legacy(cfg config.Config) bool {
	ts, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic)
	return err == nil && ts.Legacy()
}

// Tables returns the source's outbox tables (binlog.NewTableSet with
// router.topic), checked against the server (Server.CheckTables: errors
// name the table, the column and the fix), and the single table's column
// names (Server.Columns) for binlogs without them; none with source.tables.
func Tables(cfg config.Config, srv *binlog.Server) (*binlog.TableSet, []string, error) {
	tables, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic)
	if err != nil {
		return nil, nil, err
	}
	if _, err := srv.CheckTables(tables); err != nil {
		return nil, nil, err
	}
	if len(cfg.Source.Tables) > 0 {
		return tables, nil, nil
	}
	cols, err := srv.Columns()
	return tables, cols, err
}

// first decides where the first pipeline start begins (Decide) and
// returns the position to stream from, stored as the checkpoint.
func (p *Publisher) first(ctx context.Context, srv *binlog.Server, cp *checkpoint.Checkpoint, cpw *checkpoint.Writer) (binlog.Position, error) {
	cfg := p.cfg
	f := Facts{Checkpoint: cp, Key: p.store.Key(), Server: checkpoint.Source{ServerID: srv.ServerID(), ServerUUID: srv.ServerUUID(), Flavor: srv.Flavor()},
		PositionMode: cfg.Source.PositionMode, Start: cfg.Source.Start, ExplicitStart: p.opts.ExplicitStart,
		Backfill: cfg.Source.Backfill || p.opts.Backfill, BackfillFlag: p.opts.Backfill, Recover: cfg.Checkpoint.Recover,
		Topic: cfg.Router.Topic, Template: strings.Contains(cfg.Router.Topic, "{")}
	if NeedsHeads(f) {
		heads, err := sink.NewestHeaders(ctx, cfg.Kafka.Brokers, f.Topic)
		if err != nil {
			return binlog.Position{}, err
		}
		f.Heads = heads
	}
	d, err := Decide(f)
	for _, n := range d.Notes {
		if n.Warn {
			p.log.Warn(n.Msg, n.Fields...)
		} else {
			p.log.Info(n.Msg, n.Fields...)
		}
	}
	if err != nil {
		return binlog.Position{}, err
	}
	switch d.Action {
	case Resume:
		return d.At, nil
	case Backfill:
		return p.backfill(ctx, srv, cpw)
	}
	st, err := binlog.ParseStart(d.Start)
	if err != nil {
		return binlog.Position{}, fmt.Errorf("%w: %w", ErrRecover, err)
	}
	from, err := p.resolveStart(srv, st)
	if err != nil {
		return binlog.Position{}, fmt.Errorf("no checkpoint under Redis key %s: %w", p.store.Key(), err)
	}
	// Store the start at once: a crash before the first acknowledgement
	// then resumes here instead of finding no checkpoint (and a later
	// "latest" would skip what came since).
	if err := cpw.Write(ctx, from); err != nil {
		return binlog.Position{}, err
	}
	p.log.Info("no checkpoint; starting from the configured start (stored as the first checkpoint)", zap.String("key", p.store.Key()),
		zap.String("start", d.Start), zap.String("file", from.File), zap.Uint32("pos", from.Pos), zap.String("gtid_set", from.GTIDSet))
	return from, nil
}

// stream runs src → writer → committer with Run, keeping p.resume at the
// acknowledged position and the partition counts of topics first written.
func (p *Publisher) stream(ctx context.Context, name string, src Source, budget Releaser, cpw *checkpoint.Writer, saved binlog.Position) error {
	cfg := p.cfg
	writer := sink.NewWriter(cfg.Kafka, router.New(cfg.Router), router.Balancer(), p.log)
	writer.SetObserver(p.obs)
	writer.PinPartitions(p.parts)
	committer := checkpoint.NewCommitter(cpw, cfg.Checkpoint.Interval, cfg.Checkpoint.Timeout, saved, p.log)
	err := Run(ctx, Stages{Name: name, Source: src, Writer: writer, Committer: committer, Budget: budget}, cfg.ShutdownTimeout, p.log)
	p.resume = committer.Acked()
	p.deadLettered += writer.DeadLettered()
	// Topics first written during this run (a template topic's new event
	// types) are guarded from now on, as the checkpoint stores them.
	counts := map[string]int{}
	maps.Copy(counts, cpw.Partitions())
	maps.Copy(counts, writer.Partitions()) // topics pinned at their first use, acknowledged or not
	if len(counts) > 0 {
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
			PartitionChangeError(p.store.Key(), []PartitionChange{{Topic: pce.Topic, Stored: pce.Pinned, Now: pce.Now}}))
	}
	return err
}

// checkPartitions reads the target topics' partition counts and compares
// them with those stored with cp (first pipeline start) or read at the
// previous pipeline start (restarts, cp nil). A change refuses to start
// (ErrPartitionsChanged), except at the first start with
// --accept-partition-change, which stores the new counts at once.
func (p *Publisher) checkPartitions(ctx context.Context, cp *checkpoint.Checkpoint) error {
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
		if topics, err = RoutedTopics(ctx, p.cfg); err != nil {
			return err
		}
		for t := range ref {
			if !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	now, err := PartitionCounts(ctx, p.cfg.Kafka.Brokers, topics)
	if err != nil {
		return err
	}
	if t := p.cfg.Router.Topic; p.parts == nil && !strings.Contains(t, "{") && !p.cfg.Kafka.AllowAutoTopicCreation && legacy(p.cfg) {
		if _, ok := now[t]; !ok {
			return fmt.Errorf("%w: router.topic %s on %s: create it with the partition count you want (kafka-topics.sh --create --topic %s --partitions N), or set kafka.allow-auto-topic-creation: true",
				ErrTopicMissing, t, strings.Join(p.cfg.Kafka.Brokers, ","), t)
		}
	}
	changes := PartitionChanges(ref, now)
	first := p.parts == nil
	if len(changes) > 0 && (!first || !p.opts.AcceptPartitionChange) {
		return PartitionChangeError(p.store.Key(), changes)
	}
	p.parts = now
	if len(changes) > 0 {
		for _, c := range changes {
			p.log.Warn("partition count change accepted (--accept-partition-change): per-conversation order is not kept across it",
				zap.String("topic", c.Topic), zap.Int("stored", c.Stored), zap.Int("now", c.Now))
		}
		// Stored at once, with the checkpoint's own position and server.
		w := checkpoint.NewWriter(p.store, checkpoint.Source{ServerID: cp.ServerID, ServerUUID: cp.ServerUUID, Flavor: cp.Flavor}, now)
		if err := w.Write(ctx, cp.Position()); err != nil {
			return err
		}
		p.log.Info("new partition counts stored with the checkpoint", zap.String("key", p.store.Key()), zap.Any("partitions", now))
	}
	return nil
}

type nopObserver struct{}

func (nopObserver) Produced([]kafka.Message, time.Duration, error) {}
func (nopObserver) Acked(binlog.Position)                          {}
func (nopObserver) Restarted()                                     {}
func (nopObserver) PurgedSkip() uint64                             { return 0 }
