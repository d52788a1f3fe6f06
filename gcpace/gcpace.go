package gcpace

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"

	"go.uber.org/zap"
)

// MaxPercent caps Percent (a live heap of a few kB would otherwise ask for
// a GOGC of millions).
const MaxPercent = 10000

// Percent returns the GOGC percentage whose heap goal, live × (1 +
// percent/100), is at least live + headroom (both in bytes), and never
// below base (the GOGC the process would use otherwise) nor above
// MaxPercent; base when headroom is 0.
func Percent(live, headroom uint64, base int) int {
	if headroom == 0 {
		return base
	}
	if live == 0 {
		return max(base, MaxPercent)
	}
	// ceil(100 × headroom / live), without overflow for any headroom
	// Validate allows (≤ 1 GiB).
	p := (100*headroom + live - 1) / live
	return max(base, int(min(p, MaxPercent)))
}

// Pacer applies Percent after every garbage collection.
type Pacer struct {
	headroom uint64
	base     int
	log      *zap.Logger
	live     func() uint64     // the live heap, bytes, as of the last collection
	set      func(p int) int   // debug.SetGCPercent
	arm      func(fire func()) // calls fire once after the next collection
}

// New returns a Pacer keeping the heap goal headroom bytes above the live
// heap, or nil when headroom is 0 or the operator set GOGC in the
// environment (then the runtime's own pacing stays).
func New(headroom int64, log *zap.Logger) *Pacer {
	if _, ok := os.LookupEnv("GOGC"); ok || headroom <= 0 {
		return nil
	}
	return &Pacer{headroom: uint64(headroom), base: 100, log: log.Named("gcpace"), live: liveHeap, set: debug.SetGCPercent, arm: afterGC}
}

// Run applies Percent after every collection until ctx is cancelled, then
// restores the base percentage and returns nil.
func (p *Pacer) Run(ctx context.Context) error {
	cycles := make(chan struct{}, 1)
	var stopped atomic.Bool
	var fire func()
	fire = func() { // on the runtime's cleanup goroutine
		select {
		case cycles <- struct{}{}:
		default: // a cycle not yet applied: the next read sees this one too
		}
		if !stopped.Load() {
			p.arm(fire)
		}
	}
	p.arm(fire)
	defer func() {
		stopped.Store(true)
		p.set(p.base)
	}()
	cur := p.base
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-cycles:
		}
		live := p.live()
		if next := Percent(live, p.headroom, p.base); next != cur {
			p.set(next)
			cur = next
			p.log.Debug("gc percent", zap.Int("gogc", next), zap.Uint64("live_heap_bytes", live))
		}
	}
}

// sentinel is allocated only to be collected: its cleanup marks the end of
// a collection. 32 bytes, so that the tiny allocator (under 16 bytes)
// does not bundle it with other objects.
type sentinel struct{ _ [32]byte }

// afterGC calls fire on the runtime's cleanup goroutine once after the
// next garbage collection.
func afterGC(fire func()) {
	runtime.AddCleanup(new(sentinel), func(f func()) { f() }, fire)
}

// liveHeap returns the heap the last collection marked live
// (/gc/heap/live:bytes).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
