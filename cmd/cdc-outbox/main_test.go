package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/config"
)

// clearEnv unsets every CDC_OUTBOX_* variable for the test so that the
// caller's environment cannot leak into loadConfig.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.EnvPrefix) {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// executeCaptured runs execute(args) with *stream (&os.Stdout or
// &os.Stderr) redirected to a file, and returns the exit code and what was
// written there; the test fails when execute does not return within
// timeout.
func executeCaptured(t *testing.T, stream **os.File, args []string, timeout time.Duration) (int, string) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "captured"))
	if err != nil {
		t.Fatal(err)
	}
	saved := *stream
	*stream = f
	done := make(chan int, 1)
	go func() { done <- execute(args) }()
	var code int
	select {
	case code = <-done:
	case <-time.After(timeout):
		*stream = saved
		t.Fatalf("execute(%v) did not return within %s", args, timeout)
	}
	*stream = saved
	f.Close()
	out, _ := os.ReadFile(f.Name())
	return code, string(out)
}

// execute validates before connecting anywhere: a bad configuration exits 2
// with the problem on stderr.
func TestExecuteInvalidConfig(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"unknown command", []string{"nope"}, `unknown command "nope"`},
		{"missing config file", []string{"run", "--config", "MISSING"}, "no such file or directory"},
		{"invalid log level flag", []string{"run", "--config", "CONFIG", "--log-level", "loud"}, `log.level: "loud"`},
		{"gtid start flag in file mode", []string{"run", "--config", "CONFIG", "--start", "gtid:0-1-1"}, "source.start: a GTID start needs position-mode: gtid"},
		{"bad start flag", []string{"run", "-c", "CONFIG", "--start", "f:3"}, `source.start: binlog: start position: "f:3"`},
		{"positional argument", []string{"run", "extra"}, `unknown command "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			dir := t.TempDir()
			p := writeConfig(t, "source:\n  user: u\n  schema: im\n  start: latest\n")
			args := append([]string(nil), c.args...)
			for i := range args {
				switch args[i] {
				case "CONFIG":
					args[i] = p
				case "MISSING":
					args[i] = filepath.Join(dir, "missing.yaml")
				}
			}
			// If validation ever let the configuration through, execute would
			// try to connect and retry forever: fail instead of hanging.
			code, out := executeCaptured(t, &os.Stderr, args, 10*time.Second)
			if code != 2 {
				t.Errorf("execute(%v) = %d, want 2", args, code)
			}
			if !strings.Contains(out, c.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", out, c.stderr)
			}
		})
	}
}

// With a sources list, the commands that act on one source refuse without
// --source (exit 2, naming the sources) before connecting anywhere, and
// run refuses start options that name no source.
func TestExecuteNeedsSource(t *testing.T) {
	clearEnv(t)
	p := writeConfig(t, `source: {user: u, schema: im, start: latest, server-id: 7000}
checkpoint: {addr: "127.0.0.1:1"}
sources:
  - name: shard1
    checkpoint: {key: "cp:1"}
  - name: shard2
    source: {server-id: 7100}
    checkpoint: {key: "cp:2"}
`)
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"checkpoint", "show"}, "the configuration has 2 sources (shard1, shard2) and this command acts on one: add --source NAME"},
		{[]string{"checkpoint", "reset", "--yes"}, "add --source NAME"},
		{[]string{"checkpoint", "set", "mysql-bin.000001:4"}, "add --source NAME"},
		{[]string{"replay", "--from", "mysql-bin.000001:4"}, "add --source NAME"},
		{[]string{"prune", "--older-than", "7d"}, "add --source NAME"},
		{[]string{"verify"}, "add --source NAME"},
		{[]string{"dead-letter", "republish"}, "add --source NAME"},
		{[]string{"checkpoint", "show", "--source", "shard9"}, `--source "shard9": no such source; the configuration has shard1, shard2`},
		{[]string{"status", "--source", "shard9"}, `--source "shard9": no such source`},
		{[]string{"check", "--source", "shard9"}, `--source "shard9": no such source`},
		{[]string{"run", "--start", "earliest"}, "--start: the configuration has 2 sources (shard1, shard2) and these options apply to one: add --source NAME"},
		{[]string{"run", "--source", "shard1"}, "run publishes every source"},
		{[]string{"run", "--source", "shard9", "--backfill"}, `--source "shard9": no such source`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stderr := executeCaptured(t, &os.Stderr, append(c.args, "--config", p), 10*time.Second)
			if code != 2 || !strings.Contains(stderr, c.stderr) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, c.stderr)
			}
		})
	}
}
