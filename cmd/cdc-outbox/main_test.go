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
			errFile, err := os.Create(filepath.Join(dir, "stderr"))
			if err != nil {
				t.Fatal(err)
			}
			stderr := os.Stderr
			os.Stderr = errFile
			// If validation ever let the configuration through, execute would
			// try to connect and retry forever: fail instead of hanging.
			done := make(chan int, 1)
			go func() { done <- execute(args) }()
			var code int
			select {
			case code = <-done:
			case <-time.After(10 * time.Second):
				os.Stderr = stderr
				t.Fatalf("execute(%v) did not return: the configuration was not rejected", args)
			}
			os.Stderr = stderr
			errFile.Close()
			out, _ := os.ReadFile(errFile.Name())
			if code != 2 {
				t.Errorf("execute(%v) = %d, want 2", args, code)
			}
			if !strings.Contains(string(out), c.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", out, c.stderr)
			}
		})
	}
}
