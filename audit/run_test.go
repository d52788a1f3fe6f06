package audit

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"go.uber.org/zap"
)

// runObserver records Running and Interrupted.
type runObserver struct {
	nopObserver
	mu          sync.Mutex
	running     []bool
	interrupted int
}

func (o *runObserver) Running(on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.running = append(o.running, on)
}

func (o *runObserver) Interrupted() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.interrupted++
}

func (o *runObserver) state() ([]bool, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]bool(nil), o.running...), o.interrupted
}

// Run reports that it runs, each failed session it retries (the database
// unreachable here), and that it stopped when it returns: what
// cdc_outbox_audit_running and cdc_outbox_audit_errors_total show.
func TestRunReportsRunningAndInterruptions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := DefaultConfig()
	cfg.Interval = 100 * time.Millisecond
	src := Source{Name: "default", Source: binlog.DefaultConfig()}
	src.Source.Addr, src.Source.User, src.Source.Schema = addr, "u", "im"
	obs := &runObserver{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(cfg, src, obs, zap.NewNop()).Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		running, n := obs.state()
		if n >= 2 {
			if len(running) != 1 || !running[0] {
				t.Fatalf("running %v while retrying, want [true]", running)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d interruptions within 30 s of a closed port, want 2 (running %v)", n, running)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v, want nil after cancel", err)
	}
	if running, _ := obs.state(); len(running) != 2 || !running[0] || running[1] {
		t.Fatalf("running %v, want [true false]", running)
	}
}
