package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// StopKey is the Redis key of the record of a publisher's fatal stop
// (Stop) beside checkpoint key key: the same keyspace and, on Redis
// Cluster, the same hash slot (SlotKey). It is not a checkpoint: nothing
// resumes from it; the status command reads it.
func StopKey(key string) string { return SlotKey(key, "stop") }

// Stop records why a publisher stopped on a fatal error (a refused start,
// a poison record under on-poison fail, a setting to fix), so that the
// status command run afterwards, elsewhere, can name the cause and the
// fix that only the publisher's log held. Written when the source stops
// (SaveStop), deleted when a publisher starts the source again
// (ClearStop).
type Stop struct {
	// At: when the publisher stopped.
	At time.Time `json:"at"`
	// Instance: the publisher's instance id (ha) or host name; "" when
	// unknown.
	Instance string `json:"instance,omitempty"`
	// Reason: the error that stopped it, with the fix it names.
	Reason string `json:"reason"`
}

// SaveStop stores st under StopKey, without expiry. Errors are Redis's,
// naming the key and the address.
func (s *Store) SaveStop(ctx context.Context, st Stop) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	k := StopKey(s.key)
	if err := s.rdb.Set(ctx, k, b, 0).Err(); err != nil {
		return s.fail("write "+k, err)
	}
	return nil
}

// LoadStop returns the record of the last fatal stop; nil without error
// when there is none (no stop since the last start).
func (s *Store) LoadStop(ctx context.Context) (*Stop, error) {
	k := StopKey(s.key)
	b, err := s.rdb.Get(ctx, k).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, s.fail("read "+k, err)
	}
	var st Stop
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("checkpoint: %s on %s: %w: %q", k, s.cfg.Where(), err, b)
	}
	return &st, nil
}

// ClearStop deletes the record of the last fatal stop (a publisher starts
// the source again).
func (s *Store) ClearStop(ctx context.Context) error {
	k := StopKey(s.key)
	if err := s.rdb.Del(ctx, k).Err(); err != nil {
		return s.fail("delete "+k, err)
	}
	return nil
}
