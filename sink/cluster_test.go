package sink

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
)

// silentBroker accepts TCP connections and never answers, as a paused
// (SIGSTOP) broker whose kernel still completes the handshake: its address.
// Every connection is held (none is refused) until the test ends.
func silentBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A paused broker first among the bootstrap brokers does not hold the
// metadata request for the dial timeout: the next broker is dialled after
// dialStagger and answers.
func TestMetadataPastPausedBroker(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	const timeout = 30 * time.Second
	cl := newCluster(append([]string{silentBroker(t)}, kf.ListenAddrs()...), timeout, false, zap.NewNop())
	defer cl.close()
	began := time.Now()
	meta, err := cl.metadata(context.Background(), "t", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Partitions) != 3 {
		t.Fatalf("%d partitions, want 3", len(meta.Partitions))
	}
	if d := time.Since(began); d > timeout/2 {
		t.Fatalf("metadata took %s: the paused broker held it (dial timeout %s)", d, timeout)
	}
	if cl.meta.addr != kf.ListenAddrs()[0] {
		t.Fatalf("metadata connection to %s, want the live broker %s", cl.meta.addr, kf.ListenAddrs()[0])
	}
}

// metaTryTimeout: half of what the deadline leaves, at most the dial
// timeout, all of it when half is below dialStagger.
func TestMetaTryTimeout(t *testing.T) {
	const dial = 2 * time.Second
	for _, c := range []struct{ left, want time.Duration }{
		{time.Minute, dial},
		{4 * time.Second, dial},
		{2 * time.Second, time.Second},
		{time.Second, 500 * time.Millisecond},
		{500 * time.Millisecond, 250 * time.Millisecond},
		{400 * time.Millisecond, 400 * time.Millisecond},
		{0, 0},
		{-time.Second, 0},
	} {
		if got := metaTryTimeout(dial, c.left); got != c.want {
			t.Errorf("metaTryTimeout(%s, %s) = %s, want %s", dial, c.left, got, c.want)
		}
	}
}

// A metadata connection already open to a broker that stopped answering
// (paused) does not take a short deadline's whole budget (the checkpoint
// mirror's copy: checkpoint.timeout, 2 s): half of it, then a healthy
// broker answers.
func TestMetadataPastPausedConnection(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	const dial = 2 * time.Second
	cl := newCluster(kf.ListenAddrs(), dial, false, zap.NewNop())
	defer cl.close()
	paused, _, _ := fakeConn(t) // reads the requests, never answers
	cl.meta = paused
	ctx, cancel := context.WithTimeout(context.Background(), dial)
	defer cancel()
	if _, err := cl.metadata(ctx, "t", true); err != nil {
		t.Fatalf("metadata within %s with the metadata connection's broker paused: %v", dial, err)
	}
	if cl.meta.addr != kf.ListenAddrs()[0] {
		t.Fatalf("metadata connection to %s, want the live broker %s", cl.meta.addr, kf.ListenAddrs()[0])
	}
}
