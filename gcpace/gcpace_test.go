package gcpace

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name           string
		live, headroom uint64
		base, want     int
	}{
		{"off", 3 * mib, 0, 100, 100},
		{"small heap: the headroom", 4 * mib, 16 * mib, 100, 400},
		{"rounded up", 3 * mib, 16 * mib, 100, 534},
		{"heap as large as the headroom: GOGC's own", 16 * mib, 16 * mib, 100, 100},
		{"large heap: GOGC's own", 200 * mib, 16 * mib, 100, 100},
		{"a higher base stays", 4 * mib, 16 * mib, 800, 800},
		{"tiny heap: capped", 1 << 10, 16 * mib, 100, MaxPercent},
		{"no heap marked yet", 0, 16 * mib, 100, MaxPercent},
		{"largest headroom", 1, 1 << 30, 100, MaxPercent},
	} {
		if got := Percent(c.live, c.headroom, c.base); got != c.want {
			t.Errorf("%s: Percent(%d, %d, %d) = %d, want %d", c.name, c.live, c.headroom, c.base, got, c.want)
		}
		if goal, min := float64(c.live)*(1+float64(Percent(c.live, c.headroom, c.base))/100), float64(c.live+c.headroom); c.live > 0 && c.headroom > 0 && goal < min && Percent(c.live, c.headroom, c.base) < MaxPercent {
			t.Errorf("%s: goal %.0f below live + headroom %.0f", c.name, goal, min)
		}
	}
}

// Run with a simulated collector: each collection applies the percentage
// for the live heap it left (only when it changes), and cancelling
// restores the base.
func TestPacerRun(t *testing.T) {
	const mib = 1 << 20
	fires := make(chan func(), 1)
	lives := make(chan uint64, 1)
	sets := make(chan int, 10)
	p := &Pacer{headroom: 16 * mib, base: 100, log: zap.NewNop(),
		live: func() uint64 { return <-lives },
		set:  func(v int) int { sets <- v; return 0 },
		arm:  func(fire func()) { fires <- fire }}
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return p.Run(ctx) })
	collect := func(live uint64) {
		fire := <-fires
		lives <- live
		fire()
	}
	expect := func(want int) {
		t.Helper()
		if got := <-sets; got != want {
			t.Fatalf("SetGCPercent(%d), want %d", got, want)
		}
	}
	collect(4 * mib)
	expect(400)
	collect(4 * mib) // unchanged: not set again
	collect(64 * mib)
	expect(100)
	collect(8 * mib)
	expect(200)
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	expect(100)
	select {
	case v := <-sets:
		t.Fatalf("SetGCPercent(%d) after the restore", v)
	default:
	}
}

// The real collector: a collection fires the cleanup, the percentage for
// this test process's small heap is applied, and the base comes back when
// Run ends.
func TestPacerRuntime(t *testing.T) {
	sets := make(chan int, 100)
	p := New(16<<20, zap.NewNop())
	if p == nil {
		t.Skip("GOGC is set in the environment")
	}
	real := p.set
	p.set = func(v int) int { sets <- v; return real(v) }
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return p.Run(ctx) })
	deadline := time.Now().Add(time.Minute)
	got := 0
	for got <= 100 && time.Now().Before(deadline) {
		runtime.GC()
		select {
		case got = <-sets:
		case <-time.After(100 * time.Millisecond):
		}
	}
	if got <= 100 {
		t.Fatalf("no percentage above 100 applied after collections (live heap %d bytes)", liveHeap())
	}
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for len(sets) > 0 {
		got = <-sets
	}
	if got != 100 {
		t.Fatalf("last SetGCPercent(%d), want the base 100 restored", got)
	}
	if prev := debug.SetGCPercent(100); prev != 100 {
		t.Fatalf("GOGC %d after Run, want 100", prev)
	}
}
