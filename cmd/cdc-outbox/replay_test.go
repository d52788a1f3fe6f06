package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// replay --binlog-files of a copy cut inside its format description event
// (nothing in it can be read) is damage: exit 1 naming the file, as
// docs/replay.md says, not "nothing to replay" and exit 0.
func TestReplayFileCutInFormatDescription(t *testing.T) {
	full, err := os.ReadFile("../../binlog/testdata/outbox/mariadb-bin.000006")
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{4, 5, 19, 23, 60, 100, 200} {
		clearEnv(t)
		dir := t.TempDir()
		files := filepath.Join(dir, "binlogs")
		if err := os.Mkdir(files, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(files, "mariadb-bin.000006"), full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := writeConfig(t, "source:\n  schema: im\n  table: fx_outbox\n")
		code, out := executeCaptured(t, &os.Stdout, []string{"replay", "--config", cfg, "--binlog-files", files, "--dry-run"}, 30*time.Second)
		if code != 1 || !strings.Contains(out, "result: FAILED: --binlog-files: binlog file mariadb-bin.000006 offset") ||
			!strings.Contains(out, "before its format description event ends") || strings.Contains(out, "nothing to replay") {
			t.Errorf("cut at %d: exit %d, want 1 naming the damaged file:\n%s", cut, code, out)
		}
	}
}
