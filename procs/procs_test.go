package procs

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name        string
		cur, max    int
		used        float64
		quiet, want int
	}{
		{"one CPU: always one", 1, 1, 3, 0, 1},
		{"trickle at one processor stays", 1, 2, 0.14, 50, 1},
		{"half a core at one processor: a backlog, raise", 1, 2, 0.5, 0, 2},
		{"saturated at one processor: raise to the maximum", 1, 8, 0.98, 0, 8},
		{"busy at the maximum stays", 2, 2, 1.6, 0, 2},
		{"between the thresholds at the maximum stays", 2, 2, 0.35, 20, 2},
		{"quiet, not long enough", 2, 2, 0.2, QuietSamples - 2, 2},
		{"quiet for QuietSamples: lower", 2, 2, 0.2, QuietSamples - 1, 1},
		{"quiet on eight CPUs: lower to one", 8, 8, 0.05, QuietSamples, 1},
	} {
		if got := Decide(c.cur, c.max, c.used, c.quiet); got != c.want {
			t.Errorf("%s: Decide(%d, %d, %.2f, %d) = %d, want %d", c.name, c.cur, c.max, c.used, c.quiet, got, c.want)
		}
	}
}

// TestGovernorRun drives Run with a fake clock and CPU meter: quiet for a
// second lowers the count to one, a busy interval raises it at once, and
// cancelling restores the maximum.
func TestGovernorRun(t *testing.T) {
	var mu sync.Mutex
	var cpu time.Duration
	var sets []int
	g := &Governor{max: 4, log: zap.NewNop(), env: func(string) (string, bool) { return "", false },
		cpu: func() time.Duration { mu.Lock(); defer mu.Unlock(); return cpu },
		now: time.Now, set: func(n int) { mu.Lock(); sets = append(sets, n); mu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	wait := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			l := len(sets)
			mu.Unlock()
			if l >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %d-th change of the processor count: %v", n, sets)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait(1) // idle (no CPU used): lowered to one
	mu.Lock()
	cpu += 10 * time.Second // far above Busy for any interval
	mu.Unlock()
	wait(2)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 4, 4}; len(sets) != 3 || sets[0] != want[0] || sets[1] != want[1] || sets[2] != want[2] {
		t.Fatalf("processor counts set: %v, want %v (lowered, raised, restored at the end)", sets, want)
	}
}

func TestNewRespectsGOMAXPROCS(t *testing.T) {
	t.Setenv("GOMAXPROCS", "3")
	if g := New(zap.NewNop()); g != nil {
		t.Fatal("New with GOMAXPROCS set: want nil (the operator's choice stands)")
	}
}
