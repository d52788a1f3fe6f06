package sink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/twmb/franz-go/pkg/kfake"
)

// whileLeader against kfake: a read that only ends when cancelled (a
// paused leader) ends with errLeaderMoved once the metadata names another
// leader; a read that completes returns its result, leader moved or not;
// a read's own error is returned as it is while the leader stays.
func TestWhileLeader(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl := newCluster(c.ListenAddrs(), time.Second, false, nil)
	t.Cleanup(cl.close)
	ctx := context.Background()
	leader := func() int32 {
		meta, err := cl.metadata(ctx, "t", true)
		if err != nil {
			t.Fatal(err)
		}
		return leaderOf(meta, 0)
	}
	other := func(id int32) int32 { return 1 - id } // kfake's nodes are 0 and 1

	t.Run("moved", func(t *testing.T) {
		from := leader()
		started := make(chan struct{})
		go func() {
			<-started
			if err := c.MoveTopicPartition("t", 0, other(from)); err != nil {
				t.Error(err)
			}
		}()
		// Bounded: a move not seen ends with the deadline, not errLeaderMoved.
		bounded, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := whileLeader(bounded, cl, "t", 0, from, func(ctx context.Context) (int, error) {
			close(started)
			<-ctx.Done() // a paused broker: no answer until given up
			return 0, ctx.Err()
		})
		if !errors.Is(err, errLeaderMoved) || !retriable(err) {
			t.Fatalf("got %v, want a retriable error wrapping errLeaderMoved", err)
		}
		if got := leader(); got != other(from) {
			t.Fatalf("leader %d after the move, want %d", got, other(from))
		}
	})
	t.Run("answered", func(t *testing.T) {
		from := leader()
		v, err := whileLeader(ctx, cl, "t", 0, from, func(ctx context.Context) (int, error) { return 7, nil })
		if err != nil || v != 7 {
			t.Fatalf("got %d, %v; want 7, nil", v, err)
		}
	})
	t.Run("answered as it moved", func(t *testing.T) {
		from := leader()
		v, err := whileLeader(ctx, cl, "t", 0, from, func(ctx context.Context) (int, error) {
			if err := c.MoveTopicPartition("t", 0, other(from)); err != nil {
				return 0, err
			}
			<-ctx.Done()
			return 8, nil // completed although cancelled: its result stands
		})
		if err != nil || v != 8 {
			t.Fatalf("got %d, %v; want 8, nil", v, err)
		}
	})
	t.Run("own error", func(t *testing.T) {
		from := leader()
		boom := errors.New("boom")
		_, err := whileLeader(ctx, cl, "t", 0, from, func(ctx context.Context) (int, error) { return 0, boom })
		if err != boom {
			t.Fatalf("got %v, want the read's own error", err)
		}
	})
}

// dialPartition to a broker that never answers, with SASL (kafka-go runs
// the SASL exchange without deadlines): it ends after its timeout, and at
// once when its ctx is cancelled, instead of waiting for ever.
func TestDialPartitionSilentBroker(t *testing.T) {
	addr := silentBroker(t)
	sec := NewSecurity(Config{SASL: SASL{Mechanism: MechanismPlain, Username: "u", Password: "p"}})
	if sec.err != nil {
		t.Fatal(sec.err)
	}
	silentDials(t, func(ctx context.Context, timeout time.Duration) error {
		conn, err := dialPartition(ctx, sec, timeout, addr, "t", 0)
		if err == nil {
			conn.Close()
		}
		return err
	}, func(err error) string {
		if !retriable(err) {
			return "want a retriable error (another broker, or the same later)"
		}
		return ""
	})
}

// silentDials runs dial against a broker that never answers, once with a
// timeout of 300 ms and once cancelled after 200 ms (an hour's timeout):
// each must end within 30 s with an error that check accepts (it returns
// what is wrong, or "").
func silentDials(t *testing.T, dial func(ctx context.Context, timeout time.Duration) error, check func(error) string) {
	t.Helper()
	for _, c := range []struct {
		name    string
		timeout time.Duration
		cancel  bool
	}{
		{"timeout", 300 * time.Millisecond, false},
		{"cancelled", time.Hour, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- dial(ctx, c.timeout) }()
			if c.cancel {
				time.Sleep(200 * time.Millisecond) // into the SASL handshake
				cancel()
			}
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("connected to a broker that never answers")
				}
				if bad := check(err); bad != "" {
					t.Fatalf("%v: %s", err, bad)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("still waiting on a silent broker after 30 s")
			}
		})
	}
}

// A connection from dialPartition is closed when its ctx ends, whatever
// deadline its user set: the reads of a leader that moved end at once
// (whileLeader), not at their timeout.
func TestDialPartitionClosedByCtx(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, err := dialPartition(ctx, nil, 5*time.Second, c.ListenAddrs()[0], "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{}) // no deadline at all
	if _, _, err := conn.ReadOffsets(); err != nil {
		t.Fatalf("read before the cancel: %v", err)
	}
	cancel()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, err := conn.ReadOffsets()
		if err != nil {
			if !retriable(err) {
				t.Fatalf("read after the cancel: %v, want a retriable error", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection still answers 30 s after its ctx ended")
		}
		time.Sleep(10 * time.Millisecond) // the AfterFunc runs in its own goroutine
	}
}

// Security.Dialer (kafka-go's own clients: package consumer) gives up
// within its timeout, or when its ctx ends, on a broker that accepts
// connections and never answers; against kfake with SASL it logs in with
// the right password (a request then works on the connection). A refused
// login's *SecurityError needs a real broker's answer (TestSecureConsumer).
func TestSecurityDialer(t *testing.T) {
	silent := silentBroker(t)
	t.Run("silent broker", func(t *testing.T) {
		sec := NewSecurity(Config{SASL: SASL{Mechanism: MechanismPlain, Username: "u", Password: "p"}})
		silentDials(t, func(ctx context.Context, timeout time.Duration) error {
			conn, err := sec.Dialer(timeout).DialContext(ctx, "tcp", silent)
			if err == nil {
				conn.Close()
			}
			return err
		}, func(err error) string {
			if errors.Is(err, ErrSecurity) {
				return "a silent broker is not a security failure (a retry may reach it)"
			}
			return ""
		})
	})
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.EnableSASL(),
		kfake.Superuser(MechanismSCRAM512, "admin", "right-password"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	addr := kf.ListenAddrs()[0]
	ctx := context.Background()
	t.Run("right password", func(t *testing.T) {
		sec := NewSecurity(Config{SASL: SASL{Mechanism: MechanismSCRAM512, Username: "admin", Password: "right-password"}})
		conn, err := sec.Dialer(5*time.Second).DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ReadPartitions("t"); err != nil {
			t.Fatalf("a request after the login: %v", err)
		}
	})
	t.Run("closed during the login", func(t *testing.T) {
		// kfake closes the connection on a wrong password where Kafka
		// answers error 58: a close is the broker's failure, retried,
		// never a refused login (which would stop the publisher).
		sec := NewSecurity(Config{SASL: SASL{Mechanism: MechanismSCRAM512, Username: "admin", Password: "wrong"}})
		_, err := sec.Dialer(5*time.Second).DialContext(ctx, "tcp", addr)
		if err == nil || errors.Is(err, ErrSecurity) || IsFatal(err) {
			t.Fatalf("%v: want a retried connection error", err)
		}
	})
}

func TestValidateSecurity(t *testing.T) {
	if err := ValidateSecurity(secure.TLS{}, SASL{}); err != nil {
		t.Fatalf("no TLS, no SASL: %v", err)
	}
	err := ValidateSecurity(secure.TLS{}, SASL{Mechanism: MechanismPlain})
	for _, want := range []string{"kafka.sasl.username", "kafka.sasl.password", "PLAIN sends the password in clear"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PLAIN without a login or TLS: %v, want %q", err, want)
		}
	}
}
