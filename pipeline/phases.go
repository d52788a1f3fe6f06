package pipeline

import (
	"context"
	"fmt"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"go.uber.org/zap"
)

// A pipeline start (Publisher.attempt) is a list of phases run in order
// (startPhases): each looks at what the start knows so far (startState)
// and returns a step: the position it moves the start to (in the
// state), the checkpoint writes it wants as intents
// (checkpoint.Intent), and whether it wants to run again (the archive
// catch-up while the server purges further). One loop (runPhases)
// applies the intents through applyIntents, the one call site of
// checkpoint.Apply outside package checkpoint (internal/lint fails on a
// second); the Committer writes the rest while streaming.
//
//	preflight   first start of the process: the server's settings, Redis
//	            persistence and eviction, the mirror topic
//	load        the stored checkpoint (Redis, else the mirror's copy);
//	            first pipeline start only
//	partitions  the target topics' partition counts against the stored
//	            ones (intent: an accepted change, --accept-partition-change)
//	resolve     where to start: Decide at the first pipeline start
//	            (intents: a mirror resume written back, a first start, the
//	            end of a backfill), the acknowledged position at a restart
//	history     the resolved position against the server's binlog
//	            history; exactly-once past the last committed transaction
//	            at a restart; its GTID set completed
//	catch-up    source.archive: archived binlogs the server purged
//	            (intent: the hand-over to the server's binlog)
//	purged      source.on-purged (intent: the skip)
//
// then the stream (Publisher.stream) from the state's from.

// startState is what the phases of one pipeline start know: the server,
// the stored checkpoint, the writer of this start and the positions.
type startState struct {
	// n: the attempt (0: the first of this process).
	n int
	// srv: the source server now; ident: its identity.
	srv   server
	ident checkpoint.Source
	// cp: the Redis checkpoint; mcp: the mirror's copy when Redis has
	// none (both nil at a restart, or when there is none).
	cp, mcp *checkpoint.Checkpoint
	// cpw writes this start's checkpoints (set after partitions).
	cpw *checkpoint.Writer
	// from: the position to stream from; saved: the position stored as
	// the checkpoint (the Committer starts from it).
	from, saved binlog.Position
	// of: the server the resolved position was read from (nil: a start
	// option or a backfill, just resolved on the server); restart: it is
	// the acknowledged position of a previous attempt.
	of      *checkpoint.Source
	restart bool
	// missing: router.topic does not exist at the first start without a
	// checkpoint (checkPartitions); refused by the topics phase once
	// resolve stored the start position, so that the restart after the
	// topic is created resumes there instead of at source.start.
	missing error
}

// step is a phase's result: the checkpoint writes it wants, what to do
// once they are applied (the in-memory state that must follow the stored
// one), and whether to run the phase again after that.
type step struct {
	writes  []checkpoint.Intent
	applied func()
	again   bool
}

// phase is one start-up phase.
type phase struct {
	name string
	run  func(ctx context.Context, st *startState) (step, error)
}

// startPhases returns the start-up phases in order.
func (p *Publisher) startPhases() []phase {
	return []phase{
		{"preflight", p.preflight},
		{"load", p.load},
		{"partitions", p.partitionPhase},
		{"resolve", p.resolve},
		{"topics", topicsPhase},
		{"history", p.historyPhase},
		{"catch-up", p.catchUp},
		{"purged", p.purgedPhase},
	}
}

// runPhases runs phases in order on st, applying each step's intents
// through st.cpw (a phase before the writer exists wants none), then its
// applied, and running it again while it asks to.
func (p *Publisher) runPhases(ctx context.Context, phases []phase, st *startState) error {
	for _, ph := range phases {
		for {
			s, err := ph.run(ctx, st)
			if err != nil {
				return err
			}
			if len(s.writes) > 0 {
				if st.cpw == nil {
					return fmt.Errorf("pipeline: start-up phase %s wants a checkpoint write before the writer exists", ph.name)
				}
				if _, err := applyIntents(ctx, st.cpw, p.log, s.writes); err != nil {
					return err
				}
			}
			if s.applied != nil {
				s.applied()
			}
			if !s.again {
				break
			}
		}
	}
	return nil
}

// applyIntents applies intents in order through w (checkpoint.Apply),
// stopping at the first error: the one place outside package checkpoint
// that writes or deletes a checkpoint (the start-up phases, checkpoint set
// and reset; internal/lint checks it).
func applyIntents(ctx context.Context, w *checkpoint.Writer, log *zap.Logger, intents []checkpoint.Intent) ([]checkpoint.Applied, error) {
	out := make([]checkpoint.Applied, 0, len(intents))
	for _, in := range intents {
		a, err := checkpoint.Apply(ctx, w, in)
		if err != nil {
			return out, err
		}
		log.Debug("checkpoint written", zap.String("why", in.Why), zap.String("key", w.Key()), zap.String("at", in.At.Text()), zap.Bool("delete", in.Delete))
		out = append(out, a)
	}
	return out, nil
}

// write is one intent to store at as the checkpoint.
func write(why string, at binlog.Position) checkpoint.Intent {
	return checkpoint.Intent{Why: why, At: at}
}

// topicsPhase refuses a start whose router.topic is missing (st.missing),
// after resolve stored the first checkpoint: the rows committed until
// the topic is created are published by the next start, which resumes at
// that checkpoint (a start that stored none would begin at source.start,
// latest by default, and skip them without a word).
func topicsPhase(_ context.Context, st *startState) (step, error) {
	return step{}, st.missing
}
