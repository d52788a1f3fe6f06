package sink

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// metaCache is the producer's kafka.RoundTripper: it passes every request
// to next, except that it answers kafka-go Writer's per-record metadata
// lookups (kafka.(*Writer).WriteMessages asks for the partition count of
// a record's topic once per record) from the last answer for that topic
// for up to ttl. Without it each lookup goes through the Transport's own
// metadata cache, which copies the cluster's topic list per call: 8 % of
// the publisher's CPU in a drain (bench, pprof). Only answers without an
// error for the topic are kept, so an unknown topic or a leader change is
// seen on the next lookup; next's cache still refreshes the cluster view
// (kafka.Transport.MetadataTTL), this adds at most ttl to it.
type metaCache struct {
	next kafka.RoundTripper
	ttl  time.Duration

	mu      sync.Mutex
	entries map[metaKey]metaEntry
}

type metaKey struct {
	topic      string
	autoCreate bool
}

type metaEntry struct {
	res *metadataAPI.Response
	at  time.Time
}

func newMetaCache(next kafka.RoundTripper, ttl time.Duration) *metaCache {
	return &metaCache{next: next, ttl: ttl, entries: map[metaKey]metaEntry{}}
}

// RoundTrip implements kafka.RoundTripper.
func (c *metaCache) RoundTrip(ctx context.Context, addr net.Addr, req protocol.Message) (protocol.Message, error) {
	mr, ok := req.(*metadataAPI.Request)
	if !ok || len(mr.TopicNames) != 1 {
		return c.next.RoundTrip(ctx, addr, req)
	}
	k := metaKey{mr.TopicNames[0], mr.AllowAutoTopicCreation}
	now := time.Now()
	c.mu.Lock()
	e, hit := c.entries[k]
	c.mu.Unlock()
	if hit && now.Sub(e.at) < c.ttl {
		return e.res, nil
	}
	res, err := c.next.RoundTrip(ctx, addr, req)
	if err != nil {
		return res, err
	}
	if r, ok := res.(*metadataAPI.Response); ok && len(r.Topics) == 1 && r.Topics[0].Name == k.topic && r.Topics[0].ErrorCode == 0 {
		c.mu.Lock()
		if len(c.entries) > 1024 {
			clear(c.entries)
		}
		c.entries[k] = metaEntry{res: r, at: now}
		c.mu.Unlock()
	}
	return res, nil
}
