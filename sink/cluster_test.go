package sink

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
)

// silentBroker accepts TCP connections and never answers, as a paused
// (SIGSTOP) broker whose kernel still completes the handshake.
func silentBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	t.Cleanup(func() {
		ln.Close()
		close(held)
		for c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
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
