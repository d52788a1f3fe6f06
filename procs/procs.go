package procs

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Interval is how often the Governor samples the process's CPU time.
const Interval = 100 * time.Millisecond

// Thresholds of Decide, in cores (CPU seconds per second of the process,
// user and system, every thread).
const (
	// Busy: at one processor, a sample at or above it raises the count
	// to the maximum (the processor is half busy: a backlog has begun).
	Busy = 0.5
	// Idle: at the maximum, QuietSamples samples in a row below it lower
	// the count to one.
	Idle = 0.3
	// QuietSamples is how many Intervals below Idle lower the count (1 s).
	QuietSamples = 10
)

// Decide returns the processor count for the next interval: cur is the
// current count, max the machine's (runtime.NumCPU or the cgroup's
// quota), used the cores the process used over the last interval, quiet
// the number of consecutive intervals before it that were below Idle.
// The count is either 1 or max.
func Decide(cur, max int, used float64, quiet int) int {
	switch {
	case max <= 1:
		return 1
	case used >= Busy*float64(cur) || (cur > 1 && used >= Idle):
		return max
	case cur > 1 && quiet+1 >= QuietSamples:
		return 1
	default:
		return cur
	}
}

// Governor applies Decide to the process every Interval.
type Governor struct {
	max int
	log *zap.Logger
	cpu func() time.Duration            // the process's CPU time so far
	set func(n int)                     // runtime.GOMAXPROCS
	now func() time.Time                // time.Now
	env func(key string) (string, bool) // os.LookupEnv
}

// New returns a Governor for a machine whose scheduler runs max
// processors (runtime.GOMAXPROCS(0) at start), or nil when the operator
// set GOMAXPROCS in the environment or max is 1: then nothing adapts.
func New(log *zap.Logger) *Governor {
	g := &Governor{max: runtime.GOMAXPROCS(0), log: log.Named("procs"), cpu: processCPU,
		set: func(n int) { runtime.GOMAXPROCS(n) }, now: time.Now, env: os.LookupEnv}
	if _, ok := g.env("GOMAXPROCS"); ok || g.max <= 1 {
		return nil
	}
	return g
}

// Run adapts the processor count until ctx is cancelled, then restores
// the maximum and returns nil.
func (g *Governor) Run(ctx context.Context) error {
	t := time.NewTicker(Interval)
	defer t.Stop()
	cur, quiet := g.max, 0
	defer func() { g.set(g.max) }()
	last, at := g.cpu(), g.now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		c, now := g.cpu(), g.now()
		used := float64(c-last) / float64(now.Sub(at))
		last, at = c, now
		next := Decide(cur, g.max, used, quiet)
		if used < Idle {
			quiet++
		} else {
			quiet = 0
		}
		if next != cur {
			g.set(next)
			g.log.Debug("processors", zap.Int("gomaxprocs", next), zap.Float64("cores_used", used))
			cur, quiet = next, 0
		}
	}
}

// processCPU returns the user and system CPU time of the process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
