package sink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// wantTimeout fails unless err is a *TimeoutError naming within and addr.
func wantTimeout(t *testing.T, what string, err error, within, addr string) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	var werrs kafka.WriteErrors // a round's: one entry per record
	if errors.As(err, &werrs) {
		for _, e := range werrs {
			if e != nil {
				err = e
				break
			}
		}
	}
	var te *TimeoutError
	switch {
	case !errors.As(err, &te) || !errors.Is(err, ErrBrokerSilent):
		t.Errorf("%s: %v, want a *TimeoutError", what, err)
	case te.Within != within || !strings.Contains(err.Error(), within) || !strings.Contains(err.Error(), addr):
		t.Errorf("%s: %v, want it to name %s and %s", what, err, within, addr)
	case IsFatal(err):
		t.Errorf("%s: fatal, want retryable", what)
	}
}

// Against a frozen broker, every entry point of the one-shot commands
// fails within about kafka.dial-timeout with a *TimeoutError naming that
// setting and the broker (before: "i/o timeout" or "context deadline
// exceeded", naming no setting).
func TestFrozenBrokerNamesDialTimeout(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	addr := silentBroker(t)
	cfg := DefaultConfig()
	cfg.Brokers = []string{addr}
	cfg.DialTimeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, f := range map[string]func() error{
		"Partitions":           func() error { _, err := Partitions(ctx, cfg, "t"); return err },
		"NewestHeaders":        func() error { _, err := NewestHeaders(ctx, cfg, "t"); return err },
		"CommittedHeads":       func() error { _, err := CommittedHeads(ctx, cfg, "t"); return err },
		"TopicMaxMessageBytes": func() error { _, err := TopicMaxMessageBytes(ctx, cfg, "t"); return err },
		"CanCreateTopic":       func() error { return CanCreateTopic(ctx, cfg, "t") },
		"CanCreateMirror":      func() error { return CanCreateMirror(ctx, cfg, "t") },
		"LatestByKey":          func() error { _, _, err := LatestByKey(ctx, cfg, "t", []byte("k")); return err },
		"DialLeader":           func() error { _, err := DialLeader(ctx, cfg, "t", 0); return err },
		"Probe":                func() error { _, err := Probe(ctx, cfg); return err },
		"PartitionReader": func() error {
			r := NewPartitionReader(cfg, "t", 0, false)
			defer r.Close()
			_, _, err := r.Offsets(ctx)
			return err
		},
		"Reader": func() error {
			r := NewReader(cfg, false)
			defer r.Close()
			_, err := r.Leaders(ctx, "t")
			return err
		},
	} {
		start := time.Now()
		err := f()
		if d := time.Since(start); d > 25*time.Second { // LatestByKey retries for startupRetryFor (20 s)
			t.Errorf("%s: %s", name, d)
		}
		wantTimeout(t, name, err, "kafka.dial-timeout", addr)
	}
}

// A broker that stops answering produce requests (kfake holding them):
// the write fails naming kafka.write-timeout.
func TestFrozenBrokerNamesWriteTimeout(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, -1, 0, 0)
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	cl.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		cl.SleepControl(func() { <-gate })
		return nil, nil, false
	})
	cfg := DefaultConfig()
	cfg.Brokers = cl.ListenAddrs()
	cfg.WriteTimeout = 200 * time.Millisecond
	cfg.MaxAttempts, cfg.DeliveryTimeout = 2, 0
	p := NewProducer(cfg, &kafka.Hash{}, zap.NewNop())
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := p.Begin(ctx, roundFrom(0, 3))
	if err == nil {
		err = p.Wait(ctx, r)
	}
	wantTimeout(t, "produce", err, "kafka.write-timeout", cl.ListenAddrs()[0])
}
