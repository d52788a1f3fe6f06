package checkpoint

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Ack is an acknowledged position as the Committer receives it.
type Ack struct {
	// End: everything before it was acknowledged by Kafka.
	End binlog.Position
	// Partitions: when set, the partition count of every topic written so
	// far, stored with the following checkpoints (nil: unchanged).
	Partitions map[string]int
}

// Observer learns the outcome of each checkpoint write (the health
// metrics' checkpoint age and write errors) and of each copy to the
// mirror topic (Writer.SetMirror); it must not block.
type Observer interface {
	CheckpointSaved(p binlog.Position)
	CheckpointFailed()
	// CheckpointMirrorFailed counts one failed copy to the mirror topic
	// (checkpoint.mirror-topic): Redis still has the checkpoint, but a
	// lost Redis key would resume from the older copy.
	CheckpointMirrorFailed()
}

// Committer saves acknowledged positions through a Writer, periodically.
type Committer struct {
	obs      Observer
	w        *Writer
	interval time.Duration
	timeout  time.Duration
	log      *zap.Logger
	warn     *logging.Limiter

	mu    sync.Mutex
	acked binlog.Position // newest acknowledged position
	saved binlog.Position // newest position written
}

// NewCommitter returns a Committer writing through w every interval, each
// write bounded by timeout. saved is the position already stored (zero
// when none).
func NewCommitter(w *Writer, interval, timeout time.Duration, saved binlog.Position, log *zap.Logger) *Committer {
	return &Committer{w: w, interval: interval, timeout: timeout, log: log.Named("checkpoint"),
		warn: logging.NewLimiter(10*time.Second, 1), acked: saved, saved: saved}
}

// SetObserver makes the Committer report each write to o. Call it before
// Run.
func (c *Committer) SetObserver(o Observer) { c.obs = o }

// Acked returns the newest acknowledged position: everything before it is
// in Kafka, whether or not it is stored yet.
func (c *Committer) Acked() binlog.Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked
}

// MirrorFailures returns how many copies to the mirror failed
// (Writer.MirrorFailures).
func (c *Committer) MirrorFailures() uint64 { return c.w.MirrorFailures() }

// Saved returns the newest position written.
func (c *Committer) Saved() binlog.Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saved
}

// Run consumes acknowledged positions, writing the newest one every
// interval, and once more when acks is closed or ctx is cancelled (the
// final write, whose error Run returns). A failed periodic write is logged
// (rate-limited) and retried at the next interval while publishing goes
// on; the stored position then lags, so a restart would publish more
// duplicates, but never skips anything. A refused write (ErrFenced: the
// lease was lost; ErrBackwards: another publisher writes the key) ends
// Run at once with that error: this publisher must stop. A key found
// missing (ErrVanished) is logged as an error, and was written again.
//
// With a mirror (Writer.SetMirror), a copier goroutine owned by Run
// copies the newest position stored to it every mirror interval, each
// copy bounded by timeout, so that a slow or failing copy (a paused
// broker) never holds the acknowledgements: the copy may lag, it is a
// lower bound anyway. A failed copy is retried after interval, then
// after twice as long, up to the mirror interval. The final write tries
// the copy once more (bounded) after the copier stopped.
func (c *Committer) Run(ctx context.Context, acks <-chan Ack) error {
	stopCopier := c.startCopier(ctx)
	defer stopCopier()
	// The periodic writes run apart from the acknowledgements, so that a
	// slow or unreachable Redis (each write waits up to timeout) never
	// holds them: the writer goes on publishing, the stored position lags.
	refused := make(chan error, 1)
	sctx, cancelSaver := context.WithCancel(ctx)
	var saver errgroup.Group
	saver.Go(func() error { c.saveEvery(sctx, refused); return nil })
	stop := func() {
		cancelSaver()
		_ = saver.Wait()
		stopCopier()
	}
	defer stop()
	final := func() error {
		stop()
		return c.final()
	}
	for {
		select {
		case a, ok := <-acks:
			if !ok {
				return final()
			}
			c.take(a)
		case err := <-refused:
			return err
		case <-ctx.Done():
			// Take what was already reported, then write it.
			for {
				select {
				case a, ok := <-acks:
					if ok {
						c.take(a)
						continue
					}
				default:
				}
				return final()
			}
		}
	}
}

// saveEvery writes the newest acknowledged position every interval until
// ctx ends; a refused write is sent on refused (buffered) and ends it.
func (c *Committer) saveEvery(ctx context.Context, refused chan<- error) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.save(ctx); Refused(err) {
				refused <- err
				return
			} else if err != nil && ctx.Err() == nil {
				c.warnFailed(err)
			}
		}
	}
}

// startCopier starts the copier (copyEvery) when the Writer has a mirror
// and returns the function that stops it and waits for it (idempotent).
func (c *Committer) startCopier(ctx context.Context) (stop func()) {
	if c.w.mirror == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var g errgroup.Group
	every := c.w.mirrorEvery
	if every <= 0 {
		every = c.interval
	}
	g.Go(func() error { c.copyEvery(ctx, every); return nil })
	return func() {
		cancel()
		_ = g.Wait()
	}
}

// copyEvery copies the newest position stored to the mirror every
// `every` until ctx ends; after a failure it tries again sooner
// (copyRetry).
func (c *Committer) copyEvery(ctx context.Context, every time.Duration) {
	wait := every
	t := time.NewTimer(wait)
	defer t.Stop()
	failed := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		err := c.w.copyLatest(cctx)
		cancel()
		if ctx.Err() != nil {
			return // stopped: the final write copies
		}
		if err != nil {
			c.w.mirrorFailed(err)
		}
		failed, wait = copyRetry(err != nil, failed, c.interval, every)
		t.Reset(wait)
	}
}

// copyRetry returns the wait before the next copy to the mirror: every
// after a success; after a failure interval, then twice the previous
// wait after a failure, up to every. failed is the previous wait after a
// failure (0: the last copy succeeded); it returns the new one.
func copyRetry(err bool, failed, interval, every time.Duration) (nextFailed, wait time.Duration) {
	if !err {
		return 0, every
	}
	wait = interval
	if failed > 0 {
		wait = 2 * failed
	}
	wait = min(wait, every)
	return wait, wait
}

// Refused reports whether err is a write the store refused (ErrFenced,
// ErrBackwards): the writer is not the one that should be publishing.
func Refused(err error) bool {
	return errors.Is(err, ErrFenced) || errors.Is(err, ErrBackwards)
}

func (c *Committer) take(a Ack) {
	if a.Partitions != nil {
		c.w.AddPartitions(a.Partitions)
	}
	c.mu.Lock()
	c.acked = a.End
	c.mu.Unlock()
}

func (c *Committer) final() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.timeout)
	defer cancel()
	before := c.Saved()
	if err := c.saveWith(ctx, c.w.periodic); err != nil {
		return err
	}
	// The newest value stored, unless copied already (the copier may have
	// lagged or failed): one try, within what ctx leaves.
	if err := c.w.copyLatest(ctx); err != nil {
		c.w.mirrorFailed(err)
	}
	if p := c.Saved(); p != before {
		c.log.Info("checkpoint written", zap.String("file", p.File), zap.Uint32("pos", p.Pos), zap.String("gtid_set", p.GTIDSet))
	}
	return nil
}

// save writes the newest acknowledged position if it is new (periodic:
// Redis only; the copier copies it to the mirror). A vanished key
// (written again) is logged here, as an error, and not returned.
func (c *Committer) save(ctx context.Context) error { return c.saveWith(ctx, c.w.periodic) }

func (c *Committer) saveWith(ctx context.Context, write func(context.Context, binlog.Position) error) error {
	c.mu.Lock()
	p, saved := c.acked, c.saved
	c.mu.Unlock()
	if p == saved || p.IsZero() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := write(ctx, p); errors.Is(err, ErrVanished) {
		c.log.Error("checkpoint key vanished under the running publisher; written again", zap.Error(err),
			zap.String("key", c.w.Key()), zap.String("file", p.File), zap.Uint32("pos", p.Pos))
	} else if err != nil {
		if c.obs != nil {
			c.obs.CheckpointFailed()
		}
		return err
	}
	c.mu.Lock()
	c.saved = p
	c.mu.Unlock()
	if c.obs != nil {
		c.obs.CheckpointSaved(p)
	}
	return nil
}

func (c *Committer) warnFailed(err error) {
	if ok, suppressed := c.warn.Allow(time.Now()); ok {
		saved := c.Saved()
		msg := "cannot write checkpoint; publishing continues; a restart now would resume from the last position written (file, pos below), " +
			"as long as the key still holds it"
		if redis.IsOOMError(err) {
			msg = "cannot write checkpoint: Redis is at maxmemory (OOM) and refuses writes; publishing continues. Free memory or raise maxmemory; " +
				"under an evicting maxmemory-policy the key may already be gone, and a restart would then find no checkpoint (cdc-outbox check tells)"
		}
		c.log.Warn(msg, zap.Error(err), zap.String("key", c.w.Key()), zap.String("file", saved.File), zap.Uint32("pos", saved.Pos), zap.Int("suppressed", suppressed))
	}
}
