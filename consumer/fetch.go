package consumer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// The fetch side of a generation: one loop per leader broker reads every
// assigned partition that broker leads with one Fetch request per round
// (sink.Reader), as the Java consumer does, instead of a request per
// partition: a consumer of n partitions costs the broker one request per
// round instead of n (issue 37). Each answer's records go to their
// partition's prefetch queue; a partition whose queue holds
// Config.QueueCapacity records or more is left out of the next requests
// (paused, as the Java consumer pauses a partition whose buffer is
// full) until its handler drained it, so a slow handler slows its own
// partition only and memory stays bounded.

// Backoffs of the fetch side: after a passing error of a leader's loop
// (the loops are grouped again by fresh metadata), and per partition for
// an offset past the partition's end.
const (
	minFetchBackoff = 100 * time.Millisecond
	maxFetchBackoff = 2 * time.Second
)

// leaderlessLookup is how often the leaders of partitions that have none
// (offline: every replica down) are looked up again, the others read
// meanwhile.
const leaderlessLookup = 2 * time.Second

// fetched is one item of a partition's prefetch queue: the records of
// one Fetch answer for it (none when it held only transaction markers or
// aborted records), and the offset every record before which was read
// (those the reader left out are done too).
type fetched struct {
	msgs []kafka.Message
	next int64
}

// weight is what f counts against Config.QueueCapacity: its records, at
// least one (so that the queue's channel, QueueCapacity items, never
// fills: a partition is fetched only while under QueueCapacity).
func (f fetched) weight() int64 { return int64(max(len(f.msgs), 1)) }

// waker lets a leader's loop whose partitions are all paused sleep until
// a handler drained one: wait returns a channel that wake closes.
type waker struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *waker) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *waker) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// fetchable returns the partitions of ps to ask for in the next Fetch:
// those whose queue holds fewer than capacity records and whose retry
// time (an offset past the end) has come, rotated by round so that the
// answer's byte limit (filled in request order) starves none. A pure
// decision.
func fetchable(ps []*partition, capacity int64, now time.Time, round int) []*partition {
	var out []*partition
	for _, p := range ps {
		if p.queued.Load() < capacity && !now.Before(p.retryAt) {
			out = append(out, p)
		}
	}
	if len(out) > 1 {
		k := round % len(out)
		out = append(out[k:], out[:k]...)
	}
	return out
}

// maxRequestBytes bounds one Fetch answer over all its partitions: the
// Java consumer's fetch.max.bytes default (50 MiB).
const maxRequestBytes = 50 << 20

// requestMaxBytes is the byte limit of a Fetch for n partitions of at most
// perPartition bytes each (Config.MaxBytes): what n requests of one
// partition could hold together, at most maxRequestBytes (and at least
// perPartition).
func requestMaxBytes(n, perPartition int) int {
	return max(min(n*perPartition, maxRequestBytes), perPartition)
}

// byLeader groups ps by the node id of their leader (leaders: by topic,
// then partition); partitions without a leader at the moment are
// returned apart. A pure decision.
func byLeader(ps []*partition, leaders map[string]map[int32]int32) (map[int32][]*partition, []*partition) {
	groups := map[int32][]*partition{}
	var none []*partition
	for _, p := range ps {
		l, ok := leaders[p.topic][int32(p.id)]
		if !ok || l < 0 {
			none = append(none, p)
			continue
		}
		groups[l] = append(groups[l], p)
	}
	return groups, none
}

// fetchAll reads the partitions ps of a generation into their queues
// until ctx ends (nil) or an error no retry fixes (fetchFatal): it groups
// them by leader (fresh metadata) and runs one loop per leader; when a
// loop fails (a leader moved, a broker unreachable) all stop and are
// grouped again after a backoff from 100 ms doubling to 2 s, the warning
// logged at most 3 times per 10 s. Partitions without a leader are
// looked up again every leaderlessLookup, the others read meanwhile.
func (c *Consumer) fetchAll(ctx context.Context, ps []*partition, w *waker) error {
	if len(ps) == 0 {
		<-ctx.Done()
		return nil
	}
	meta := sink.NewReader(c.kcfg, c.cfg.Isolation == ReadCommitted)
	defer meta.Close()
	warn := logging.NewLimiter(10*time.Second, 3)
	backoff := minFetchBackoff
	for ctx.Err() == nil {
		leaders := map[string]map[int32]int32{}
		var err error
		for _, t := range c.cfg.Topics {
			if !slices.ContainsFunc(ps, func(p *partition) bool { return p.topic == t }) {
				continue
			}
			if leaders[t], err = meta.Leaders(ctx, t); err != nil {
				break
			}
		}
		var none []*partition
		progressed := false
		if err == nil {
			var groups map[int32][]*partition
			groups, none = byLeader(ps, leaders)
			lctx, cancel := ctx, context.CancelFunc(func() {})
			if len(none) > 0 {
				// Read the others meanwhile; look for the leaderless
				// partitions' leaders again after leaderlessLookup.
				lctx, cancel = context.WithTimeout(ctx, leaderlessLookup)
			}
			progressed, err = c.readLeaders(lctx, groups, w)
			if len(groups) == 0 {
				<-lctx.Done() // every partition leaderless: nothing to read meanwhile, look again then
			}
			cancel()
			if err == nil && len(none) > 0 && ctx.Err() == nil {
				if ok, suppressed := warn.Allow(time.Now()); ok {
					c.log.Warn("partitions without a leader are not read; looking again", zap.Int("partitions", len(none)),
						zap.String("topic", none[0].topic), zap.Int("partition", none[0].id), zap.Int("suppressed", suppressed))
				}
				continue // the others were read for leaderlessLookup: no backoff
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if fetchFatal(err) {
			return err
		}
		if progressed {
			backoff = minFetchBackoff
		}
		// A broker down, a leader moving, a storage error: group again.
		if ok, suppressed := warn.Allow(time.Now()); ok {
			c.log.Warn("reading partitions failed; retrying", zap.Error(err), zap.Int("suppressed", suppressed))
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, maxFetchBackoff)
	}
	return nil
}

// readLeaders runs one loop per leader of groups until ctx ends (nil) or
// one fails (its error; the others are stopped); progressed reports
// whether a Fetch was answered.
func (c *Consumer) readLeaders(ctx context.Context, groups map[int32][]*partition, w *waker) (progressed bool, err error) {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for leader, ps := range groups {
		g.Go(func() error {
			ok, err := c.readLeader(gctx, leader, ps, w)
			if ok {
				mu.Lock()
				progressed = true
				mu.Unlock()
			}
			return err
		})
	}
	err = g.Wait()
	if ctx.Err() != nil {
		err = nil
	}
	return progressed, err
}

// readLeader reads ps, all led by node leader, into their queues with
// one Fetch per round until ctx ends (nil) or an error of the request or
// of a partition other than an offset out of range (returned: the leader
// may have moved). An offset below a partition's log start (records
// deleted by retention before they were handled) moves to the log start
// with an error log; one past the end (a truncated log) is tried again
// after a backoff of its own. progressed reports whether a Fetch was
// answered.
func (c *Consumer) readLeader(ctx context.Context, leader int32, ps []*partition, w *waker) (progressed bool, err error) {
	r := sink.NewReader(c.kcfg, c.cfg.Isolation == ReadCommitted)
	defer r.Close()
	log := c.log.With(zap.Int32("leader", leader))
	warn := logging.NewLimiter(10*time.Second, 3)
	capacity := int64(c.cfg.QueueCapacity)
	for round := 0; ctx.Err() == nil; round++ {
		for _, p := range ps {
			if p.offset >= 0 {
				continue
			}
			first, end, err := r.Offsets(ctx, leader, p.topic, int32(p.id))
			if err != nil {
				return progressed, err
			}
			if p.offset == kafka.LastOffset {
				p.offset = end
			} else {
				p.offset = first
			}
			p.log.Debug("starting", zap.Int64("offset", p.offset))
		}
		drained := w.wait() // before the decision: a drain after it wakes the wait below
		now := time.Now()
		want := fetchable(ps, capacity, now, round)
		if len(want) == 0 {
			// Every partition paused: wait for a handler to drain one, or
			// for a retry time.
			next := now.Add(c.cfg.MaxWait)
			for _, p := range ps {
				if p.retryAt.After(now) && p.retryAt.Before(next) {
					next = p.retryAt
				}
			}
			t := time.NewTimer(next.Sub(now))
			select {
			case <-ctx.Done():
			case <-drained:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		pos := make([]sink.Position, len(want))
		for i, p := range want {
			pos[i] = sink.Position{Topic: p.topic, Partition: int32(p.id), Offset: p.offset}
		}
		res, err := r.Fetch(ctx, leader, pos, requestMaxBytes(len(pos), c.cfg.MaxBytes), c.cfg.MaxBytes, c.cfg.MaxWait)
		if err != nil {
			return progressed, err
		}
		progressed = true
		for i, pf := range res {
			p := want[i]
			if pf.Err != nil {
				if !errors.Is(pf.Err, kafka.OffsetOutOfRange) {
					return progressed, pf.Err
				}
				first, _, oerr := r.Offsets(ctx, leader, p.topic, int32(p.id))
				if oerr == nil && p.offset < first {
					p.log.Error("the committed offset is below the partition's first offset: records deleted by retention before they were handled",
						zap.Int64("offset", p.offset), zap.Int64("first", first), zap.Int64("lost", first-p.offset))
					p.offset = first
					continue
				}
				// Past the end: the log was truncated, or is catching up.
				p.backoff = min(max(2*p.backoff, minFetchBackoff), maxFetchBackoff)
				p.retryAt = now.Add(p.backoff)
				if ok, suppressed := warn.Allow(now); ok {
					log.Warn("reading the partition failed; retrying", zap.String("topic", p.topic), zap.Int("partition", p.id),
						zap.Int64("offset", p.offset), zap.Error(pf.Err), zap.Int("suppressed", suppressed))
				}
				continue
			}
			p.backoff, p.retryAt = 0, time.Time{}
			if f := (fetched{msgs: pf.Records, next: pf.Next}); len(f.msgs) > 0 || f.next > p.offset {
				p.queued.Add(f.weight())
				p.queue <- f // never blocks: see fetched.weight
			}
			p.offset = max(p.offset, pf.Next)
		}
	}
	return progressed, nil
}
