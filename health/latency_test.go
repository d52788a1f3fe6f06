package health

import (
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/sink"
	dto "github.com/prometheus/client_model/go"
)

// Each acknowledged transaction is one observation of commit →
// acknowledgement, under its source; a commit time ahead of the
// acknowledgement (clock skew) counts as 0.
func TestAckedCommitHistogram(t *testing.T) {
	m := NewMetrics(BuildInfo{})
	var o sink.Observer = m.Source("a")
	c, ok := o.(sink.CommitObserver)
	if !ok {
		t.Fatal("*health.Source is no sink.CommitObserver: the writer would not report commit times")
	}
	at := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	for _, d := range []time.Duration{3 * time.Millisecond, 700 * time.Millisecond, 7 * time.Second, -time.Second} {
		c.AckedCommit(at.Add(-d), at)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var h *dto.Histogram
	for _, f := range fams {
		if f.GetName() == Prefix+"commit_to_ack_seconds" {
			for _, mt := range f.GetMetric() {
				if mt.GetLabel()[0].GetValue() == "a" {
					h = mt.GetHistogram()
				}
			}
		}
	}
	if h == nil {
		t.Fatal("no cdc_outbox_commit_to_ack_seconds{source=\"a\"}")
	}
	want := map[float64]uint64{0.005: 2, 1: 3, 5: 3, 10: 4}
	for _, b := range h.GetBucket() {
		if n, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != n {
			t.Errorf("le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), n)
		}
	}
	if h.GetSampleCount() != 4 || h.GetSampleSum() < 7.7 || h.GetSampleSum() > 7.71 {
		t.Errorf("count %d sum %v, want 4 and 7.703", h.GetSampleCount(), h.GetSampleSum())
	}
}
