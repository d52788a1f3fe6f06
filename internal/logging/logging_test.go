package logging

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

func TestLimiter(t *testing.T) {
	l := NewLimiter(time.Second, 2)
	now := time.Unix(100, 0)
	var got []string
	for i := 0; i < 5; i++ {
		ok, s := l.Allow(now.Add(time.Duration(i) * 100 * time.Millisecond))
		got = append(got, fmt.Sprint(ok, s))
	}
	ok, s := l.Allow(now.Add(1500 * time.Millisecond))
	got = append(got, fmt.Sprint(ok, s))
	if want := "true 0,true 0,false 0,false 0,false 0,true 3"; strings.Join(got, ",") != want {
		t.Fatalf("got %s, want %s", strings.Join(got, ","), want)
	}
}

func TestNewLogger(t *testing.T) {
	for _, c := range []Config{{Format: "json", Level: "info"}, {Format: "console", Level: "debug"}, {Format: "json", Level: "error"}} {
		log, err := New(c)
		if err != nil {
			t.Errorf("New(%+v): %v", c, err)
			continue
		}
		lvl, _ := zapcore.ParseLevel(c.Level)
		if !log.Core().Enabled(lvl) || (lvl > zapcore.DebugLevel && log.Core().Enabled(lvl-1)) {
			t.Errorf("New(%+v): wrong level", c)
		}
	}
	if _, err := New(Config{Format: "json", Level: "loud"}); err == nil {
		t.Error("New accepted level loud")
	}
}
