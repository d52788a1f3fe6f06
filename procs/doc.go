// Package procs adapts the Go scheduler's processor count (GOMAXPROCS)
// to the publisher's load: one processor while the process keeps up with
// a trickle, every CPU as soon as it works hard (a backlog, a backfill).
//
// Why: a publisher that keeps up with small transactions hands each one
// from goroutine to goroutine (binlog stream, reader, writer, the
// broker's answer, the checkpoint). With idle processors, every hand-off
// wakes another OS thread, which spins looking for work and sleeps again:
// at 5,000 events/s in 1–10-row transactions those wake-ups, not the
// work, were most of the CPU (BENCHMARKS.md, "Live cost of small
// transactions"). On one processor a hand-off is a switch between
// goroutines on the same thread. A backlog needs the parallelism, so the
// Governor raises the count again within one interval of the process
// using more than half a core.
//
// The decision is Decide (a pure function); Governor.Run samples the
// process's CPU time (getrusage) every Interval and applies it with
// runtime.GOMAXPROCS. An operator who set GOMAXPROCS in the environment
// keeps it: the Governor does not start (New returns nil).
package procs
