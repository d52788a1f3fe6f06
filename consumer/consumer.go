package consumer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Handler handles one record. Calls for one partition are sequential, in
// offset order; calls for different partitions run concurrently. A handler
// should return promptly when ctx ends (the partition was revoked or Run is
// stopping). An error is retried (Config.HandlerAttempts), then stops Run.
type Handler interface {
	Handle(ctx context.Context, r *Record) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, r *Record) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, r *Record) error { return f(ctx, r) }

// Options are a Consumer's collaborators; all optional.
type Options struct {
	// Store finds duplicates beyond the in-memory window (RedisStore).
	Store Store
	// OnGap is called before the record after a gap is handled; an error
	// stops Run with a *GapError. Without it, gaps are logged (Warn).
	OnGap func(ctx context.Context, g Gap) error
	// OnInvalid receives records Decode refused (other producers' records),
	// e.g. to dead-letter them; an error stops Run. Without it they are
	// logged (Error), counted and skipped.
	OnInvalid func(ctx context.Context, m kafka.Message, err error) error
	// Logger defaults to zap.NewNop(); the Consumer names it "consumer".
	Logger *zap.Logger
	// Metrics defaults to unregistered metrics (NewMetrics(nil)).
	Metrics *Metrics
}

// Consumer reads the publisher's topics as one member of a consumer group.
type Consumer struct {
	cfg     Config
	handler Handler
	opts    Options
	log     *zap.Logger
	metrics *Metrics
	dialer  *kafka.Dialer // Config's TLS and SASL, the group's connections
	kcfg    sink.Config   // Config's brokers, TLS and SASL, the partition readers'

	// parts outlive generations so that a partition assigned again at the
	// offset this process reached keeps its sequence state. Only Run's
	// goroutine touches the map.
	parts map[topicPartition]*partition
}

type topicPartition struct {
	topic string
	id    int
}

// New returns a Consumer for cfg (zero fields defaulted, then validated:
// the error names every invalid field).
func New(cfg Config, h Handler, opts Options) (*Consumer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("consumer: handler is nil")
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	m := opts.Metrics
	if m == nil {
		m = NewMetrics(nil)
	}
	kcfg := sink.Config{Brokers: cfg.Brokers, TLS: secure.TLS(cfg.TLS), SASL: cfg.SASL, DialTimeout: cfg.DialTimeout}
	sec := sink.NewSecurity(kcfg)
	if sec.Insecure() {
		log.Warn("consumer.tls.insecure-skip-verify is on: the brokers' certificates are not checked (for tests only)")
	}
	return &Consumer{cfg: cfg, handler: h, opts: opts, log: log.Named("consumer"), metrics: m,
		dialer: sec.Dialer(cfg.DialTimeout), kcfg: kcfg, parts: make(map[topicPartition]*partition)}, nil
}

// Run joins the group and handles records until ctx ends (then it commits
// what was handled, leaves the group and returns nil) or a record fails
// (*HandlerError, *StoreError, *GapError, or OnInvalid's error; what was
// handled before it is committed). Errors joining the group are retried
// (kafka-go backs off Config's JoinGroupBackoff, 5 s), but for a broker
// refusing the TLS certificates or the SASL login (*sink.SecurityError,
// naming the setting to fix), which Run returns. Run may be called again
// after it returned.
func (c *Consumer) Run(ctx context.Context) error {
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                c.cfg.Group,
		Brokers:           c.cfg.Brokers,
		Topics:            c.cfg.Topics,
		StartOffset:       c.cfg.startOffset(),
		SessionTimeout:    c.cfg.SessionTimeout,
		RebalanceTimeout:  c.cfg.RebalanceTimeout,
		HeartbeatInterval: c.cfg.HeartbeatInterval,
		Dialer:            c.dialer,
		ErrorLogger:       kafka.LoggerFunc(c.log.Named("group").Sugar().Debugf),
	})
	if err != nil {
		return err
	}
	defer cg.Close()
	c.log.Info("joining group", zap.String("group", c.cfg.Group), zap.Strings("topics", c.cfg.Topics),
		zap.String("isolation", c.cfg.Isolation), zap.Stringer("layout", c.cfg.Layout))
	if !c.cfg.Layout.HasSeqNo() {
		c.log.Info("the layout has no sequence number: records are handled in offset order only (the publisher's order per key), gap detection is off",
			zap.String("preset", c.cfg.Layout.Preset))
	}
	for {
		gen, err := cg.Next(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, kafka.ErrGroupClosed):
			return nil
		case errors.Is(err, sink.ErrSecurity):
			// A certificate or login the broker refused: no retry fixes it.
			return err
		case err != nil:
			// Coordinator not available yet, rebalance in progress, broker
			// down: the group retries with its backoff.
			c.log.Debug("joining group", zap.Error(err))
			continue
		}
		if err := c.generation(ctx, gen); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// generation reads the assigned partitions (fetchAll: one Fetch per
// leader broker) and runs one partition loop per assigned partition,
// handling its records in order, until the
// generation ends (rebalance), ctx ends or a partition fails, committing
// every CommitInterval and once more at the end, before the generation is
// let go (the group waits for the function given to gen.Start).
func (c *Consumer) generation(ctx context.Context, gen *kafka.Generation) error {
	var parts []*partition
	wake := &waker{}
	committed := map[*partition]int64{}
	for topic, as := range gen.Assignments {
		for _, a := range as {
			tp := topicPartition{topic, a.ID}
			p := c.parts[tp]
			// Keep the sequence state only when no one else handled records
			// of this partition since this process did (0 <= offset <= done);
			// the dedupe window stays valid either way.
			if p == nil {
				p = c.newPartition(topic, a.ID)
				c.parts[tp] = p
			} else if a.Offset < 0 || a.Offset > p.done.Load() {
				p.last = newLRU[convKey, int64](c.cfg.Conversations)
			}
			p.done.Store(-1)
			committed[p] = a.Offset
			parts = append(parts, p)
			p.log.Debug("assigned", zap.Int64("offset", a.Offset), zap.Int32("generation", gen.ID))
			p.queue = make(chan fetched, c.cfg.QueueCapacity)
			p.queued.Store(0)
			p.wake = wake
			p.offset, p.retryAt, p.backoff = a.Offset, time.Time{}, 0
		}
	}

	// ended closes when the group ends the generation; flushed tells the
	// group's function that the final commit is done; stop lets it go when
	// this side ends first.
	ended, flushed, stop := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var stopOnce sync.Once
	release := func() { stopOnce.Do(func() { close(stop) }) }
	gen.Start(func(gctx context.Context) {
		select {
		case <-gctx.Done():
		case <-stop:
		}
		close(ended)
		<-flushed
	})

	commit := func() {
		offsets := map[string]map[int]int64{}
		var todo []*partition
		for _, p := range parts {
			if d := p.done.Load(); d >= 0 && d > committed[p] {
				if offsets[p.topic] == nil {
					offsets[p.topic] = map[int]int64{}
				}
				offsets[p.topic][p.id] = d
				todo = append(todo, p)
			}
		}
		if len(todo) == 0 {
			return
		}
		if err := gen.CommitOffsets(offsets); err != nil {
			// The next commit, or the next owner's, carries it; a record
			// handled but not committed comes back and is deduped.
			c.log.Warn("offset commit failed", zap.Int32("generation", gen.ID), zap.Error(err))
			return
		}
		for _, p := range todo {
			committed[p] = offsets[p.topic][p.id]
			c.metrics.commit(p.topic, p.id, committed[p])
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		select {
		case <-ended:
			return errGenerationEnded
		case <-gctx.Done():
			return nil
		}
	})
	g.Go(func() error { return c.fetchAll(gctx, parts, wake) })
	for _, p := range parts {
		g.Go(func() error { return p.run(gctx) })
	}
	g.Go(func() error {
		t := time.NewTicker(c.cfg.CommitInterval)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
				commit()
			}
		}
	})
	err := g.Wait()
	commit()
	close(flushed)
	release()
	if errors.Is(err, errGenerationEnded) {
		c.log.Debug("generation ended", zap.Int32("generation", gen.ID))
		return nil
	}
	return err
}

var errGenerationEnded = errors.New("generation ended")

// run processes the partition's prefetched records in order until ctx
// ends or a record fails; the generation's fetchAll fills the queue.
func (p *partition) run(ctx context.Context) error {
	capacity := int64(p.c.cfg.QueueCapacity)
	for {
		var f fetched
		select {
		case <-ctx.Done():
			return nil
		case f = <-p.queue:
		}
		if n := p.queued.Add(-f.weight()); n < capacity && n+f.weight() >= capacity {
			p.wake.wake() // it was paused: fetch it again
		}
		for _, m := range f.msgs {
			if err := p.process(ctx, m); err != nil {
				var se *StoreError
				if ctx.Err() != nil && !(errors.As(err, &se) && se.Op == "mark") {
					return nil // revoked or stopping: the record comes back
				}
				return err
			}
		}
		if f.next > p.done.Load() {
			p.done.Store(f.next)
		}
	}
}

// fetchFatal reports whether an error of the partition reader ends Run:
// a certificate or login refused (*sink.SecurityError), or a Kafka error
// that is not temporary (kafka.Error.Temporary: authorization failed, an
// unknown codec...). Others (a broker unreachable, a temporary Kafka error
// such as KAFKA_STORAGE_ERROR or NOT_LEADER_OR_FOLLOWER) pass: the reader
// tries again.
func fetchFatal(err error) bool {
	if errors.Is(err, sink.ErrSecurity) {
		return true
	}
	if errors.Is(err, kafka.OffsetOutOfRange) {
		return false // past the end: the log was truncated, or is catching up
	}
	if ke, ok := errors.AsType[kafka.Error](err); ok {
		return !ke.Temporary()
	}
	return false
}
