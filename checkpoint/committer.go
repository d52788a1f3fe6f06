package checkpoint

import (
	"context"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"go.uber.org/zap"
)

// Source describes the server a checkpoint's positions belong to.
type Source struct {
	ServerID   uint32
	ServerUUID string
	Flavor     string
	// Partitions: each target topic's partition count, read once at start,
	// stored with every checkpoint (Checkpoint.Partitions); nil stores none.
	Partitions map[string]int
	// Counts, when set, is called at each save instead: the partition
	// counts of every topic written so far (sink.Writer.Partitions, which
	// adds a topic at its first use to those read at start).
	Counts func() map[string]int
}

// Committer saves acknowledged positions to the Store.
type Committer struct {
	store    *Store
	src      Source
	interval time.Duration
	timeout  time.Duration
	log      *zap.Logger

	mu    sync.Mutex
	acked binlog.Position // newest acknowledged position
	saved binlog.Position // newest position written to Redis

	lastWarn time.Time
}

// NewCommitter returns a Committer. saved is the position already stored
// (zero when none).
func NewCommitter(store *Store, src Source, interval time.Duration, saved binlog.Position, log *zap.Logger) *Committer {
	return &Committer{store: store, src: src, interval: interval, timeout: store.cfg.Timeout,
		log: log.Named("checkpoint"), acked: saved, saved: saved}
}

// Acked returns the newest acknowledged position: everything before it is
// in Kafka, whether or not it is stored in Redis yet.
func (c *Committer) Acked() binlog.Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked
}

// Saved returns the newest position written to Redis.
func (c *Committer) Saved() binlog.Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saved
}

// Run consumes acknowledged positions, writing the newest one every
// interval, and once more when acks is closed or ctx is cancelled. A Redis
// failure is logged (rate-limited) and retried at the next interval while
// publishing goes on; the stored position then lags, so a restart would
// publish more duplicates, but never skips anything.
func (c *Committer) Run(ctx context.Context, acks <-chan binlog.Position) error {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case p, ok := <-acks:
			if !ok {
				return c.final()
			}
			c.mu.Lock()
			c.acked = p
			c.mu.Unlock()
		case <-t.C:
			if err := c.save(ctx); err != nil {
				c.warn(err)
			}
		case <-ctx.Done():
			// Take what the sink already reported, then write it.
		drain:
			for {
				select {
				case p, ok := <-acks:
					if !ok {
						break drain
					}
					c.mu.Lock()
					c.acked = p
					c.mu.Unlock()
				default:
					break drain
				}
			}
			return c.final()
		}
	}
}

func (c *Committer) final() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.timeout)
	defer cancel()
	if err := c.save(ctx); err != nil {
		return err
	}
	if p := c.Saved(); !p.IsZero() {
		c.log.Info("checkpoint written", zap.String("file", p.File), zap.Uint32("pos", p.Pos), zap.String("gtid_set", p.GTIDSet))
	}
	return nil
}

func (c *Committer) save(ctx context.Context) error {
	c.mu.Lock()
	p, saved := c.acked, c.saved
	c.mu.Unlock()
	if p == saved || p.IsZero() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	parts := c.src.Partitions
	if c.src.Counts != nil {
		parts = c.src.Counts()
	}
	err := c.store.Save(ctx, Checkpoint{
		File: p.File, Pos: p.Pos, GTIDSet: p.GTIDSet, GTID: p.GTID,
		ServerID: c.src.ServerID, ServerUUID: c.src.ServerUUID, Flavor: c.src.Flavor, EventTime: p.Time,
		Partitions: parts,
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.saved = p
	c.mu.Unlock()
	return nil
}

// warn logs a failed write at most every 10 s.
func (c *Committer) warn(err error) {
	if time.Since(c.lastWarn) < 10*time.Second {
		return
	}
	c.lastWarn = time.Now()
	saved := c.Saved()
	c.log.Warn("cannot write checkpoint; publishing continues, a restart now would resume from the last stored position",
		zap.Error(err), zap.String("stored_file", saved.File), zap.Uint32("stored_pos", saved.Pos))
}
