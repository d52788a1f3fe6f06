package checkpoint

import (
	"errors"
	"fmt"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// ErrCorrupt reports a checkpoint value that is not a valid Checkpoint.
// Inspect it with redis-cli GET <key>; delete it and start with an explicit
// source.start to recover.
var ErrCorrupt = errors.New("checkpoint: corrupt value")

// Sentinels of a refused or suspicious checkpoint write (Store.Save's
// script decides them in one atomic step, see script.go). Test with
// errors.Is; the typed errors below carry the details.
var (
	// ErrBackwards: the write would move the checkpoint before the stored
	// position of the same server (another publisher writes the same key,
	// or an old one resumed). The value is not written. Fatal for the
	// writer: it is not the one that should be publishing.
	ErrBackwards = errors.New("checkpoint: write refused: it would move the checkpoint backwards")
	// ErrFenced: the write carried a lease (fencing token) that is no
	// longer the source's current one: another instance took the source
	// over. The value is not written. Fatal for the writer.
	ErrFenced = errors.New("checkpoint: write refused: this instance no longer holds the source's lease")
	// ErrVanished: the key was gone although this writer had written (or
	// loaded) it before: Redis evicted it (maxmemory-policy), lost it
	// (restart without persistence, failover to a replica that had not
	// received it) or someone deleted it (FLUSHALL, checkpoint reset).
	// The value was written again; the error says that it had been lost.
	ErrVanished = errors.New("checkpoint: key vanished under a running publisher")
)

// BackwardsError is a write refused by ErrBackwards.
type BackwardsError struct {
	Key     string
	Stored  binlog.Position // what the key holds
	Refused binlog.Position // what this writer tried to write
}

func (e *BackwardsError) Error() string {
	return fmt.Sprintf("%v: key %s holds %s, this publisher tried to write %s: another publisher is writing the same checkpoint key "+
		"(two instances with the same checkpoint.key, or an old instance that resumed); only one may publish a source (see docs/ha.md)",
		ErrBackwards, e.Key, e.Stored.FilePos(), e.Refused.FilePos())
}

func (e *BackwardsError) Unwrap() error { return ErrBackwards }

// FencedError is a write refused by ErrFenced.
type FencedError struct {
	Key string
	// Token and Owner: the lease this writer wrote under.
	Token uint64
	Owner string
	// Holder: the lease key's value now ("<owner> <token>"; "" when no
	// instance holds the lease).
	Holder  string
	Refused binlog.Position
}

func (e *FencedError) Error() string {
	holder := e.Holder
	if holder == "" {
		holder = "nobody (expired or lost)"
	}
	return fmt.Sprintf("%v: checkpoint %s: wrote under lease token %d of instance %s, the lease is now held by %s; %s not written",
		ErrFenced, e.Key, e.Token, e.Owner, holder, e.Refused.FilePos())
}

func (e *FencedError) Unwrap() error { return ErrFenced }

// VanishedError reports ErrVanished: At was written again.
type VanishedError struct {
	Key string
	At  binlog.Position
}

func (e *VanishedError) Error() string {
	return fmt.Sprintf("%v: key %s was missing although this publisher had written it; rewritten at %s. "+
		"Redis evicted it (set maxmemory-policy noeviction, or a volatile-* policy), lost it (a restart without appendonly, a failover) or it was deleted (FLUSHALL, checkpoint reset); "+
		"a publisher started while it was missing would have started from source.start", ErrVanished, e.Key, e.At.FilePos())
}

func (e *VanishedError) Unwrap() error { return ErrVanished }

// ErrHeld: a delete without a fence (checkpoint reset) refused because an
// instance holds the source's lease: it is publishing and would write the
// key again at its next write. Stop it first, or force.
var ErrHeld = errors.New("checkpoint: delete refused: an instance holds the source's lease")

// ErrTombstone: the Redis key was deleted but the tombstone of its mirror
// copy failed: the next run would resume from the copy.
var ErrTombstone = errors.New("checkpoint: the Redis key is deleted, but its copy in the mirror is not")

// HeldError is a delete refused by ErrHeld.
type HeldError struct {
	Key    string
	Holder string // the lease key's value, "<owner> <token>"
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%v: instance %q holds the lease of checkpoint %s: it is publishing and would write the checkpoint again at its next write. "+
		"Stop every instance first (a killed one's lease expires within ha.lease-ttl), or give --force", ErrHeld, e.Holder, e.Key)
}

func (e *HeldError) Unwrap() error { return ErrHeld }
