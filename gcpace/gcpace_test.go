package gcpace

import (
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
)

func read(t *testing.T, names ...string) []uint64 {
	t.Helper()
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	out := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() != metrics.KindUint64 {
			t.Fatalf("%s: not supported", s[i].Name)
		}
		out[i] = s[i].Value.Uint64()
	}
	return out
}

// rss returns the process's resident set in bytes (Linux: /proc/self/statm).
func rss(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// With the ballast the collector's goal is at least the live heap plus
// the headroom (GOGC 100: twice their sum) and falls back once Run ends;
// the ballast's pages are not resident.
func TestBallast(t *testing.T) {
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, ok := os.LookupEnv(k); ok {
			t.Skipf("%s is set in the environment", k)
		}
	}
	const headroom = 64 << 20 // far above this test's own heap
	runtime.GC()
	before := read(t, "/gc/heap/goal:bytes")[0]
	r0 := rss(t)
	b := New(headroom)
	if b == nil || b.Size() != headroom {
		t.Fatalf("New(%d) = %v", headroom, b)
	}
	runtime.GC()
	m := read(t, "/gc/heap/live:bytes", "/gc/heap/goal:bytes")
	live, goal := m[0], m[1]
	if live < headroom || goal < live+headroom {
		t.Fatalf("with a %d-byte ballast: live %d, goal %d; want the ballast live and the goal ≥ live + headroom", headroom, live, goal)
	}
	if grown := rss(t) - r0; grown > headroom/4 {
		t.Fatalf("RSS grew by %d bytes with a %d-byte ballast: its pages were touched", grown, headroom)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Run(ctx); err != nil || b.Size() != 0 {
		t.Fatalf("Run: %v, size %d after", err, b.Size())
	}
	runtime.GC()
	if after := read(t, "/gc/heap/goal:bytes")[0]; after >= goal || after > before+headroom/4 {
		t.Fatalf("goal %d after Run (with the ballast %d, before it %d): the ballast was not released", after, goal, before)
	}
}

func TestNewOff(t *testing.T) {
	if New(0) != nil || New(-1) != nil {
		t.Fatal("a headroom of 0 or less must give no ballast")
	}
	t.Setenv("GOGC", "200")
	if New(1<<20) != nil {
		t.Fatal("GOGC set: want no ballast")
	}
	os.Unsetenv("GOGC")
	t.Setenv("GOMEMLIMIT", "1GiB")
	if New(1<<20) != nil {
		t.Fatal("GOMEMLIMIT set: want no ballast")
	}
}
