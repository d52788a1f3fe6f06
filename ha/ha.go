package ha

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/health"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/lease"
	"github.com/cdc-outbox/cdc-outbox/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Options are what Run needs besides the configuration.
type Options struct {
	// Owner is this instance's id (lease.NewOwner() when empty).
	Owner string
	// Publisher: the options of every source's Publisher (Fence is set
	// per ownership term). Its start options (ExplicitStart, Backfill,
	// AcceptPartitionChange) are for StartSource alone (PublisherOptions).
	Publisher pipeline.Options
	// StartSource names the source run's start options are for
	// (config.Config.ApplyRun); "": every source (one source configured).
	StartSource string
	// Observer, when set, returns the observers of the named source's
	// publishing measurements (e.g. pipeline.ObserversOf of
	// (*health.Metrics).Source: the series labelled source=<name>); may
	// be called again for a source: return the same observers.
	Observer func(source string) pipeline.Observers
	// Forget, when set, is told when a term of the named source ends
	// (its series are then removed until the next term:
	// (*health.Source).Forget).
	Forget func(source string)
	// Health, when set, follows each source's state on this instance
	// (/readyz, cdc_outbox_source_state): Standby while another instance
	// holds its lease and Redis answers, Degraded while Redis has not
	// answered the acquisitions for longer than ha.lease-ttl, Failed once
	// the source stopped fatally; during a term, the Publisher's own
	// states (Starting, Streaming, Degraded while restarting, Stopping).
	Health *health.Sources
	// Registerer, when set, gets the lease metrics (Metrics).
	Registerer prometheus.Registerer
}

// Run publishes every source of cfg until ctx is cancelled: under leases
// when cfg.HA.Enabled, otherwise each source unfenced. It returns nil
// when stopped by ctx with every source stopped cleanly, or the joined
// errors of the sources that failed (each naming its source).
func Run(ctx context.Context, cfg config.Config, opts Options, log *zap.Logger) error {
	if opts.Owner == "" {
		opts.Owner = lease.NewOwner()
	}
	m := NewMetrics(opts.Registerer)
	ps := cfg.Pipelines()
	s := newSupervisor(cfg, opts, log, m, len(ps))
	defer s.stores.close()
	if !cfg.HA.Enabled {
		return s.unfenced(ctx, ps)
	}
	if path := cfg.HA.InstanceFile; path != "" {
		inst, err := lease.ClaimInstance(path, opts.Owner)
		if err != nil {
			return err
		}
		defer inst.Close()
		s.previous = inst.Previous
	}
	group := checkpoint.NewStore(ps[0].Config.Checkpoint)
	defer group.Close()
	if s.previous != "" {
		// The previous process is dead (it held the instance file until
		// it died): it no longer counts as alive, and its leases are ours.
		lctx, cancel := context.WithTimeout(ctx, cfg.HA.RenewEvery())
		_ = lease.Leave(lctx, group.Client(), cfg.HA.Group, s.previous)
		cancel()
		s.log.Info("instance file: taking over at once the leases this instance's previous process still holds",
			zap.String("instance_file", cfg.HA.InstanceFile), zap.String("previous", s.previous))
	}
	s.log.Info("instance starting; sources are published under leases", zap.String("owner", opts.Owner), zap.Int("sources", len(ps)),
		zap.Duration("lease_ttl", cfg.HA.TTL), zap.Duration("renew", cfg.HA.RenewEvery()), zap.Duration("margin", cfg.HA.StopMargin()))
	hctx, stopBeat := context.WithCancel(context.Background())
	var beat errgroup.Group
	beat.Go(func() error { s.heartbeat(hctx, group.Client()); return nil })
	// A first heartbeat before any acquisition, so that instances started
	// together see each other before they take sources.
	s.beatOnce(ctx, group.Client())
	if joinWait(len(ps), s.previous) {
		// Instances started together see each other before taking sources.
		s.log.Info("joining the instances: taking sources after a second heartbeat", zap.Duration("wait", cfg.HA.RenewEvery()))
		select {
		case <-ctx.Done():
		case <-time.After(cfg.HA.RenewEvery()):
			s.beatOnce(ctx, group.Client())
		}
	}
	var g errgroup.Group
	errs := make([]error, len(ps))
	for i, p := range ps {
		g.Go(func() error {
			errs[i] = s.source(ctx, p)
			return nil
		})
	}
	_ = g.Wait()
	stopBeat()
	_ = beat.Wait()
	lctx, cancel := context.WithTimeout(context.Background(), cfg.Checkpoint.Timeout)
	_ = lease.Leave(lctx, group.Client(), cfg.HA.Group, opts.Owner)
	cancel()
	return errors.Join(errs...)
}

type supervisor struct {
	cfg  config.Config
	opts Options
	log  *zap.Logger // Named("ha"): the supervisor's own lifecycle
	root *zap.Logger // Run's logger, unnamed: the publishers' (publisherLog)
	m    *Metrics

	// previous: the id of this instance's previous process (dead), whose
	// leases are taken at once (ha.instance-file); "" none.
	previous string

	mu      sync.Mutex
	sources int // sources still run (a fatally failed one is not)
	alive   int // instances alive in the group, this one included
	owned   int // sources this instance holds
	giving  int // sources being handed over
	trying  int // acquisitions in flight (counted in owned)

	stores stores // the sources' Redis clients, one per Redis
}

// phase returns the named source's phase (nil: no health is followed).
func (s *supervisor) phase(name string) *health.Phase {
	if s.opts.Health == nil {
		return nil
	}
	return s.opts.Health.Source(name)
}

// setPhase sets the named source's state (nothing without Health).
func (s *supervisor) setPhase(name string, st health.State, reason string) {
	if p := s.phase(name); p != nil {
		p.Set(st, reason)
	}
}

// recordStop writes the record of the source's fatal stop (err) for the
// status command (checkpoint.Stop), within checkpoint.timeout; a Redis
// that does not answer leaves it unwritten (the stop is in the log,
// /readyz and the metrics already).
func (s *supervisor) recordStop(store *checkpoint.Store, p config.Named, err error, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), p.Config.Checkpoint.Timeout)
	defer cancel()
	if werr := store.SaveStop(ctx, pipeline.StopRecord(err, s.opts.Owner)); werr != nil {
		log.Debug("the stop record was not written", zap.Error(werr))
	}
}

// heartbeat keeps this instance alive in the group every renew interval.
func (s *supervisor) heartbeat(ctx context.Context, rdb redis.Scripter) {
	t := time.NewTicker(s.cfg.HA.RenewEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.beatOnce(ctx, rdb)
		}
	}
}

func (s *supervisor) beatOnce(ctx context.Context, rdb redis.Scripter) {
	bctx, cancel := context.WithTimeout(ctx, s.cfg.HA.RenewEvery())
	defer cancel()
	n, err := lease.Heartbeat(bctx, rdb, s.cfg.HA.Group, s.opts.Owner, s.cfg.HA.TTL)
	if err != nil {
		return // the leases' own renewals report Redis trouble
	}
	s.mu.Lock()
	s.alive = n
	s.mu.Unlock()
	s.m.alive.Set(float64(n))
}

// source runs one source: standby until its lease is acquired (within
// this instance's share), then a Publisher under it, again and again
// until ctx is cancelled or the source fails fatally.
func (s *supervisor) source(ctx context.Context, p config.Named) error {
	log := s.log.With(zap.String("source", p.Name), zap.String("key", p.Config.Checkpoint.Key))
	store := s.stores.get(p.Config.Checkpoint) // closed by Run
	rdb := store.Client()
	// The server_ids found taken by the terms that ended so in a row
	// (takenIDs), cleared by any other end of a term.
	var taken map[uint32]bool
	acq := &lease.Acquirer{Key: p.Config.Checkpoint.Key, Owner: s.opts.Owner, Prev: s.previous, TTL: s.cfg.HA.TTL}
	s.m.Init(p.Name)
	for {
		s.m.standby.WithLabelValues(p.Name).Set(1)
		l, sent, err := s.acquire(ctx, store, acq, p, log)
		if l == nil {
			if err != nil {
				s.setPhase(p.Name, health.Failed, err.Error())
			}
			return err
		}
		s.m.standby.WithLabelValues(p.Name).Set(0)
		s.m.token.WithLabelValues(p.Name).Set(float64(l.Token()))
		s.m.acquired.WithLabelValues(p.Name).Inc()
		s.setPhase(p.Name, health.Starting, fmt.Sprintf("lease acquired (token %d): connecting to the source", l.Token()))
		err = s.term(ctx, rdb, p, l, sent, log)
		s.mu.Lock()
		s.owned--
		s.mu.Unlock()
		n := s.cfg.HA.ServerIDs
		id := lease.ServerID(p.Config.Source.ServerID, l.Token(), n)
		taken = takenIDs(taken, err, id)
		switch {
		case ctx.Err() != nil:
			if err != nil && !errors.Is(err, pipeline.ErrLeaseLost) {
				return fmt.Errorf("source %s: %w", p.Name, err)
			}
			return nil
		case errors.Is(err, pipeline.ErrLeaseLost) || errors.Is(err, checkpoint.ErrFenced):
			s.m.lost.WithLabelValues(p.Name).Inc()
			log.Warn("lease lost: the source stopped publishing; standing by", zap.Uint64("token", l.Token()), zap.Error(err))
		case len(taken) > 0 && len(taken) < n:
			// A replica that is not this source's publisher (a database
			// replica, another tool) registered with this term's id: the
			// next term's token gives the next id of the range.
			log.Warn("the term's server_id is taken on the source (by another replica, or a registration that outlived source.server-id-wait): the next lease term registers with the next one",
				zap.Uint64("token", l.Token()), zap.Uint32("server_id", id), zap.Int("ids_taken", len(taken)), zap.Int("server_ids", n), zap.Error(err))
		case len(taken) > 0:
			err = fmt.Errorf("%w (every server_id from source.server-id %d to %d was found taken, in lease terms in a row: set source.server-id so that the %d ids from it are free of other replicas and the source's @@server_id, see SHOW SLAVE HOSTS / SHOW REPLICAS)",
				err, p.Config.Source.ServerID, p.Config.Source.ServerID+uint32(n)-1, n)
			log.Error("source stopped: fatal error (the other sources go on)", zap.Error(err))
			s.setPhase(p.Name, health.Failed, err.Error())
			s.recordStop(store, p, err, log)
			s.mu.Lock()
			s.sources--
			s.mu.Unlock()
			return fmt.Errorf("source %s: %w", p.Name, err)
		case errors.Is(err, errFailingHandOver):
			// Let an instance that reaches the source take it: wait a TTL
			// (a standby tries every renew interval) before trying again.
			wait := s.cfg.HA.TTL
			s.setPhase(p.Name, health.Degraded, fmt.Sprintf("handed the source over after its pipeline kept failing here; acquiring again in %s", wait))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		case err != nil && pipeline.IsFatal(err):
			log.Error("source stopped: fatal error (the other sources go on)", zap.Error(err))
			s.setPhase(p.Name, health.Failed, err.Error())
			s.recordStop(store, p, err, log)
			s.mu.Lock()
			s.sources--
			s.mu.Unlock()
			return fmt.Errorf("source %s: %w", p.Name, err)
		case err != nil:
			log.Warn("source stopped; standing by", zap.Error(err))
		}
	}
}

// takenIDs returns the server_ids found taken by the terms that ended so
// in a row, after a term registering as id ended with err: id added when
// err is only server_id conflicts (onlyServerID: not with another fatal
// error, such as a missing privilege, beside them), and to a fresh set
// when the conflict came while streaming (a *binlog.PositionError: a newer
// registrant with our id made the server end our dump, MariaDB ERROR
// 4052), as the id was free until then; nil (cleared) after any other
// end. The source gives up when the set holds every id of the range.
func takenIDs(taken map[uint32]bool, err error, id uint32) map[uint32]bool {
	if err == nil || !onlyServerID(err) {
		return nil
	}
	if _, streaming := errors.AsType[*binlog.PositionError](err); streaming || taken == nil {
		taken = map[uint32]bool{}
	}
	taken[id] = true
	return taken
}

// onlyServerID reports whether err consists of server_id conflicts only
// (binlog.ErrServerID, every branch of a joined error).
func onlyServerID(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs := j.Unwrap()
		for _, e := range errs {
			if !onlyServerID(e) {
				return false
			}
		}
		return len(errs) > 0
	}
	if err == binlog.ErrServerID {
		return true
	}
	if u := errors.Unwrap(err); u != nil {
		return onlyServerID(u)
	}
	return false
}

// acquire waits, as a standby, until this instance may and does take
// the source's lease; nil when ctx is cancelled.
func (s *supervisor) acquire(ctx context.Context, store *checkpoint.Store, acq *lease.Acquirer, p config.Named, log *zap.Logger) (*lease.Lease, time.Time, error) {
	rdb := store.Client()
	every := s.cfg.HA.RenewEvery()
	logged := ""
	// Redis trouble: since when the acquisitions fail (zero: they do
	// not), and the warnings' limiter.
	var failing time.Time
	warn := logging.NewLimiter(time.Minute, 1)
	for {
		s.mu.Lock()
		may := lease.MayAcquire(s.owned, s.sources, s.alive)
		// Only other sources' acquisitions in flight fill the share: most
		// may find their lease held, so look again soon, not a renew
		// interval later (with many sources, a takeover took rounds).
		busy := !may && lease.MayAcquire(s.owned-s.trying, s.sources, s.alive)
		if may {
			s.owned++ // reserved while acquiring
			s.trying++
		}
		s.mu.Unlock()
		if busy {
			select {
			case <-ctx.Done():
				return nil, time.Time{}, nil
			case <-time.After(every / 20):
			}
			continue
		}
		if may {
			actx, cancel := context.WithTimeout(ctx, every)
			l, holder, sent, err := acq.Acquire(actx, rdb)
			cancel()
			s.mu.Lock()
			s.trying--
			if l == nil {
				s.owned-- // the reservation given back with the attempt
			}
			s.mu.Unlock()
			if l != nil {
				return l, sent, nil
			}
			if err != nil && ctx.Err() == nil {
				// A TLS or login mismatch named with its settings.
				err = store.Explain(ctx, err)
			}
			if err != nil && pipeline.IsFatal(err) {
				// Wrong credentials or TLS settings: waiting cannot help.
				log.Error("cannot acquire the source's lease", zap.Error(err))
				s.mu.Lock()
				s.sources--
				s.mu.Unlock()
				return nil, time.Time{}, fmt.Errorf("source %s: %w", p.Name, err)
			}
			if err != nil {
				now := time.Now()
				if failing.IsZero() {
					failing = now
				}
				cc := p.Config.Checkpoint
				addr := cc.Where()
				if ok, suppressed := warn.Allow(now); ok {
					log.Warn("standing by, but Redis does not answer: this instance cannot take the source's lease; check that Redis is up and that "+cc.AddrKey()+" (and checkpoint.tls, checkpoint.username/password) reach it",
						zap.String("redis", addr), zap.Duration("failing_for", now.Sub(failing).Round(time.Millisecond)), zap.Int("suppressed", suppressed), zap.Error(err))
				}
				if now.Sub(failing) > s.cfg.HA.TTL {
					s.setPhase(p.Name, health.Degraded, fmt.Sprintf("standby that cannot reach Redis at %s (%s) for %s: %v", addr, cc.AddrKey(), now.Sub(failing).Round(time.Second), err))
				}
			} else {
				if !failing.IsZero() {
					log.Info("Redis answers again", zap.String("redis", p.Config.Checkpoint.Where()), zap.Duration("failed_for", time.Since(failing).Round(time.Millisecond)))
					failing = time.Time{}
				}
				s.setPhase(p.Name, health.Standby, "another instance holds the source's lease: "+holder)
				if holder != logged {
					logged = holder
					log.Info("standing by: another instance holds the source's lease", zap.String("holder", holder))
				}
			}
		} else {
			// Not ours to take now; know when its holder's lease would
			// expire, should it vanish later (lease.Acquirer).
			octx, cancel := context.WithTimeout(ctx, every)
			_ = acq.Observe(octx, rdb) // Redis trouble is reported by the acquisitions
			cancel()
			s.setPhase(p.Name, health.Standby, "this instance holds its share of the sources: waiting")
		}
		select {
		case <-ctx.Done():
			return nil, time.Time{}, nil
		case <-time.After(every):
		}
	}
}

// term runs one ownership term: the Publisher under l, the renewals, and
// the hand-over watch; then releases l if it is still this term's.
func (s *supervisor) term(ctx context.Context, rdb redis.Scripter, p config.Named, l *lease.Lease, sent time.Time, log *zap.Logger) error {
	cfg := p.Config
	cfg.Source.ServerID = lease.ServerID(p.Config.Source.ServerID, l.Token(), s.cfg.HA.ServerIDs)
	cfg.Source.ServerIDFrom, cfg.Source.ServerIDCount = p.Config.Source.ServerID, s.cfg.HA.ServerIDs // the range is checked at start
	log.Info("lease acquired: publishing the source", zap.Uint64("token", l.Token()), zap.Uint32("server_id", cfg.Source.ServerID))
	opts := PublisherOptions(s.opts.Publisher, s.opts.StartSource, p.Name)
	opts.Fence = l
	ph := s.phase(p.Name)
	if ph == nil {
		ph = health.NewPhase("connecting to the source") // the hand-over watch reads it
	}
	opts.Phase = ph
	obs := s.observer(p.Name)
	if s.opts.Forget != nil {
		// The series of a source are the owner's: a standby exposes none.
		defer s.opts.Forget(p.Name)
	}
	pub := pipeline.NewPublisher(cfg, opts, obs, s.publisherLog(p.Name))
	tctx, handover := context.WithCancel(ctx)
	defer handover()
	var g errgroup.Group
	g.Go(func() error { lease.Keep(tctx, rdb, l, sent, s.cfg.HA, log); return nil })
	handed, failing := false, false
	g.Go(func() error {
		t := time.NewTicker(s.cfg.HA.RenewEvery())
		defer t.Stop()
		for {
			select {
			case <-tctx.Done():
				return nil
			case now := <-t.C:
				r := ph.Readiness()
				s.mu.Lock()
				alive := s.alive
				s.mu.Unlock()
				if lease.HandOver(r.State == health.Degraded, r.Since, now, s.cfg.HA.HandOverAfter, alive) {
					failing = true
					log.Warn("handing the source over: its pipeline has been failing on this instance for longer than ha.handover-after; another instance may reach what this one cannot",
						zap.Uint64("token", l.Token()), zap.Duration("failing_for", now.Sub(r.Since).Round(time.Second)), zap.String("reason", r.Reason),
						zap.Duration("handover_after", s.cfg.HA.HandOverAfter), zap.Int("instances_alive", alive))
					handover()
					return nil
				}
				s.mu.Lock()
				give := lease.Excess(s.owned-s.giving, s.sources, s.alive) > 0
				if give {
					s.giving++
				}
				s.mu.Unlock()
				if give {
					handed = true
					log.Info("handing the source over: more instances are alive than when it was taken", zap.Uint64("token", l.Token()))
					handover()
					return nil
				}
			}
		}
	})
	err := pub.Run(tctx)
	handover()
	_ = g.Wait()
	if handed {
		s.mu.Lock()
		s.giving--
		s.mu.Unlock()
	}
	select {
	case <-l.Lost():
	default:
		rctx, cancel := context.WithTimeout(context.Background(), cfg.Checkpoint.Timeout)
		if ok, rerr := lease.Release(rctx, rdb, l); rerr == nil && ok {
			log.Info("lease released", zap.Uint64("token", l.Token()))
		}
		cancel()
	}
	if handed && ctx.Err() == nil && err == nil {
		return nil
	}
	if failing && ctx.Err() == nil && (err == nil || !pipeline.IsFatal(err)) {
		// Stopped by the hand-over (perhaps in the middle of a failing
		// attempt, whose error is the one it gave up on).
		return errFailingHandOver
	}
	return err
}

// errFailingHandOver: a term ended because its pipeline kept failing
// (ha.handover-after); the instance waits before acquiring again.
var errFailingHandOver = errors.New("handed over: the pipeline kept failing on this instance")

// PublisherOptions returns the options of source name's Publisher: o,
// without its start options (ExplicitStart, Backfill,
// AcceptPartitionChange) unless they are for name (startSource; "": for
// every source).
func PublisherOptions(o pipeline.Options, startSource, name string) pipeline.Options {
	if startSource != "" && startSource != name {
		o.ExplicitStart, o.Backfill, o.AcceptPartitionChange = false, false, false
		o.BackfillProgress = nil
	}
	return o
}

// newSupervisor returns the supervisor of n sources, logging through log.
func newSupervisor(cfg config.Config, opts Options, log *zap.Logger, m *Metrics, n int) *supervisor {
	return &supervisor{cfg: cfg, opts: opts, log: log.Named("ha"), root: log, m: m, sources: n, alive: 1}
}

// publisherLog is the logger of source name's Publisher: Run's logger
// with the source field only. The publisher names its own stages (binlog,
// sink, checkpoint) and adds the checkpoint key where it matters, so
// neither the "ha" name nor the key of the supervisor's per-source logger
// is passed on (zap would repeat a field given twice).
func (s *supervisor) publisherLog(name string) *zap.Logger {
	return s.root.With(zap.String("source", name))
}

// observer returns source name's observers (none observing: zero).
func (s *supervisor) observer(name string) pipeline.Observers {
	if s.opts.Observer == nil {
		return pipeline.Observers{}
	}
	return s.opts.Observer(name)
}

// unfenced runs every source without a lease (ha.enabled: false).
func (s *supervisor) unfenced(ctx context.Context, ps []config.Named) error {
	errs := make([]error, len(ps))
	var g errgroup.Group
	for i, p := range ps {
		g.Go(func() error {
			log := s.log.With(zap.String("source", p.Name))
			opts := PublisherOptions(s.opts.Publisher, s.opts.StartSource, p.Name)
			if ph := s.phase(p.Name); ph != nil {
				opts.Phase = ph
			}
			if err := pipeline.NewPublisher(p.Config, opts, s.observer(p.Name), s.publisherLog(p.Name)).Run(ctx); err != nil {
				if len(ps) > 1 {
					log.Error("source stopped: fatal error (the other sources go on)", zap.Error(err))
				}
				errs[i] = fmt.Errorf("source %s: %w", p.Name, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}
