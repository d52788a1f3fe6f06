package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// Backend stores one source's checkpoint; *Store (Redis) implements it.
type Backend interface {
	// Load returns the stored checkpoint, nil when there is none.
	Load(ctx context.Context) (*Checkpoint, error)
	// Save stores c as the checkpoint, checked as o says (see
	// Store.Save: ErrFenced, ErrBackwards, ErrVanished).
	Save(ctx context.Context, c Checkpoint, o WriteOptions) error
	// Delete removes the checkpoint, checked as o says (see
	// Store.Delete: a *HeldError while an instance holds the lease,
	// unless o.Force or o.Fence is that lease); it reports whether the
	// key existed.
	Delete(ctx context.Context, o WriteOptions) (bool, error)
	// Key names the checkpoint for messages (the Redis key).
	Key() string
}

// Mirror keeps a copy of checkpoint values outside Redis (sink.Mirror: a
// compacted Kafka topic keyed by the checkpoint key), so that a lost Redis
// key is recovered without loss (pipeline.Decide).
type Mirror interface {
	// Save stores value as key's copy.
	Save(ctx context.Context, key string, value []byte) error
	// Load returns key's copy; found false when there is none (or it was
	// deleted).
	Load(ctx context.Context, key string) (value []byte, found bool, err error)
	// Delete removes key's copy (a tombstone).
	Delete(ctx context.Context, key string) error
}

// Source describes the server a checkpoint's positions belong to.
type Source struct {
	ServerID   uint32
	ServerUUID string
	Flavor     string
}

// Writer is the one place that builds checkpoint values: every checkpoint
// write of every flow goes through it, stamping the source server and the
// partition counts of the target topics on the position: the Committer's
// periodic and final writes, and the intents of the start-up phases and
// the operator commands (the first start, a mirror resume, an accepted
// partition change, the archive hand-over, a purged-binlog skip, the end
// of a backfill, checkpoint set and reset), which only Apply applies.
// Safe for concurrent use.
type Writer struct {
	b   Backend
	src Source

	mirror      Mirror
	mirrorEvery time.Duration
	mirrorErr   func(error)

	mu      sync.Mutex
	parts   map[string]int
	fence   *Fence
	force   bool
	existed bool            // the key was loaded or written: missing now is ErrVanished
	last    *Checkpoint     // the value last stored, as copied to the mirror; nil: none yet
	copied  binlog.Position // the position of the last copy made

	copyMu   sync.Mutex    // one copy at a time (the Mirror is not safe for concurrent use)
	failures atomic.Uint64 // failed copies
}

// NewWriter returns a Writer storing into b for the server src, with the
// target topics' partition counts parts (nil: none known yet).
func NewWriter(b Backend, src Source, parts map[string]int) *Writer {
	return &Writer{b: b, src: src, parts: maps.Clone(parts)}
}

// SetMirror makes the writes also copy the value to m: at once for
// Write; the Committer's periodic writes are copied apart, at most every
// `every`, by the Committer's copier (Committer.Run), off the
// acknowledgement path. A failed copy is counted (MirrorFailures) and
// reported to onErr, which must rate-limit its log (the Redis write
// stands: an older copy is still a safe position to resume from, it only
// means more duplicates). Call it before the first write.
func (w *Writer) SetMirror(m Mirror, every time.Duration, onErr func(error)) {
	w.mirror, w.mirrorEvery, w.mirrorErr = m, every, onErr
}

// Key names the checkpoint (the Redis key).
func (w *Writer) Key() string { return w.b.Key() }

// SetPartitions replaces the partition counts stored with the next writes.
func (w *Writer) SetPartitions(parts map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.parts = maps.Clone(parts)
}

// AddPartitions adds (or updates) partition counts: topics first written
// while running (a template topic's new event types).
func (w *Writer) AddPartitions(parts map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.parts == nil {
		w.parts = map[string]int{}
	}
	maps.Copy(w.parts, parts)
}

// Partitions returns a copy of the partition counts written with the
// checkpoint.
func (w *Writer) Partitions() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.parts)
}

// SetFence makes every following write carry f: accepted only while f is
// the source's lease (nil: unfenced).
func (w *Writer) SetFence(f *Fence) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fence = f
}

// SetForce turns the monotonic check off ("checkpoint set" only).
func (w *Writer) SetForce(force bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.force = force
}

// SetExisted tells the Writer that the key exists (a checkpoint was
// loaded, or written by an earlier Writer of this publisher): a missing
// key at the next write is then ErrVanished. Every successful write sets
// it too.
func (w *Writer) SetExisted(existed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.existed = existed
}

// MirrorFailures returns how many copies to the mirror failed.
func (w *Writer) MirrorFailures() uint64 { return w.failures.Load() }

// periodic is the Committer's periodic write: Redis only; the
// Committer's copier copies the newest value stored (copyLatest).
func (w *Writer) periodic(ctx context.Context, p binlog.Position) error {
	return w.writeAs(ctx, p, nil, false)
}

// writeAs stores p as the checkpoint (stamped with src, nil: the
// Writer's server), then, with copyNow and a mirror, copies it there:
// everything before p was acknowledged (or deliberately skipped,
// source.on-purged). A failed copy is reported (mirrorFailed), not
// returned. Errors are the Backend's: *FencedError and *BackwardsError
// (not written; fatal for this writer), *VanishedError (written again,
// but the key had been lost), or a Redis error.
func (w *Writer) writeAs(ctx context.Context, p binlog.Position, src *Source, copyNow bool) error {
	w.mu.Lock()
	o := WriteOptions{Force: w.force, Existed: w.existed, Fence: w.fence}
	w.mu.Unlock()
	v := w.value(p)
	if src != nil {
		v.ServerID, v.ServerUUID, v.Flavor = src.ServerID, src.ServerUUID, src.Flavor
	}
	err := w.b.Save(ctx, v, o)
	if err != nil && !errors.Is(err, ErrVanished) {
		return err
	}
	if o.Fence != nil {
		v.Token, v.Owner = o.Fence.Token, o.Fence.Owner
	}
	w.mu.Lock()
	w.existed = true
	w.last = &v
	w.mu.Unlock()
	if copyNow && w.mirror != nil {
		if merr := w.copyLatest(ctx); merr != nil {
			w.mirrorFailed(merr)
		}
	}
	return err
}

// remove deletes the key (Backend.Delete, under the Writer's fence and
// force), then writes a tombstone for its mirror copy; it reports whether
// the key existed. A failed tombstone is returned: the next run would
// resume from the copy.
func (w *Writer) remove(ctx context.Context) (bool, error) {
	w.mu.Lock()
	o := WriteOptions{Force: w.force, Fence: w.fence}
	w.mu.Unlock()
	existed, err := w.b.Delete(ctx, o)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	w.last, w.existed = nil, false
	w.mu.Unlock()
	if w.mirror != nil {
		w.copyMu.Lock()
		defer w.copyMu.Unlock()
		if err := w.mirror.Delete(ctx, w.b.Key()); err != nil {
			return existed, fmt.Errorf("%w: key %s: %w", ErrTombstone, w.b.Key(), err)
		}
	}
	return existed, nil
}

// copyLatest copies the value last stored to the mirror unless it was
// copied already (nothing to do without a mirror or a value). Older
// values not copied yet are never copied: the latest wins.
func (w *Writer) copyLatest(ctx context.Context) error {
	if w.mirror == nil {
		return nil
	}
	w.copyMu.Lock()
	defer w.copyMu.Unlock()
	w.mu.Lock()
	v := w.last
	done := v == nil || w.copied == v.Position()
	w.mu.Unlock()
	if done {
		return nil
	}
	b, err := Encode(*v)
	if err == nil {
		err = w.mirror.Save(ctx, w.b.Key(), b)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: copy of %s to the mirror: %w", w.b.Key(), err)
	}
	w.mu.Lock()
	w.copied = v.Position()
	w.mu.Unlock()
	return nil
}

// mirrorFailed counts a failed copy and reports it to the onErr of
// SetMirror.
func (w *Writer) mirrorFailed(err error) {
	w.failures.Add(1)
	if w.mirrorErr != nil {
		w.mirrorErr(err)
	}
}

func (w *Writer) value(p binlog.Position) Checkpoint {
	w.mu.Lock()
	parts := maps.Clone(w.parts)
	w.mu.Unlock()
	if len(parts) == 0 {
		parts = nil
	}
	return Checkpoint{
		File: p.File, Pos: p.Pos, GTIDSet: p.GTIDSet, GTID: p.GTID, EventTime: p.Time, FileOpened: p.Opened,
		ServerID: w.src.ServerID, ServerUUID: w.src.ServerUUID, Flavor: w.src.Flavor,
		Partitions: parts,
	}
}
