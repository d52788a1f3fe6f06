package main

import (
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPlotPointsFrom(t *testing.T) {
	md := `| measure | result | notes |
|---|---|---|
| frontier: broker idle | 0.030 cores | the broker alone |
| frontier 5000/s, exactly-once, 20ms (latency-budget 20ms) | publisher 0.086 + broker 0.231 = 0.317 cores; p50 9.97 ms, p99 17.24 ms, max 48.74 ms | x |
| frontier 1000/s, at-least-once, default (latency-budget default) | publisher 0.048 + broker 0.212 = 0.260 cores; p50 6.18 ms, p99 12.12 ms, max 13.35 ms | x |
| live cost at 5000 events/s | 0.068 cores | x |
`
	got := plotPointsFrom(md)
	want := []plotPoint{{"20ms", "exactly-once", 5000, 0.317, 17.24}, {"default", "at-least-once", 1000, 0.260, 12.12}}
	if len(got) != len(want) {
		t.Fatalf("got %d points %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("point %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestFrontierSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.svg")
	pts := []plotPoint{{"default", "at-least-once", 5000, 0.24, 14}, {"100ms", "exactly-once", 5000, 0.139, 68}, {"a<b", "exactly-once", 1000, 0.5, 0.05}}
	if err := frontierSVG(path, pts); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Well-formed XML, one circle per point plus one per rate in the legend.
	d := xml.NewDecoder(strings.NewReader(string(b)))
	circles := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
			circles++
		}
	}
	if want := len(pts) + 2; circles != want {
		t.Errorf("%d circles, want %d", circles, want)
	}
	if err := frontierSVG(path, nil); err == nil {
		t.Error("no points: want an error")
	}
}

func TestBucketQuantile(t *testing.T) {
	inf := math.Inf(1)
	b0 := map[float64]float64{0.005: 10, 0.01: 10, 0.025: 10, inf: 10}
	b1 := map[float64]float64{0.005: 60, 0.01: 105, 0.025: 110, inf: 110} // 100 observations: 50 ≤ 5 ms, 45 ≤ 10 ms, 5 ≤ 25 ms
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{.5, 5 * time.Millisecond}, {.9, 10 * time.Millisecond}, {.95, 10 * time.Millisecond}, {.99, 25 * time.Millisecond}} {
		if got := bucketQuantile(c.q, b0, b1); got != c.want {
			t.Errorf("q %v: %v, want %v", c.q, got, c.want)
		}
	}
	if got := bucketQuantile(.99, b1, b1); got != 0 {
		t.Errorf("no observations: %v, want 0", got)
	}
	over := map[float64]float64{0.005: 60, 0.01: 60, 0.025: 60, inf: 110}
	if got := histBound(bucketQuantile(.99, b0, over)); got != "+Inf" {
		t.Errorf("past the last bound: %s, want +Inf", got)
	}
}

func TestSumsAndBuckets(t *testing.T) {
	lines := []string{
		`cdc_outbox_kafka_transactions_total{source="a",result="committed"} 7`,
		`cdc_outbox_kafka_transactions_total{source="a",result="aborted"} 2`,
		`cdc_outbox_kafka_transactions_total{source="b",result="committed"} 3`,
		`cdc_outbox_commit_to_ack_seconds_bucket{source="a",le="0.005"} 4`,
		`cdc_outbox_commit_to_ack_seconds_bucket{source="b",le="0.005"} 1`,
		`cdc_outbox_commit_to_ack_seconds_bucket{source="a",le="+Inf"} 9`,
		`cdc_outbox_commit_to_ack_seconds_count{source="a"} 9`,
	}
	if got := sums(lines)["cdc_outbox_kafka_transactions_total"]; got != 10 {
		t.Errorf("committed transactions summed: %v, want 10 (aborted left out)", got)
	}
	b := buckets(lines, "cdc_outbox_commit_to_ack_seconds")
	if len(b) != 2 || b[0.005] != 5 || b[math.Inf(1)] != 9 {
		t.Errorf("buckets %v, want {0.005: 5, +Inf: 9}", b)
	}
}
