// Package gcpace keeps the Go garbage collector's heap goal at least a
// fixed headroom above the live heap, so that a small heap is not
// collected many times a second.
//
// Why: the collector's goal is the live heap times 1 + GOGC/100 (GOGC 100
// by default: twice the live heap). A publisher keeping up with a trickle
// of small transactions has a live heap of 3–6 MB and allocates about
// 17 MB/s at 5,000 events/s (binlog packets, record batches, headers), so
// it collected every 130 ms, and the collections with the allocation they
// slow came to about a seventh of its CPU (BENCHMARKS.md, "Live cost of
// small transactions"). With a headroom of 16 MiB it collects about once a
// second. A large heap (a large transaction, a backlog) keeps GOGC's
// proportion: the goal is max(live × (1 + GOGC/100), live + headroom), so
// the peak heap grows by at most the headroom, and only while the live
// heap is smaller than it.
//
// The decision is Percent (a pure function); Pacer.Run applies it after
// every collection (a cleanup, runtime.AddCleanup, on an object made
// unreachable for the purpose, signals each one) with
// debug.SetGCPercent. An operator who set GOGC in the environment keeps
// it: New returns nil. The Go runtime's own documentation of the goal:
// https://go.dev/doc/gc-guide#GOGC.
package gcpace
