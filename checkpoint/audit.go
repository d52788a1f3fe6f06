package checkpoint

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// AuditKey is the Redis key of the continuous audit's cursor (package
// audit) beside checkpoint key key: the same keyspace and, on Redis
// Cluster, the same hash slot (SlotKey). It is not a checkpoint: nothing
// resumes publishing from it, and the checkpoint script never reads it.
func AuditKey(key string) string { return SlotKey(key, "audit") }

// SaveAudit stores the audit's state b (an opaque value package audit
// encodes) under AuditKey, without expiry. Errors are Redis's, naming the
// key and the address.
func (s *Store) SaveAudit(ctx context.Context, b []byte) error {
	k := AuditKey(s.key)
	if err := s.rdb.Set(ctx, k, b, 0).Err(); err != nil {
		return s.fail("write "+k, err)
	}
	return nil
}

// LoadAudit returns the audit's state; nil without error when there is
// none (a first audit, or the key was deleted: the audit starts over from
// the checkpoint's present).
func (s *Store) LoadAudit(ctx context.Context) ([]byte, error) {
	k := AuditKey(s.key)
	b, err := s.rdb.Get(ctx, k).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, s.fail("read "+k, err)
	}
	return b, nil
}
