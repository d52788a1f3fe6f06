package checkpoint

import (
	"context"
	"fmt"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// Intent is one checkpoint write that a start-up phase of the publisher
// (package pipeline) or an operator command wants: store At, or, with
// Delete, remove the key and tombstone its mirror copy. Phases return
// intents instead of writing; one loop (pipeline's applyIntents) applies
// them through Apply, so that every write outside the Committer goes
// through one place under one rule (the Writer's fence, force and
// existed settings; internal/lint fails on a second call site).
type Intent struct {
	// Why names what wants the write, for logs and tests: "mirror
	// resume", "first start", "partition change", "archive hand-over",
	// "on-purged skip", "backfill end", "checkpoint set", "checkpoint
	// reset".
	Why string
	// At is the position to store (unused with Delete).
	At binlog.Position
	// Source, when set, is the server stamped on this value instead of
	// the Writer's (an accepted partition change keeps the stored
	// checkpoint's own server).
	Source *Source
	// Partitions, when non-nil, replace the partition counts written from
	// this write on (Writer.SetPartitions).
	Partitions map[string]int
	// Delete removes the key and writes a tombstone for its mirror copy
	// (checkpoint reset). Without a fence and without force, refused with
	// a *HeldError while an instance holds the source's lease.
	Delete bool
}

func (in Intent) String() string {
	if in.Delete {
		return in.Why + ": delete"
	}
	return fmt.Sprintf("%s: %s", in.Why, in.At.Text())
}

// Applied is what Apply did: Existed, for a Delete, tells whether the
// Redis key existed.
type Applied struct {
	Intent
	Existed bool
}

// Apply applies one intent through w: Writer.write (Redis, then the
// mirror copy at once) or, for a Delete, the fenced delete (Store.Delete)
// and the mirror's tombstone. Errors are the Writer's (see Writer.write),
// a *HeldError for a refused delete, or the mirror's tombstone failing
// (the Redis key is deleted then).
func Apply(ctx context.Context, w *Writer, in Intent) (Applied, error) {
	out := Applied{Intent: in}
	if in.Delete {
		existed, err := w.remove(ctx)
		out.Existed = existed
		return out, err
	}
	if in.Partitions != nil {
		w.SetPartitions(in.Partitions)
	}
	return out, w.writeAs(ctx, in.At, in.Source, true)
}
