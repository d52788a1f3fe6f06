//go:build integration

package integration

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestOneShotFrozen runs each one-shot command that connects to the
// database against a frozen one (its packets held, not refused: a
// SIGSTOPped mysqld, a silent network), made by a pausing proxy in front
// of the real server. Each must end on its own, non-zero, naming
// source.read-timeout (5 s here), well within the test's bound of 90 s;
// before the fix their connection's handshake waited for good. A frozen
// Redis needs no case: its commands are bounded by checkpoint.timeout.
func TestOneShotFrozen(t *testing.T) {
	e := newEnv(t)
	file := e.oldestBinlog()
	db := newPauseProxy(t, mysqlAddr)
	e.sourceAddr = db.addr()
	cfg := e.config()
	// A checkpoint, so that prune goes on to the database.
	if out, code := e.cli(nil, "checkpoint", "set", file+":4"); code != 0 {
		t.Fatalf("checkpoint set: exit %d:\n%s", code, out)
	}
	db.setPaused(true)
	for _, args := range [][]string{
		{"check"},
		{"checkpoint", "set", file + ":4"},
		{"verify"},
		{"replay", "--from", file + ":4", "--dry-run"},
		{"prune", "--older-than", "7d", "--dry-run"},
	} {
		name := strings.Join(args, " ")
		t.Run(strings.Join(args[:min(2, len(args))], "_"), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, append(args, "--config", cfg)...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err := cmd.Run()
			t.Logf("cdc-outbox %s: %v after %s:\n%s", name, err, time.Since(start).Round(time.Millisecond), out.String())
			switch {
			case ctx.Err() != nil:
				t.Errorf("cdc-outbox %s against a frozen database: still waiting after 90 s", name)
			case cmd.ProcessState.ExitCode() == 0:
				t.Errorf("cdc-outbox %s against a frozen database: exit 0, want an error", name)
			case !strings.Contains(out.String(), "source.read-timeout"):
				t.Errorf("cdc-outbox %s against a frozen database: the output does not name source.read-timeout", name)
			}
		})
	}
}
