package pipeline

import (
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
)

// Observers are the Publisher's observers, one small interface per
// concern: the Writer's (Sink) and the Committer's (Checkpoint)
// measurements, the source's lag (Lag), the series named at start
// (Series), the publisher's stops (Stops), the reader's liveness
// (Heard) and the Writer's oldest unanswered round (InFlight).
// *health.Source implements them all (ObserversOf); a nil field
// observes nothing. Their methods must not block.
type Observers struct {
	Sink       sink.Observer
	Checkpoint checkpoint.Observer
	Lag        LagObserver
	Series     SeriesObserver
	Stops      StopObserver
	Heard      HeardObserver
	InFlight   InFlightObserver
}

// LagObserver follows how far behind the source the publisher is.
type LagObserver interface {
	// SourceState: connected to the source's binlog, and caught up (at
	// the end of the binlog with everything read acknowledged).
	SourceState(connected, caughtUp bool)
	// SeedCommitTime: the checkpoint's commit time, before anything is
	// acknowledged.
	SeedCommitTime(t time.Time)
	// SetBytesBehind: binlog bytes from the resume position to the end.
	SetBytesBehind(n int64)
	// SetRetentionHeadroom: binlog bytes from the start of the oldest
	// file kept to the checkpoint, and the time until the server's expiry
	// may purge the checkpoint's file (< 0: unknown).
	SetRetentionHeadroom(bytes int64, d time.Duration)
}

// SeriesObserver is told the outbox tables ("schema.table") and the
// topics known at start, so that their series exist at 0.
type SeriesObserver interface {
	SetTables(tables ...string)
	InitTopics(topics ...string)
	SetDeadLetterTopic(topic string)
}

// StopObserver counts the publisher's stops.
type StopObserver interface {
	// Restarted counts a pipeline restart after a retryable error.
	Restarted()
	// PurgedSkip counts a skip over purged binlogs (source.on-purged) and
	// returns the count so far.
	PurgedSkip() uint64
	// PoisonStopped counts a stop on a poison record (on-poison: fail).
	PoisonStopped(reason sink.Reason)
}

// HeardObserver is given the reader's LastHeard at each pipeline start,
// and how long a caught-up source may stay silent before it counts as
// behind.
type HeardObserver interface {
	SetHeard(lastHeard func() time.Time, stale time.Duration)
}

// InFlightObserver is given the Writer's OldestInFlight at each pipeline
// start: when the oldest produce round still waiting for the brokers'
// answer began (zero: none).
type InFlightObserver interface {
	SetInFlight(oldest func() time.Time)
}

// ObserversOf returns Observers with o, an observer of every concern
// (*health.Source), for each.
func ObserversOf[O interface {
	sink.Observer
	checkpoint.Observer
	LagObserver
	SeriesObserver
	StopObserver
	HeardObserver
	InFlightObserver
}](o O) Observers {
	return Observers{Sink: o, Checkpoint: o, Lag: o, Series: o, Stops: o, Heard: o, InFlight: o}
}

// orNop fills the nil observers with ones that observe nothing.
func (o Observers) orNop() Observers {
	var n nop
	if o.Sink == nil {
		o.Sink = n
	}
	if o.Checkpoint == nil {
		o.Checkpoint = n
	}
	if o.Lag == nil {
		o.Lag = n
	}
	if o.Series == nil {
		o.Series = n
	}
	if o.Stops == nil {
		o.Stops = n
	}
	if o.Heard == nil {
		o.Heard = n
	}
	if o.InFlight == nil {
		o.InFlight = n
	}
	return o
}

type nop struct{}

func (nop) Produced([]kafka.Message, time.Duration, error) {}
func (nop) Acked(binlog.Position)                          {}
func (nop) Requested(int)                                  {}
func (nop) Transacted(bool)                                {}
func (nop) Restarted()                                     {}
func (nop) PurgedSkip() uint64                             { return 0 }
func (nop) SourceState(bool, bool)                         {}
func (nop) SeedCommitTime(time.Time)                       {}
func (nop) SetBytesBehind(int64)                           {}
func (nop) SetRetentionHeadroom(int64, time.Duration)      {}
func (nop) InitTopics(...string)                           {}
func (nop) SetTables(...string)                            {}
func (nop) SetDeadLetterTopic(string)                      {}
func (nop) PoisonStopped(sink.Reason)                      {}
func (nop) CheckpointSaved(binlog.Position)                {}
func (nop) CheckpointFailed()                              {}
func (nop) CheckpointMirrorFailed()                        {}
func (nop) SetHeard(func() time.Time, time.Duration)       {}
func (nop) SetInFlight(func() time.Time)                   {}
