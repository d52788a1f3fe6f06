//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stallProxy is a TCP proxy the test owns between the publisher and
// MariaDB. Stall freezes every open connection: bytes stop flowing both
// ways but the sockets stay open, as when a stateful firewall or NAT drops
// a connection silently. Connections opened afterwards flow normally.
type stallProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen []*atomic.Bool
	stall  chan struct{} // closed to release frozen pipes at cleanup
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, stall: make(chan struct{})}
	go p.accept()
	t.Cleanup(func() { ln.Close(); close(p.stall) })
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		frozen := new(atomic.Bool)
		p.mu.Lock()
		p.frozen = append(p.frozen, frozen)
		p.mu.Unlock()
		go p.pipe(c, up, frozen)
		go p.pipe(up, c, frozen)
	}
}

func (p *stallProxy) pipe(src, dst net.Conn, frozen *atomic.Bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if frozen.Load() {
			<-p.stall // swallow everything, keep the sockets open
			src.Close()
			dst.Close()
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			dst.Close()
			return
		}
	}
}

// freeze stalls every connection open now.
func (p *stallProxy) freeze() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.frozen {
		f.Store(true)
	}
	n := len(p.frozen)
	p.frozen = nil
	return n
}

// A silent network stall to MariaDB is detected by the heartbeat and read
// timeout (read-timeout 5 s in the tests' configuration); the publisher
// reconnects and catches up with no gap.
func TestFaultNetworkStall(t *testing.T) {
	e := newEnv(t)
	proxy := newStallProxy(t, mysqlAddr)
	e.sourceAddr = proxy.addr()
	p := e.start()
	plan := workload.Generate(800, 0, 100, 6000, 1, 200, 200)
	pr := e.produceBackground(plan, 600)
	e.waitPublished(plan, 300, time.Minute)
	if n := proxy.freeze(); n == 0 {
		t.Fatal("no connection through the proxy to stall")
	}
	stalled := time.Now()
	rec := waitGrowth(e.topic, stalled, time.Minute)
	if rec < 0 {
		t.Fatal("the publisher did not recover from the stall")
	}
	t.Logf("stall detected and recovered after %s (read-timeout 5s)", rec.Round(time.Millisecond))
	if rec > 5*time.Second+5*time.Second {
		t.Fatalf("recovery %s exceeds read-timeout + backoff bound", rec)
	}
	e.finish("silent network stall to MariaDB (read-timeout 5 s)", pr, rec)
	if !logHas(p.log, "restarting from the last acknowledged position") {
		t.Fatal("the publisher did not log the reconnect")
	}
}

// Produce errors injected with kfake (an in-process Kafka) on one
// partition while the others succeed. Retriable errors are retried or make
// the pipeline restart from the last acknowledged position; non-retriable
// ones stop the publisher with an error naming the event; after the cause
// is gone a restart delivers everything. In every case: nothing lost,
// nothing reordered.
func TestFaultProduceErrors(t *testing.T) {
	cases := []struct {
		name     string
		code     int16 // -1: the broker writes the other partitions and leaves the victim out of its answer
		failures int32 // produce requests to fail on the partition
		fatal    bool
	}{
		{"victim unanswered x3, the other partitions written (only the victim's batch is resent)", -1, 3, false},
		{"NOT_LEADER_OR_FOLLOWER x3 (retried by the producer)", 6, 3, false},
		{"REQUEST_TIMED_OUT x12 (retried within kafka.delivery-timeout)", 7, 12, false},
		{"MESSAGE_TOO_LARGE once (records re-sent one by one, all accepted)", 10, 1, false},
		{"MESSAGE_TOO_LARGE until fixed (fail policy: stop, restart after fix)", 10, 1 << 30, true},
		{"CORRUPT_MESSAGE x12", 2, 12, false},
	}
	const parts = 6
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newEnv(t)
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, e.topic))
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			e.kafka = cluster.ListenAddrs()
			var failed atomic.Int32
			var fixed atomic.Bool
			const victim = 2
			cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
				cluster.KeepControl()
				pr := req.(*kmsg.ProduceRequest)
				hit := false
				for _, tp := range pr.Topics {
					for _, p := range tp.Partitions {
						hit = hit || p.Partition == victim
					}
				}
				if !hit || fixed.Load() || failed.Load() >= c.failures {
					return nil, nil, false
				}
				failed.Add(1)
				if c.code < 0 {
					// Drop the victim from the request: kfake writes the
					// others and its answer has no entry for the victim.
					for i := range pr.Topics {
						parts := pr.Topics[i].Partitions[:0]
						for _, p := range pr.Topics[i].Partitions {
							if p.Partition != victim {
								parts = append(parts, p)
							}
						}
						pr.Topics[i].Partitions = parts
					}
					return nil, nil, false
				}
				resp := pr.ResponseKind().(*kmsg.ProduceResponse)
				for _, tp := range pr.Topics {
					rt := kmsg.NewProduceResponseTopic()
					rt.Topic = tp.Topic
					for _, p := range tp.Partitions {
						rp := kmsg.NewProduceResponseTopicPartition()
						rp.Partition = p.Partition
						rp.ErrorCode = c.code
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
				return resp, nil, true
			})
			p := e.start()
			plan := workload.Generate(uint64(900+i), 0, 60, 3000, 1, 100, 200)
			w := e.writer()
			if err := produce(w, plan); err != nil {
				t.Fatal(err)
			}
			rec := time.Duration(-1)
			if c.fatal {
				select {
				case err := <-p.done:
					p.done <- err
				case <-time.After(2 * time.Minute):
					t.Fatal("the publisher did not stop on a persistent MESSAGE_TOO_LARGE")
				}
				if code := p.cmd.ProcessState.ExitCode(); code != 1 {
					t.Fatalf("exit code %d, want 1", code)
				}
				if !logHas(p.log, "event") || !logHas(p.log, "MESSAGE_TOO_LARGE") && !logHas(p.log, "Message Size Too Large") && !logHas(p.log, "too large") {
					t.Fatalf("fatal error does not explain itself; see %s", p.log)
				}
				fixed.Store(true) // the cause is gone (e.g. the topic's max.message.bytes raised)
				restart := time.Now()
				e.start()
				rec = time.Since(restart)
			}
			rep := e.consumeFrom(cluster.ListenAddrs(), verify.NewChecker(plan.Last), 2*time.Minute)
			if failed.Load() < min(c.failures, 1) {
				t.Fatalf("only %d of %d injected failures were hit", failed.Load(), c.failures)
			}
			record("kfake: "+c.name, plan.Total, rep, rec)
			requireOK(t, rep)
			if c.code < 0 && rep.Duplicates != 0 {
				t.Fatalf("%d duplicates: the producer resent batches that were written", rep.Duplicates)
			}
		})
	}
}

// consumeFrom is consume against other brokers.
func (e *env) consumeFrom(addrs []string, c *verify.Checker, timeout time.Duration) verify.Report {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cons := verify.NewConsumer(sink.Config{Brokers: addrs}, e.topic)
	for {
		recs, err := cons.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			e.t.Fatalf("consume %s: %v", e.topic, err)
		}
		c.Add(recs...)
		if c.Complete() || ctx.Err() != nil {
			return c.Report()
		}
		time.Sleep(100 * time.Millisecond)
	}
}
