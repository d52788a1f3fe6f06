package consumer

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store remembers handled event ids beyond the in-memory window and across
// restarts. The Consumer asks Seen before handling a record whose id is not
// in its window, and calls Mark after the handler returned nil: a record is
// marked only once handled, so a crash between the two redelivers it (at
// least once) rather than losing it. Implementations must be safe for
// concurrent use (one call per partition at a time).
type Store interface {
	// Seen reports whether Mark was called for id (and has not expired).
	Seen(ctx context.Context, id string) (bool, error)
	// Mark records id as handled.
	Mark(ctx context.Context, id string) error
}

// RedisStore is a Store on Redis: one key per event id, Prefix+id (the id
// as the record carries it: the im layout's decimal ids give the keys
// earlier versions wrote), set with
// SET NX and a TTL (https://redis.io/docs/latest/commands/set/), so a
// duplicate older than the TTL is no longer found.
type RedisStore struct {
	rdb    redis.Cmdable
	prefix string
	ttl    time.Duration
}

// NewRedisStore returns a Store on rdb. prefix should name the consumer
// group (dedupe is per group), e.g. "im-gateway:seen:"; ttl bounds how long
// an id is remembered (Redis rounds to milliseconds; at least 1 ms).
func NewRedisStore(rdb redis.Cmdable, prefix string, ttl time.Duration) *RedisStore {
	return &RedisStore{rdb: rdb, prefix: prefix, ttl: max(ttl, time.Millisecond)}
}

func (s *RedisStore) key(id string) string { return s.prefix + id }

// Seen runs EXISTS Prefix+id.
func (s *RedisStore) Seen(ctx context.Context, id string) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.key(id)).Result()
	return n > 0, err
}

// Mark runs SET Prefix+id 1 NX PX ttl (an id already marked keeps its
// first expiry).
func (s *RedisStore) Mark(ctx context.Context, id string) error {
	return s.rdb.SetNX(ctx, s.key(id), "1", s.ttl).Err()
}
