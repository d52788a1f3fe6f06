package progress

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestETA(t *testing.T) {
	for _, c := range []struct {
		name       string
		pos, total int64
		elapsed    time.Duration
		want       time.Duration
	}{
		{"a quarter in 10 s", 25, 100, 10 * time.Second, 30 * time.Second},
		{"done", 100, 100, time.Minute, 0},
		{"nothing done", 0, 100, time.Minute, -1},
		{"no total", 10, 0, time.Minute, -1},
		{"past the total", 101, 100, time.Minute, -1},
	} {
		if got := ETA(c.pos, c.total, c.elapsed); got != c.want {
			t.Errorf("%s: ETA %v, want %v", c.name, got, c.want)
		}
	}
	if got := Rate(500, 2*time.Second); got != 250 {
		t.Errorf("Rate = %v", got)
	}
	if got := Rate(500, 0); got != 0 {
		t.Errorf("Rate over 0 s = %v", got)
	}
}

func TestLine(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   Config
		count int64
		rate  float64
		pos   int64
		at    string
		want  string
	}{
		{"replay by bytes", Config{Desc: "replay", Unit: "events", Total: 9000000, Bytes: true}, 120000, 35000, 2250000, "mariadb-bin.000003:1234",
			"replay: 120000 events, 35000 events/s, at mariadb-bin.000003:1234, 25.0% of 9000000 bytes, ETA 30s"},
		{"prune by rows", Config{Desc: "prune", Unit: "rows", Total: 1000}, 500, 100, 500, "id 5000",
			"prune: 500 rows, 100 rows/s, at id 5000, 50.0% of 1000, ETA 10s"},
		{"no total", Config{Desc: "verify", Unit: "records"}, 7, 1, 7, "",
			"verify: 7 records, 1 records/s"},
		{"nothing yet", Config{Desc: "backfill", Unit: "rows", Total: 10}, 0, 0, 0, "",
			"backfill: 0 rows, 0 rows/s, 0.0% of 10"},
	} {
		if got := Line(c.cfg, c.count, c.rate, c.pos, c.at, 10*time.Second); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the Reporter's loop and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func runUntil(t *testing.T, r *Reporter, out *syncBuffer, cond func(string) bool) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }() // owned by this test: Finish ends it, checked below
	deadline := time.Now().Add(20 * time.Second)
	for !cond(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("output never matched; got %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := out.String()
	r.Finish()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	return got
}

// Not a terminal (a buffer): the plain lines, every interval.
func TestLinesWhenNotATerminal(t *testing.T) {
	out := &syncBuffer{}
	if IsTerminal(out) {
		t.Fatal("a buffer is a terminal")
	}
	r := New(Config{Out: out, Desc: "replay", Unit: "events", Total: 1000, Bytes: true, Interval: 10 * time.Millisecond})
	r.Update(250, 40, "f.000001:254")
	got := runUntil(t, r, out, func(s string) bool { return strings.Count(s, "\n") >= 2 })
	first := strings.SplitN(got, "\n", 2)[0]
	if !strings.HasPrefix(first, "replay: 40 events, ") || !strings.Contains(first, "at f.000001:254, 25.0% of 1000 bytes, ETA ") {
		t.Errorf("line %q", first)
	}
	if strings.Contains(got, "\r") || strings.Contains(got, "\x1b[") {
		t.Errorf("plain output has terminal control characters: %q", got)
	}
}

// A terminal: the bar, with the position, the rate and the time left.
func TestBarOnATerminal(t *testing.T) {
	out := &syncBuffer{}
	yes := true
	r := New(Config{Out: out, Desc: "prune", Unit: "rows", Total: 1000, Terminal: &yes})
	r.Update(400, 400, "id 77")
	got := runUntil(t, r, out, func(s string) bool { return strings.Contains(s, "400/1000") })
	for _, want := range []string{"prune at id 77", "40%", "400/1000", "rows/s", ":"} {
		if !strings.Contains(got, want) {
			t.Errorf("bar lacks %q: %q", want, got)
		}
	}
	r.Finish() // a second Finish is harmless
}
