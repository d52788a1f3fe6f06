package binlog

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestProbeBound(t *testing.T) {
	for _, c := range []struct {
		read, want time.Duration
	}{
		{0, 10 * time.Second},                // unset: the old fixed bound
		{5 * time.Second, 5 * time.Second},   // a shorter read-timeout bounds the probe too
		{30 * time.Second, 10 * time.Second}, // the default: at most 10 s
	} {
		if got := (Config{ReadTimeout: c.read}).probeBound(); got != c.want {
			t.Errorf("read-timeout %s: probe bound %s, want %s", c.read, got, c.want)
		}
	}
}

// ssl-mode preferred against a server that accepts and never greets (a
// SIGSTOPped mysqld, a silent network): the TLS probe gives up within
// source.read-timeout (then plaintext; the real connection fails naming
// the setting), not after a fixed 10 s.
func TestTLSProbeSilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // the test's listener: holds what it accepts, until ln closes
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	cfg := Config{Addr: ln.Addr().String(), SSLMode: SSLPreferred, ReadTimeout: 300 * time.Millisecond}
	start := time.Now()
	tc, err := cfg.tlsFor(context.Background())
	took := time.Since(start)
	if err != nil || tc != nil {
		t.Fatalf("tlsFor = %v, %v; want plaintext (nil, nil) after the probe gives up", tc, err)
	}
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("the probe gave up after %s, want about source.read-timeout (300ms), not 10 s", took)
	}
}
