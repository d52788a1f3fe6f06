package checkpoint

import (
	"context"
	"maps"
	"sync"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// Backend stores one source's checkpoint; *Store (Redis) implements it.
type Backend interface {
	// Load returns the stored checkpoint, nil when there is none.
	Load(ctx context.Context) (*Checkpoint, error)
	// Save stores c as the checkpoint.
	Save(ctx context.Context, c Checkpoint) error
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

	mu    sync.Mutex
	parts map[string]int
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

// Write stores p as the checkpoint: everything before p was acknowledged
// (or deliberately skipped, source.on-purged). Errors are the Backend's.
func (w *Writer) Write(ctx context.Context, p binlog.Position) error {
	return w.b.Save(ctx, w.value(p))
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
