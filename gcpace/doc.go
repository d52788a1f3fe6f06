// Package gcpace gives the Go garbage collector a fixed headroom above the
// live heap, so that a small heap is not collected many times a second.
//
// Why: the collector's heap goal is the live heap times 1 + GOGC/100
// (GOGC 100 by default: twice the live heap). A publisher keeping up with
// a trickle of small transactions has a live heap of 3–6 MB and allocates
// about 17 MB/s at 5,000 events/s (binlog packets, record batches,
// headers), so it collected every 130 ms; with the headroom, about once a
// second, for 7–13 % less CPU (BENCHMARKS.md, "Live cost of small
// transactions").
//
// How: a ballast, one pointer-free allocation of the headroom's size that
// nothing reads or writes. The collector counts it as live, so the goal
// becomes (live + headroom) × (1 + GOGC/100): with GOGC 100 the heap other
// than the ballast may reach 2 × live + headroom before a collection, at
// every heap size and from the first collection on, with no lag to tune.
// The ballast is never marked through (no pointers) and never touched, so
// its pages are not resident: RSS grows by what the extra headroom lets
// the program allocate between collections, not by the ballast. The Go
// runtime's documentation of the goal: https://go.dev/doc/gc-guide#GOGC.
//
// An operator who set GOGC or GOMEMLIMIT in the environment keeps them as
// they are (a memory limit would count the ballast): New returns nil.
package gcpace
