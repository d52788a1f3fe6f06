package router

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// BenchmarkDrainDecodeRoute reads a MariaDB binlog written by the bench
// drain (go run ./bench: 200,000 outbox rows, 500-byte payloads; too large
// to commit) with the FileReader and routes every event: the publisher's
// CPU per event on the decode path, without Kafka. Set CDC_BENCH_BINLOG to
// the file and CDC_BENCH_TABLE to its outbox table (im schema); skipped
// otherwise. Reports ns/event (wall) and cpu-ns/event (the process's user
// and system CPU, getrusage: the figure to compare, the machine is shared).
func BenchmarkDrainDecodeRoute(b *testing.B) {
	path, table := os.Getenv("CDC_BENCH_BINLOG"), os.Getenv("CDC_BENCH_TABLE")
	if path == "" || table == "" {
		b.Skip("CDC_BENCH_BINLOG and CDC_BENCH_TABLE not set")
	}
	r := New(Config{Topic: "im.events"}, Reserved{})
	events := 0
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		events = 0
		fr, err := binlog.NewFileReader([]string{path}, binlog.FileConfig{Schema: "im", Table: table, Start: binlog.Position{File: filepath.Base(path)}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- fr.Run(context.Background()) }()
		for txn := range fr.Txns() {
			for i := range txn.Events {
				if _, err := r.Route(&txn.Events[i], txn.End); err != nil {
					b.Fatal(err)
				}
				events++
			}
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(events), "cpu-ns/event")
	b.ReportMetric(float64(events), "events")
}

// cpuTime returns the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
