package prune

import (
	"testing"
	"time"
)

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "1d12h": 36 * time.Hour, "90m": 90 * time.Minute,
	} {
		if got, err := ParseAge(in); err != nil || got != want {
			t.Errorf("ParseAge(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0d", "-1h", "7x", "d", "7dd"} {
		if got, err := ParseAge(in); err == nil {
			t.Errorf("ParseAge(%q) = %s, want an error", in, got)
		}
	}
}
