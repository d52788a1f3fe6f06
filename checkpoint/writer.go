package checkpoint

import (
	"context"
	"errors"
	"maps"
	"sync"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// Backend stores one source's checkpoint; *Store (Redis) implements it.
type Backend interface {
	// Load returns the stored checkpoint, nil when there is none.
	Load(ctx context.Context) (*Checkpoint, error)
	// Save stores c as the checkpoint, checked as o says (see
	// Store.Save: ErrFenced, ErrBackwards, ErrVanished).
	Save(ctx context.Context, c Checkpoint, o WriteOptions) error
	// Key names the checkpoint for messages (the Redis key).
	Key() string
}

// Source describes the server a checkpoint's positions belong to.
type Source struct {
	ServerID   uint32
	ServerUUID string
	Flavor     string
}

// Writer is the one place that builds checkpoint values: every checkpoint
// write of every flow (the Committer's, the first start's, the archive
// hand-over, a purged-binlog skip, the end of a backfill, checkpoint set)
// goes through Write, which stamps the source server and the partition
// counts of the target topics on the position. Safe for concurrent use.
type Writer struct {
	b   Backend
	src Source

	mu      sync.Mutex
	parts   map[string]int
	fence   *Fence
	force   bool
	existed bool // the key was loaded or written: missing now is ErrVanished
}

// NewWriter returns a Writer storing into b for the server src, with the
// target topics' partition counts parts (nil: none known yet).
func NewWriter(b Backend, src Source, parts map[string]int) *Writer {
	return &Writer{b: b, src: src, parts: maps.Clone(parts)}
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

// Write stores p as the checkpoint: everything before p was acknowledged
// (or deliberately skipped, source.on-purged). Errors are the Backend's:
// *FencedError and *BackwardsError (not written; fatal for this writer),
// *VanishedError (written again, but the key had been lost), or a Redis
// error.
func (w *Writer) Write(ctx context.Context, p binlog.Position) error {
	w.mu.Lock()
	o := WriteOptions{Force: w.force, Existed: w.existed, Fence: w.fence}
	w.mu.Unlock()
	err := w.b.Save(ctx, w.value(p), o)
	if err == nil || errors.Is(err, ErrVanished) {
		w.mu.Lock()
		w.existed = true
		w.mu.Unlock()
	}
	return err
}

func (w *Writer) value(p binlog.Position) Checkpoint {
	w.mu.Lock()
	parts := maps.Clone(w.parts)
	w.mu.Unlock()
	if len(parts) == 0 {
		parts = nil
	}
	return Checkpoint{
		File: p.File, Pos: p.Pos, GTIDSet: p.GTIDSet, GTID: p.GTID, EventTime: p.Time,
		ServerID: w.src.ServerID, ServerUUID: w.src.ServerUUID, Flavor: w.src.Flavor,
		Partitions: parts,
	}
}
