package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/health"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/internal/rawconn"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Phase is told the publisher's state for /readyz (*health.Phase).
type Phase interface {
	Set(s health.State, reason string)
}

// Ticker is the publisher's liveness for /healthz (*health.Ticker): Tick
// while its loops run, Pause while it waits on purpose (the backoff).
type Ticker interface {
	Tick()
	Pause()
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
	// BackfillProgress, when set, is told the rows acknowledged of the
	// backfill's total after each acknowledged round (run draws a
	// progress bar with it on a terminal); it must not block.
	BackfillProgress func(acked, total int64, at string)
	// Phase and Live, when set, follow the publisher's state (/readyz)
	// and loops (/healthz).
	Phase Phase
	Live  Ticker
	// Fence, when set, is the source's lease (package ha): every
	// checkpoint write carries it, and the Publisher stops at once, with
	// ErrLeaseLost, when it is lost. nil: unfenced (a single instance
	// with ha.enabled false; tools).
	Fence Fence
}

// Fence is the lease a Publisher publishes under (*ha.Lease).
type Fence interface {
	// Token is the fencing token of this ownership term (only grows).
	Token() uint64
	// Owner is the instance's id.
	Owner() string
	// Lost is closed when the lease was lost or is about to expire
	// without renewal: publishing must stop before another instance can
	// take over.
	Lost() <-chan struct{}
}

// Publisher is run: it decides where to start (Decide), then runs the
// pipeline from the server's binlog, catching up from source.archive and
// applying source.on-purged first, restarting from the last acknowledged
// position after retryable errors.
type Publisher struct {
	cfg    config.Config
	opts   Options
	store  store
	mirror mirror // nil: checkpoint.mirror-topic ""
	topics topics
	// connect opens a SQL connection to the source, its logger named name
	// (binlog.Connect).
	connect func(ctx context.Context, name string) (server, error)
	obs     Observers
	log     *zap.Logger

	resume binlog.Position // newest acknowledged position, once known
	known  bool
	// resumeOf: the server resume was read from (the last attempt's).
	resumeOf checkpoint.Source
	// parts: each target topic's partition count, read at the first
	// pipeline start and stored with every checkpoint; nil until read.
	parts map[string]int
	// deadLettered counts the records the sink dead-lettered, over restarts.
	deadLettered uint64
	headroom     *logging.Limiter // the oldest-binlog warning: once per 10 min
	mirrorWarn   *logging.Limiter // failed copies to the mirror: once a minute
}

// LivenessPeriod is how long the publisher may go without a tick before
// /healthz reports it stuck: it ticks at each acknowledged round, each
// heartbeat of the source (heartbeat-period) and each pipeline start, so
// the longest legitimate silence is a read timeout plus a produce round's
// retries, with a margin.
func LivenessPeriod(cfg config.Config) time.Duration {
	return 2*cfg.Source.ReadTimeout + time.Duration(cfg.Kafka.MaxAttempts+1)*cfg.Kafka.WriteTimeout + cfg.Source.HeartbeatPeriod + time.Minute
}

// NewPublisher returns a Publisher for a configuration valid for
// config.ScopeRun. Observers left nil observe nothing.
func NewPublisher(cfg config.Config, opts Options, obs Observers, log *zap.Logger) *Publisher {
	p := &Publisher{cfg: cfg, opts: opts, store: checkpoint.NewStore(cfg.Checkpoint), topics: kafkaTopics{cfg.Kafka}, obs: obs.orNop(), log: log,
		connect: func(ctx context.Context, name string) (server, error) {
			srv, err := binlog.Connect(ctx, cfg.Source, log.Named(name))
			if err != nil {
				return nil, err
			}
			return srv, nil
		},
		headroom: logging.NewLimiter(10*time.Minute, 1), mirrorWarn: logging.NewLimiter(time.Minute, 1)}
	if cfg.Checkpoint.MirrorTopic != "" {
		p.mirror = sink.NewMirror(cfg.Kafka, cfg.Checkpoint.MirrorTopic, log)
	}
	return p
}

// Run runs the pipeline until ctx is cancelled (nil, after draining) or a
// fatal error (IsFatal) occurs, restarting it after retryable errors with
// a backoff capped at retry-backoff-max.
func (p *Publisher) Run(ctx context.Context) error {
	defer p.store.Close()
	if p.mirror != nil {
		defer p.mirror.Close()
	}
	if f := p.opts.Fence; f != nil {
		// The lease lost: cancel everything at once (ErrAbort: no drain).
		fctx, cancel := context.WithCancelCause(ctx)
		done := make(chan struct{})
		var g errgroup.Group
		g.Go(func() error {
			select {
			case <-f.Lost():
				cancel(fmt.Errorf("%w (token %d)", ErrLeaseLost, f.Token()))
			case <-done:
			}
			return nil
		})
		defer func() { close(done); _ = g.Wait(); cancel(nil) }()
		err := p.run(fctx)
		if cause := context.Cause(fctx); errors.Is(cause, ErrLeaseLost) && ctx.Err() == nil {
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrAbort) {
				return fmt.Errorf("%w; then: %w", cause, err)
			}
			return cause
		}
		return err
	}
	return p.run(ctx)
}

// startTopic is the start log's "topic": router.topic for the im preset,
// else where the mapping takes it from (a template, or a column), or
// "by each table's mapping" under source.tables.
func startTopic(cfg config.Config) string {
	src := cfg.Source
	if len(src.Tables) > 0 {
		return "by each table's mapping (source.tables)"
	}
	if src.Mapping.IsIM() {
		return cfg.Router.Topic
	}
	m, _ := mapping.Resolve(src.Mapping)
	if m.TopicColumn != "" {
		return "from column " + m.TopicColumn
	}
	return cmp.Or(m.Topic, cfg.Router.Topic)
}

func (p *Publisher) run(ctx context.Context) error {
	cfg := p.cfg
	src := cfg.Source.Redacted()
	p.log.Info("starting", zap.String("version", p.opts.Version),
		zap.String("addr", src.Addr), zap.String("user", src.User), zap.Uint32("server_id", src.ServerID),
		zap.String("table", src.Schema+"."+src.Table), zap.String("position_mode", src.PositionMode), zap.String("start", src.Start),
		zap.String("topic", startTopic(cfg)), zap.Strings("brokers", cfg.Kafka.Brokers), zap.String("on_poison", cfg.Kafka.OnPoison),
		zap.String("checkpoint_key", cfg.Checkpoint.Key), zap.String("redis", cfg.Checkpoint.Where()),
		zap.Duration("checkpoint_interval", cfg.Checkpoint.Interval), zap.Bool("checkpoint_recover", cfg.Checkpoint.Recover),
		zap.Stringers("from_environment", cfg.Environment()))
	// security.go, tls.go, client.go: what protects each connection.
	p.log.Info("security", zap.String("source_ssl_mode", cmp.Or(src.SSLMode, binlog.SSLPreferred)),
		zap.Bool("kafka_tls", cfg.Kafka.TLS.Enabled), zap.String("kafka_sasl", cfg.Kafka.SASL.Mechanism), zap.Bool("redis_tls", cfg.Checkpoint.TLS.Enabled))
	if cfg.Kafka.TLS.InsecureSkipVerify || cfg.Checkpoint.TLS.InsecureSkipVerify {
		p.log.Warn("TLS certificate verification is OFF (insecure-skip-verify): the servers are not authenticated and a man in the middle can read and change everything; use it for tests only",
			zap.Bool("kafka", cfg.Kafka.TLS.InsecureSkipVerify), zap.Bool("redis", cfg.Checkpoint.TLS.InsecureSkipVerify))
	}
	for _, w := range cfg.SecretWarnings() {
		p.log.Warn("secret file readable by others", zap.String("detail", w))
	}
	defer func() {
		if p.deadLettered > 0 {
			p.log.Warn("poison records were sent to the dead-letter topic; see docs/poison.md to republish them",
				zap.Uint64("dead_lettered", p.deadLettered), zap.String("dead_letter_topic", cfg.Kafka.DeadLetterTopic))
		}
	}()
	// A start clears the record of the last fatal stop (the status
	// command names it until then).
	p.recordStop(nil)
	backoff := restartBackoff
	for attempt := 0; ; attempt++ {
		began := time.Now()
		p.tick()
		err := p.attempt(ctx, attempt)
		if errors.Is(context.Cause(ctx), ErrAbort) {
			return err
		}
		if ctx.Err() != nil {
			p.setPhase(health.Stopping, "signal received")
			if err == nil || errors.Is(err, context.Canceled) {
				if err != nil {
					p.log.Info("stopped by the signal", zap.Error(err))
				} else {
					p.log.Info("stopped")
				}
				return nil
			}
			// Stopping, but the stop itself failed (the final checkpoint
			// write): the process must not exit 0 with it unsaved.
			return fmt.Errorf("stopping: %w", err)
		}
		p.obs.Lag.SourceState(false, false)
		var perr *sink.PoisonError
		if errors.As(err, &perr) {
			p.obs.Stops.PoisonStopped(perr.Reason)
		}
		if err == nil {
			p.setPhase(health.Stopping, "the source ended")
			return nil
		}
		if IsFatal(err) {
			// Under a lease, the supervisor (package ha) decides: a lost
			// lease or a fenced write makes a standby, a taken server_id
			// a new term.
			if p.opts.Fence == nil {
				p.setPhase(health.Failed, fmt.Sprintf("stopped: %v", err))
				p.recordStop(err)
			}
			return err
		}
		p.setPhase(health.Degraded, fmt.Sprintf("restarting in %s after: %v", backoff, err))
		if p.opts.Live != nil {
			p.opts.Live.Pause()
		}
		if time.Since(began) > restartCalm {
			backoff = restartBackoff
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
		p.obs.Stops.Restarted()
		select {
		case <-ctx.Done():
			p.log.Info("stopped")
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, cfg.RetryBackoffMax)
	}
}

// recordStop writes the record of a fatal stop (err; nil clears it) for
// the status command (checkpoint.Stop), within checkpoint.timeout. Under
// a lease package ha records its own stops. A Redis that
// does not answer leaves the record as it was: the stop is in the log,
// /readyz and the metrics already, and the record is a convenience.
func (p *Publisher) recordStop(err error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Checkpoint.Timeout)
	defer cancel()
	var werr error
	if err == nil {
		werr = p.store.ClearStop(ctx)
	} else {
		werr = p.store.SaveStop(ctx, StopRecord(err, p.instance()))
	}
	if werr != nil {
		p.log.Debug("the stop record was not written", zap.Error(werr))
	}
}

// instance is the id the stop record names: the lease owner's under a
// lease, else the host name.
func (p *Publisher) instance() string {
	if p.opts.Fence != nil {
		return p.opts.Fence.Owner()
	}
	h, _ := os.Hostname()
	return h
}

// StopRecord is the record of a fatal stop on err by instance, now.
func StopRecord(err error, instance string) checkpoint.Stop {
	return checkpoint.Stop{At: time.Now().UTC(), Instance: instance, Reason: err.Error()}
}

func (p *Publisher) setPhase(s health.State, reason string) {
	if p.opts.Phase != nil {
		p.opts.Phase.Set(s, reason)
	}
}

func (p *Publisher) tick() {
	if p.opts.Live != nil {
		p.opts.Live.Tick()
	}
}

// attempt connects, runs the start-up phases (startPhases: where to
// start, the checkpoint writes they want) and streams once.
func (p *Publisher) attempt(ctx context.Context, n int) error {
	cfg := p.cfg
	srv, err := p.connect(ctx, "source")
	if err != nil {
		return err
	}
	defer srv.Close()
	st := &startState{n: n, srv: srv, ident: checkpoint.Source{ServerID: srv.ServerID(), ServerUUID: srv.ServerUUID(), Flavor: srv.Flavor()},
		from: p.resume, saved: p.resume}
	if err := p.runPhases(ctx, p.startPhases(), st); err != nil {
		return err
	}
	from, saved := st.from, st.saved
	tables, cols, err := Tables(cfg, srv)
	if err != nil {
		return err
	}
	// atEnd: nothing to read and everything acknowledged: caught up as
	// soon as the dump starts (an idle server's restart is no lag).
	atEnd := false
	if files, err := srv.BinaryLogSizes(); err == nil && len(files) > 0 {
		last := files[len(files)-1]
		if n, _, ok := binlog.Span(files, from, binlog.Position{File: last.Name, Pos: uint32(min(last.Size, 1<<32-1))}); ok {
			p.obs.Lag.SetBytesBehind(n)
			atEnd = n == 0 && binlog.ComparePos(from, saved) == 0
		}
	}
	reader := binlog.NewReader(cfg.Source, srv.Flavor(), cols, from, p.log)
	reader.SetTables(tables)
	budget := binlog.NewBudget(cfg.Source.BufferBytes)
	reader.SetBudget(budget)
	// The reader's linger pauses hold the Writer's produce answers: both
	// get the same pace (stream), read in the wake-up that ends the pause.
	pace := rawconn.NewPace()
	reader.SetPace(pace)
	srv.Close()
	return p.stream(ctx, "reader", reader, budget, pace, st.cpw, saved, atEnd)
}

// preflight (the first pipeline start of the process): the server's
// settings (Server.Check), Redis's persistence and eviction policy, and
// the checkpoint mirror topic (created when missing).
func (p *Publisher) preflight(ctx context.Context, st *startState) (step, error) {
	if st.n > 0 {
		return step{}, nil
	}
	if err := st.srv.Check(ctx); err != nil {
		return step{}, err
	}
	if ok, err := p.store.Persistent(ctx); errors.Is(err, checkpoint.ErrAuth) {
		return step{}, err
	} else if err == nil && !ok {
		p.log.Warn("Redis does not persist (appendonly no, no save points): a Redis restart loses the checkpoint; enable appendonly yes")
	}
	if policy, max, err := p.store.MaxMemoryPolicy(ctx); err == nil {
		if ttl, err := p.store.TTL(ctx); err == nil {
			if risk := checkpoint.EvictionRisk(policy, max, ttl); risk != "" {
				p.log.Error("Redis may evict the checkpoint: "+risk, zap.String("key", p.store.Key()), zap.String("redis", p.cfg.Checkpoint.Where()))
			}
		}
	}
	if p.mirror != nil {
		created, err := p.mirror.Ensure(ctx)
		if err != nil {
			return step{}, err
		}
		if created {
			p.log.Info("created the checkpoint mirror topic (cleanup.policy compact)", zap.String("topic", p.mirror.Topic()))
		}
	}
	return step{}, nil
}

// load reads the stored checkpoint at the first pipeline start: Redis's,
// and the mirror's copy when Redis has none.
func (p *Publisher) load(ctx context.Context, st *startState) (step, error) {
	if p.known {
		return step{}, nil
	}
	var err error
	if st.cp, err = p.store.Load(ctx); err != nil {
		return step{}, err
	}
	if st.cp == nil && p.mirror != nil {
		if st.mcp, err = p.loadMirror(ctx); err != nil {
			return step{}, err
		}
	}
	return step{}, nil
}

// partitionPhase guards the partition counts (checkPartitions) and makes
// this start's checkpoint writer, which applies an accepted change.
func (p *Publisher) partitionPhase(ctx context.Context, st *startState) (step, error) {
	cp := cmp.Or(st.cp, st.mcp)
	in, missing, err := p.checkPartitions(ctx, cp)
	if err != nil {
		return step{}, err
	}
	st.missing = missing
	st.cpw = p.writer(st.ident, p.parts, p.known || st.cp != nil)
	if in == nil {
		return step{}, nil
	}
	return step{writes: []checkpoint.Intent{*in}, applied: func() {
		p.log.Info("new partition counts stored with the checkpoint", zap.String("key", p.store.Key()), zap.Any("partitions", in.Partitions))
	}}, nil
}

// resolve decides where this start begins: at the first pipeline start
// Decide (first), whose writes it wants; at a restart the acknowledged
// position, read from the server of the previous attempt (p.resumeOf).
func (p *Publisher) resolve(ctx context.Context, st *startState) (step, error) {
	if p.known {
		st.restart, st.of = true, &p.resumeOf
		return step{}, nil
	}
	return p.first(ctx, st)
}

// historyPhase checks the position resolved against the server's binlog
// history (history.go): a stored checkpoint at the first start (the
// server may not be the one it was written for), the acknowledged
// position at a restart (the server may have been reset or replaced
// since); a start option just resolved on the server is not checked. At a
// restart with exactly-once, the position moves past the last committed
// transaction (committedResume). Then the position's GTID set is
// completed (Server.CompleteGTIDSet).
func (p *Publisher) historyPhase(ctx context.Context, st *startState) (step, error) {
	if st.of != nil {
		if err := p.checkHistory(st.srv, st.from, sameServer(*st.of, st.ident), st.restart); err != nil {
			return step{}, err
		}
	}
	if !st.restart {
		st.saved = st.from
		p.resume, p.known = st.from, true
	} else if p.cfg.Kafka.ExactlyOnce() {
		from, err := p.committedResume(ctx, st.srv, st.from) // exactly.go
		if err != nil {
			return step{}, err
		}
		st.from, p.resume = from, from
	}
	p.resumeOf = st.ident
	// A stored position written by an older version may lack MariaDB GTID
	// domains known only from the binlog's history (Gtid_list): complete
	// it, so that neither the purged check nor the reader miss them.
	from, err := st.srv.CompleteGTIDSet(st.from)
	if err != nil {
		return step{}, err
	}
	st.from = from
	return step{}, nil
}

// progress follows the reader and the acknowledgements to tell the
// observer whether the publisher is caught up, and keeps the liveness
// ticking. Its methods are called from the reader's and the relay's
// goroutines.
type progress struct {
	p     *Publisher
	mu    sync.Mutex
	acked binlog.Position // newest acknowledged
	idle  binlog.Position // the reader's position at its last heartbeat; zero: busy
	// atEnd: the dump starts at the end of the binlog with everything
	// acknowledged (caught up from the start).
	atEnd bool
	// read: how far the stream read each of its latest binlog files (its
	// heartbeats' and acknowledgements' positions), for the measurement's
	// check that the server's files are still those (binlog.StreamEvidence).
	read map[string]uint32
	// suspect: the files the last measurement found shorter than what was
	// read of them (measureOnce's goroutine only).
	suspect map[string]bool
}

// readTo records that the stream read file up to at (g.mu held). It keeps
// the latest few files only.
func (g *progress) readTo(at binlog.Position) {
	if at.File == "" {
		return
	}
	if g.read == nil {
		g.read = map[string]uint32{}
	}
	g.read[at.File] = max(g.read[at.File], at.Pos)
	for len(g.read) > 4 {
		delete(g.read, slices.MinFunc(slices.Collect(maps.Keys(g.read)), func(a, b string) int {
			return binlog.ComparePos(binlog.Position{File: a}, binlog.Position{File: b})
		}))
	}
}

// readPositions returns how far the stream read its latest files.
func (g *progress) readPositions() []binlog.Position {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]binlog.Position, 0, len(g.read))
	for f, pos := range g.read {
		out = append(out, binlog.Position{File: f, Pos: pos})
	}
	return out
}

// Streaming implements binlog.Observer.
func (g *progress) Streaming() {
	g.p.setPhase(health.Streaming, "")
	g.p.obs.Lag.SourceState(true, g.atEnd)
	g.p.tick()
}

// Idle implements binlog.Observer.
func (g *progress) Idle(at binlog.Position) {
	g.mu.Lock()
	g.idle = at
	g.readTo(at)
	caught := binlog.ComparePos(g.acked, at) >= 0
	g.mu.Unlock()
	g.p.obs.Lag.SourceState(true, caught)
	if caught {
		g.p.obs.Lag.SetBytesBehind(0)
	}
	g.p.tick()
}

// caughtUp reports whether everything the reader read up to its last
// heartbeat is acknowledged.
func (g *progress) caughtUp() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.idle.IsZero() && binlog.ComparePos(g.acked, g.idle) >= 0
}

func (g *progress) ack(a sink.Ack) {
	g.mu.Lock()
	g.acked = a.End
	g.readTo(a.End)
	caught := !g.idle.IsZero() && binlog.ComparePos(a.End, g.idle) >= 0
	g.mu.Unlock()
	if caught {
		g.p.obs.Lag.SourceState(true, true)
	}
	g.p.tick()
}

// loadMirror returns the checkpoint's copy in the mirror topic, nil when
// there is none.
func (p *Publisher) loadMirror(ctx context.Context) (*checkpoint.Checkpoint, error) {
	b, found, err := p.mirror.Load(ctx, p.store.Key())
	if err != nil {
		return nil, fmt.Errorf("the checkpoint is missing from Redis; reading its copy from %s: %w", p.mirror.Topic(), err)
	}
	if !found {
		return nil, nil
	}
	c, err := checkpoint.Parse(p.store.Key(), b)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint's copy in %s: %w", p.mirror.Topic(), err)
	}
	return c, nil
}

// legacy reports whether cfg reads the single im table of before mappings
// (router.topic is then its topic).
func legacy(cfg config.Config) bool {
	ts, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic)
	return err == nil && ts.Legacy()
}

// Tables is Checked without the tables found: what the reader needs.
func Tables(cfg config.Config, srv tableServer) (*binlog.TableSet, []string, error) {
	tables, _, cols, err := Checked(cfg, srv)
	return tables, cols, err
}

// tableNames returns the source's outbox tables ("schema.table") found at
// start, for the metrics: source.schema/source.table, or those of
// source.tables on the server now (none when they cannot be read: Tables
// reports why).
func tableNames(cfg config.Config, srv tableServer) []string {
	ts, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic)
	if err != nil {
		return nil
	}
	if ts.Legacy() || len(cfg.Source.Tables) == 0 {
		return []string{cfg.Source.Schema + "." + cfg.Source.Table}
	}
	found, _ := srv.CheckTables(ts)
	names := make([]string, len(found))
	for i, t := range found {
		names[i] = t.String()
	}
	return names
}

// first decides where the first pipeline start begins (Decide): it sets
// st.from, the position to stream from, and, when it is a stored
// checkpoint's (Redis's or the mirror's), st.of, the server that
// checkpoint was written for (nil for a start option or a backfill: a
// position just resolved on the server); the step wants the position
// stored as the checkpoint unless it was already (a Redis resume).
func (p *Publisher) first(ctx context.Context, st *startState) (step, error) {
	cfg := p.cfg
	srv, cp, mcp := st.srv, st.cp, st.mcp
	var err error
	f := Facts{Checkpoint: cp, Key: p.store.Key(), Server: checkpoint.Source{ServerID: srv.ServerID(), ServerUUID: srv.ServerUUID(), Flavor: srv.Flavor()},
		PositionMode: cfg.Source.PositionMode, Start: cfg.Source.Start, ExplicitStart: p.opts.ExplicitStart,
		Backfill: cfg.Source.Backfill || p.opts.Backfill, BackfillFlag: p.opts.Backfill, Recover: cfg.Checkpoint.Recover,
		Topic: cfg.Router.Topic, Template: strings.Contains(cfg.Router.Topic, "{")}
	if ts, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic); err == nil {
		f.Topic, f.Template = StartTopic(ts)
	}
	if mcp != nil {
		f.Mirror, f.MirrorTopic = mcp, p.mirror.Topic()
	}
	if cfg.Kafka.ExactlyOnce() {
		f.ExactlyOnce = true
		if f.Committed, err = p.committed(ctx); err != nil { // exactly.go
			return step{}, err
		}
	}
	if NeedsHeads(f) {
		heads, err := p.topics.NewestHeaders(ctx, f.Topic)
		if err != nil {
			return step{}, err
		}
		f.Heads = heads
	}
	if cp != nil {
		p.obs.Lag.SeedCommitTime(cp.EventTime)
	}
	p.obs.Series.SetTables(tableNames(cfg, srv)...)
	if !f.Template {
		p.obs.Series.InitTopics(f.Topic)
	}
	if cfg.Kafka.OnPoison == sink.PolicyDeadLetter {
		p.obs.Series.SetDeadLetterTopic(cfg.Kafka.DeadLetterTopic)
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
		return step{}, err
	}
	switch d.Action {
	case Resume:
		st.from = d.At
		stored := cp
		var s step
		if d.FromMirror {
			stored = f.Mirror
			s.writes = []checkpoint.Intent{{Why: "mirror resume", At: d.At, Partitions: f.Mirror.Partitions}}
		}
		st.of = &checkpoint.Source{ServerID: stored.ServerID, ServerUUID: stored.ServerUUID, Flavor: stored.Flavor}
		return s, nil
	case Backfill:
		return p.backfill(ctx, st)
	}
	start, err := binlog.ParseStart(d.Start)
	if err != nil {
		return step{}, fmt.Errorf("%w: %w", ErrRecover, err)
	}
	from, err := p.resolveStart(srv, start)
	if err != nil {
		return step{}, fmt.Errorf("no checkpoint under Redis key %s: %w", p.store.Key(), err)
	}
	// A start the server cannot serve (purged, a GTID set it does not
	// know) is refused before it is stored: a corrected --start then still
	// applies.
	if pg, err := srv.CheckResume(from); err != nil {
		return step{}, err
	} else if pg != nil && (cfg.Source.OnPurged == "" || cfg.Source.OnPurged == binlog.OnPurgedFail) && cfg.Source.Archive == "" {
		return step{}, fmt.Errorf("start %s: %w", from.Text(), pg.Err())
	}
	// Store the start at once: a crash before the first acknowledgement
	// then resumes here instead of finding no checkpoint (and a later
	// "latest" would skip what came since).
	st.from = from
	return step{writes: []checkpoint.Intent{write("first start", from)}, applied: func() {
		p.log.Info(startedMsg(d, f.Start), zap.String("key", p.store.Key()),
			zap.String("start", d.Start), zap.String("file", from.File), zap.Uint32("pos", from.Pos), zap.String("gtid_set", from.GTIDSet))
	}}, nil
}

// stream runs src → writer → committer with Run, keeping p.resume at the
// acknowledged position and the partition counts of topics first written.
// pace, when not nil, is the one src tells of its linger pauses
// (rawconn.Pace): the Writer holds its produce answers' wake-ups in them.
func (p *Publisher) stream(ctx context.Context, name string, src Source, budget Releaser, pace sink.Pacer, cpw *checkpoint.Writer, saved binlog.Position, atEnd bool) error {
	cfg := p.cfg
	writer := sink.NewWriter(cfg.Kafka.Transactional(p.store.Key()), router.New(cfg.Router, cfg.ReservedTopics()), router.Balancer(), p.log)
	writer.SetObserver(p.obs.Sink)
	p.obs.InFlight.SetInFlight(writer.OldestInFlight)
	writer.PinPartitions(p.parts)
	if pace != nil {
		writer.SetPace(pace)
	}
	committer := checkpoint.NewCommitter(cpw, cfg.Checkpoint.Interval, cfg.Checkpoint.Timeout, saved, p.log)
	committer.SetObserver(p.obs.Checkpoint)
	prog := &progress{p: p, acked: saved, atEnd: atEnd}
	if atEnd {
		prog.idle = saved
	}
	files := &fileTimes{}
	mctx, stopMeasure := context.WithCancel(ctx)
	// The measurement ends the run (Run's shutdown: what was read is
	// flushed and checkpointed) with a *binlog.HistoryError when the
	// server's files show that the binlog changed under the stream.
	rctx, endRun := context.WithCancelCause(ctx)
	defer endRun(nil)
	var measuring errgroup.Group
	if r, ok := src.(*binlog.Reader); ok {
		r.SetObserver(prog)
		r.SetFileObserver(files)
		// A caught-up source silent for two heartbeats and a second is
		// frozen, not idle.
		p.obs.Heard.SetHeard(r.LastHeard, 2*cfg.Source.HeartbeatPeriod+time.Second)
		measuring.Go(func() error { p.measure(mctx, committer, prog, files, endRun); return nil })
	}
	err := Run(rctx, Stages{Name: name, Source: src, Writer: writer, Committer: committer, Budget: budget, OnAck: prog.ack}, cfg.ShutdownTimeout, p.log)
	stopMeasure()
	_ = measuring.Wait()
	if cause := context.Cause(rctx); err == nil && ctx.Err() == nil && errors.Is(cause, binlog.ErrHistory) {
		err = cause
	}
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
// --accept-partition-change, which wants the new counts stored at once
// (the intent returned, with the checkpoint's own position and server).
// A missing router.topic (ErrTopicMissing) refuses at once when cp
// exists; without one it is returned as missing, for topicsPhase to
// refuse once the first checkpoint is stored.
func (p *Publisher) checkPartitions(ctx context.Context, cp *checkpoint.Checkpoint) (_ *checkpoint.Intent, missing, _ error) {
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
			return nil, nil, err
		}
		for t := range ref {
			if !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	now, err := p.topics.PartitionCounts(ctx, topics)
	if err != nil {
		return nil, nil, err
	}
	if t := p.cfg.Router.Topic; p.parts == nil && !strings.Contains(t, "{") && !p.cfg.Kafka.AllowAutoTopicCreation && p.cfg.Kafka.MissingTopic != sink.MissingTopicCreate && legacy(p.cfg) {
		// Under kafka.missing-topic: create the Writer creates it at the
		// first record, as it does a routed topic.
		if _, ok := now[t]; !ok {
			missing = fmt.Errorf("%w: router.topic %s on %s: create it with the partition count you want (kafka-topics.sh --create --topic %s --partitions N), "+
				"or set kafka.missing-topic: %s to have run create it (kafka.topic-creation)",
				ErrTopicMissing, t, strings.Join(p.cfg.Kafka.Brokers, ","), t, sink.MissingTopicCreate)
			if cp != nil {
				return nil, nil, missing
			}
		}
	}
	changes := PartitionChanges(ref, now)
	first := p.parts == nil
	if len(changes) > 0 && (!first || !p.opts.AcceptPartitionChange) {
		return nil, nil, PartitionChangeError(p.store.Key(), changes)
	}
	p.parts = now
	if len(changes) == 0 {
		return nil, missing, nil
	}
	for _, c := range changes {
		p.log.Warn("partition count change accepted (--accept-partition-change): per-conversation order is not kept across it",
			zap.String("topic", c.Topic), zap.Int("stored", c.Stored), zap.Int("now", c.Now))
	}
	// Stored at once, with the checkpoint's own position and server.
	return &checkpoint.Intent{Why: "partition change", At: cp.Position(), Partitions: now,
		Source: &checkpoint.Source{ServerID: cp.ServerID, ServerUUID: cp.ServerUUID, Flavor: cp.Flavor}}, missing, nil
}

// writer returns a checkpoint Writer for the server src carrying the
// Fence, if any; existed: the key was loaded or written before (a missing
// key is then checkpoint.ErrVanished).
func (p *Publisher) writer(src checkpoint.Source, parts map[string]int, existed bool) *checkpoint.Writer {
	w := checkpoint.NewWriter(p.store, src, parts)
	if f := p.opts.Fence; f != nil {
		w.SetFence(&checkpoint.Fence{LeaseKey: checkpoint.LeaseKey(p.store.Key()), Owner: f.Owner(), Token: f.Token()})
	}
	w.SetExisted(existed)
	if p.mirror != nil {
		w.SetMirror(p.mirror, p.cfg.Checkpoint.MirrorInterval, func(err error) {
			p.obs.Checkpoint.CheckpointMirrorFailed()
			if ok, n := p.mirrorWarn.Allow(time.Now()); ok {
				p.log.Warn("cannot copy the checkpoint to the mirror topic; Redis has it, a lost Redis key would resume from the older copy (more duplicates, nothing lost)",
					zap.Error(err), zap.Int("suppressed", n), zap.Uint64("failed_copies", w.MirrorFailures()))
			}
		})
	}
	return w
}
