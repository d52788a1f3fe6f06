package consumer

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// convKey is what seq_no counts within: an ordering key (an im
// conversation) and an event type (message.created and
// conversation.updated may number separately).
type convKey struct {
	key       string
	eventType string
}

// partition is one topic partition's dedupe and sequence state and its
// handled position. process is called by one goroutine at a time; done is
// read by the committer.
type partition struct {
	topic  string
	id     int
	c      *Consumer
	log    *zap.Logger
	window *lru[string, struct{}]
	last   *lru[convKey, int64]
	// done is the offset after the last record processed (handled or
	// skipped): every record before it is done, since process runs in
	// offset order. -1 before the first.
	done atomic.Int64
	// The current generation's fetch state (fetch.go). queue holds the
	// prefetched answers (Config.QueueCapacity items: see fetched.weight)
	// and queued the records in it; wake is the generation's, told when a
	// handler drains the queue below QueueCapacity. offset, retryAt and
	// backoff belong to the leader's loop reading the partition: offset
	// is the next to fetch (kafka.FirstOffset / LastOffset at the start
	// without a committed one), retryAt and backoff the wait after an
	// offset past the end.
	queue   chan fetched
	queued  atomic.Int64
	wake    *waker
	offset  int64
	retryAt time.Time
	backoff time.Duration
}

func (c *Consumer) newPartition(topic string, id int) *partition {
	p := &partition{topic: topic, id: id, c: c,
		log:    c.log.With(zap.String("topic", topic), zap.Int("partition", id)),
		window: newLRU[string, struct{}](c.cfg.Window),
		last:   newLRU[convKey, int64](c.cfg.Conversations)}
	p.done.Store(-1)
	return p
}

// process takes one message through decode, dedupe, the sequence check,
// the handler and the store, then marks it done. A non-nil error stops the
// partition (the message is not done).
func (p *partition) process(ctx context.Context, m kafka.Message) error {
	c := p.c
	r, err := c.cfg.Layout.Decode(m)
	if err != nil {
		if c.opts.OnInvalid != nil {
			if err := c.opts.OnInvalid(ctx, m, err); err != nil {
				return err
			}
		} else {
			p.log.Error("skipping a record that does not fit the layout", zap.Int64("offset", m.Offset), zap.Error(err))
		}
		c.metrics.record(nil, p.topic, "invalid")
		p.done.Store(m.Offset + 1)
		return nil
	}
	_, seen := p.window.get(r.EventID)
	if !seen && c.opts.Store != nil {
		err := p.retry(ctx, func() error {
			var err error
			seen, err = c.opts.Store.Seen(ctx, r.EventID)
			return err
		})
		if err != nil {
			return &StoreError{Op: "seen", EventID: r.EventID, Err: err}
		}
	}
	k := convKey{r.Key, r.EventType}
	var last int64
	var known bool
	if c.cfg.Layout.HasSeqNo() {
		last, known = p.last.get(k)
	}
	// Without a sequence number: never known, so Handle or Duplicate only.
	switch Decide(seen, known, last, r.SeqNo) {
	case Duplicate:
		c.metrics.record(&r, p.topic, "duplicate")
		p.window.put(r.EventID, struct{}{})
		p.done.Store(m.Offset + 1)
		return nil
	case GapThenHandle:
		g := Gap{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key,
			EventType: r.EventType, After: last, Next: r.SeqNo}
		c.metrics.gap(g)
		if c.opts.OnGap != nil {
			if err := c.opts.OnGap(ctx, g); err != nil {
				return &GapError{Gap: g, Err: err}
			}
		} else {
			p.log.Warn("seq_no gap", zap.String("key", g.Key), zap.Int64("after", g.After),
				zap.Int64("next", g.Next), zap.Int64("offset", g.Offset))
		}
	case HandleLate:
		r.Late = true
	}
	attempts := 0
	err = p.retry(ctx, func() error {
		attempts++
		return c.handler.Handle(ctx, &r)
	})
	if err != nil {
		return &HandlerError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, EventID: r.EventID, Attempts: attempts, Err: err}
	}
	if c.opts.Store != nil {
		// The handler is done: mark it even when ctx ended meanwhile
		// (revocation, shutdown), or the next owner would handle it again.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
		defer cancel()
		if err := p.retry(mctx, func() error { return c.opts.Store.Mark(mctx, r.EventID) }); err != nil {
			return &StoreError{Op: "mark", EventID: r.EventID, Err: err}
		}
	}
	p.window.put(r.EventID, struct{}{})
	if r.Late {
		c.metrics.record(&r, p.topic, "late")
	} else {
		if c.cfg.Layout.HasSeqNo() {
			p.last.put(k, r.SeqNo)
		}
		c.metrics.record(&r, p.topic, "handled")
	}
	p.done.Store(m.Offset + 1)
	return nil
}

// markTimeout bounds marking a handled record in the Store after ctx ended.
const markTimeout = 10 * time.Second

// retry runs f up to HandlerAttempts times, backing off 100 ms, 200 ms, …
// at most 5 s between attempts; it gives up early when ctx ends.
func (p *partition) retry(ctx context.Context, f func() error) error {
	backoff := 100 * time.Millisecond
	var err error
	for i := 0; i < p.c.cfg.HandlerAttempts; i++ {
		if err = f(); err == nil {
			return nil
		}
		p.c.metrics.errors.WithLabelValues(p.topic).Inc()
		if ctx.Err() != nil || i == p.c.cfg.HandlerAttempts-1 {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return err
}
