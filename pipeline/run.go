package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Source is where transactions come from: the live server
// (*binlog.Reader), archived binlog files (*binlog.FileReader, FileSource),
// a consistent snapshot (*snapshot.Source). Run sends whole transactions,
// in order, on Txns and closes Txns when it returns: nil at the end of a
// bounded source, ctx's error when cancelled, or its failure.
type Source interface {
	Run(ctx context.Context) error
	Txns() <-chan binlog.Txn
}

// Writer is the Kafka stage (*sink.Writer): Run writes what it reads from
// in until in is closed, reporting acknowledged runs of transactions on
// Acks (closed when Run returns).
type Writer interface {
	Run(ctx context.Context, in <-chan binlog.Txn) error
	Acks() <-chan sink.Ack
}

// Committer stores acknowledged positions (*checkpoint.Committer): Run
// reads acks until closed, then writes the last one.
type Committer interface {
	Run(ctx context.Context, acks <-chan checkpoint.Ack) error
}

// Releaser takes back the room of acknowledged transactions in a source's
// memory budget (*binlog.Budget).
type Releaser interface{ Release(n int64) }

// Stages is one pipeline: Source → Writer → (acknowledgements) →
// Committer. Committer, Budget and OnAck are optional.
type Stages struct {
	// Name names the source in the shutdown log line ("reader",
	// "archive catch-up", "backfill", "replay").
	Name      string
	Source    Source
	Writer    Writer
	Committer Committer
	// Budget, when set, gets each acknowledged run's Held back.
	Budget Releaser
	// OnAck, when set, sees each acknowledged run (progress, counts) from
	// the relay's goroutine; it must not block.
	OnAck func(sink.Ack)
}

// Run runs the stages under one errgroup with the one shutdown rule of
// every flow: when ctx is cancelled (a signal), the source stops reading;
// the writer and the committer then drain what was read, and the committer
// writes the final checkpoint, within shutdown; past it the writer is
// cancelled too, and the committer still writes the last acknowledged
// position. A ctx cancelled with a cause wrapping ErrAbort (the lease
// was lost, see Publisher) cancels the source and the writer at once, with
// no drain; the committer still tries its final write (fenced: refused
// once another instance holds the lease). Any stage's error stops all of
// them. Run returns the first error
// (nil when the source ended and everything was drained, or ctx was
// cancelled and the drain completed in time; a drain cut short returns
// context.Canceled).
func Run(ctx context.Context, s Stages, shutdown time.Duration, log *zap.Logger) error {
	g, gctx := errgroup.WithContext(context.Background())
	readCtx, stopRead := context.WithCancel(gctx)
	defer stopRead()
	drainCtx, stopDrain := context.WithCancel(gctx)
	defer stopDrain()
	unhook := context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), ErrAbort) {
			// The lease was lost: another instance may publish from now
			// on, so nothing more is sent (no drain).
			log.Error("stopping the "+s.Name+" at once, without flushing: "+context.Cause(ctx).Error(), zap.String("source", s.Name))
			stopRead()
			stopDrain()
			return
		}
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			// Ended for a reason of its own (a history change the
			// measurement found, returned by the caller): not a signal.
			log.Info("stopping the " + s.Name + ", flushing what was read")
		} else {
			log.Info("signal received: stopping the " + s.Name + ", flushing what was read")
		}
		stopRead()
		time.AfterFunc(shutdown, stopDrain)
	})
	defer unhook()

	var cacks chan checkpoint.Ack
	// committed is closed when the committer returned (nil: none): it
	// then reads nothing more, and the relay must not wait for it.
	var committed chan struct{}
	if s.Committer != nil {
		cacks = make(chan checkpoint.Ack, 64)
		committed = make(chan struct{})
		// The committer ends when cacks is closed, after every
		// acknowledgement the writer reported (also when the writer
		// failed or the drain was cut short), with the final write; it is
		// never cancelled, so that no reported acknowledgement is lost to
		// the checkpoint. It also ends early on a refused write (ErrFenced:
		// another instance holds the lease), which stops every stage.
		g.Go(func() error {
			defer close(committed)
			return s.Committer.Run(context.Background(), cacks)
		})
	}
	g.Go(func() error {
		err := s.Source.Run(readCtx)
		if ctx.Err() != nil && readCtx.Err() != nil {
			return nil // stopped by the signal: the drain decides
		}
		return err
	})
	g.Go(func() error { return s.Writer.Run(drainCtx, s.Source.Txns()) })
	g.Go(func() error {
		out := cacks // nil once the committer returned
		if cacks != nil {
			defer close(cacks)
		}
		for a := range s.Writer.Acks() {
			if s.Budget != nil {
				s.Budget.Release(a.Held)
			}
			if s.OnAck != nil {
				s.OnAck(a)
			}
			if out != nil {
				// No send waits for a peer that has returned: once the
				// committer ended (its error stops the run), the
				// acknowledgements are still read, so that the writer
				// returns, but no longer passed on.
				select {
				case out <- checkpoint.Ack{End: a.End, Partitions: a.Partitions}:
				case <-committed:
					out = nil
				}
			}
		}
		return nil
	})
	return g.Wait()
}
