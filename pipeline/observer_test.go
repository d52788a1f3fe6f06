package pipeline

import (
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/health"
)

// The metrics of a source observe every concern; observers left nil
// observe nothing (and do not panic).
func TestObservers(t *testing.T) {
	m := health.NewMetrics(health.BuildInfo{})
	src := m.Source("s")
	o := ObserversOf(src)
	if o.Sink != src || o.Checkpoint != src || o.Lag != src || o.Series != src || o.Stops != src || o.Heard != src {
		t.Fatalf("ObserversOf: %+v", o)
	}
	o.Stops.Restarted()
	if n := o.Stops.PurgedSkip(); n != 1 {
		t.Fatalf("PurgedSkip = %d, want 1", n)
	}
	n := Observers{Lag: src}.orNop()
	if n.Lag != src || n.Sink == nil || n.Checkpoint == nil || n.Series == nil || n.Stops == nil || n.Heard == nil {
		t.Fatalf("orNop: %+v", n)
	}
	n.Sink.Produced(nil, 0, nil)
	n.Sink.Acked(at(4))
	n.Checkpoint.CheckpointSaved(at(4))
	n.Checkpoint.CheckpointFailed()
	n.Series.SetTables("a.b")
	n.Series.InitTopics("t")
	n.Series.SetDeadLetterTopic("d")
	n.Stops.Restarted()
	n.Stops.PoisonStopped("x")
	n.Heard.SetHeard(time.Now, time.Second)
	if n.Stops.PurgedSkip() != 0 {
		t.Fatal("nop PurgedSkip counted")
	}
	z := Observers{}.orNop()
	z.Lag.SourceState(true, true)
	z.Lag.SeedCommitTime(time.Now())
	z.Lag.SetBytesBehind(1)
	z.Lag.SetRetentionHeadroom(1, time.Second)
}
