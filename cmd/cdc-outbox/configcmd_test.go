package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/config"
)

// config reference prints the reference, or writes it with -o (make docs).
func TestConfigReference(t *testing.T) {
	want, err := config.Reference()
	if err != nil {
		t.Fatal(err)
	}
	code, out := executeCaptured(t, &os.Stdout, []string{"config", "reference"}, 10*time.Second)
	if code != 0 || out != want {
		t.Errorf("exit %d; printed %d bytes, want the %d of config.Reference", code, len(out), len(want))
	}
	p := filepath.Join(t.TempDir(), "configuration.md")
	if code, _ := executeCaptured(t, &os.Stderr, []string{"config", "reference", "-o", p}, 10*time.Second); code != 0 {
		t.Fatalf("-o: exit %d", code)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != want {
		t.Errorf("-o wrote %d bytes (%v), want %d", len(b), err, len(want))
	}
}
