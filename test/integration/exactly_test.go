//go:build integration

package integration

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// committedConsumer reads the test's topic as a consumer with
// isolation.level=read_committed (franz-go filters aborted transactions;
// kafka-go does not, see consumer/doc.go).
type committedConsumer struct {
	cl *kgo.Client
}

func newCommittedConsumer(t *testing.T, topic string) *committedConsumer {
	t.Helper()
	return newCommittedConsumerOn(t, brokers, topic)
}

// newCommittedConsumerOn is newCommittedConsumer on the brokers addrs (the
// 3-broker cluster).
func newCommittedConsumerOn(t *testing.T, addrs []string, topic string) *committedConsumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &committedConsumer{cl: cl}
}

func (c *committedConsumer) poll(ctx context.Context) []verify.Record {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	var out []verify.Record
	c.cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
		h := make(map[string]string, len(r.Headers))
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		seq, _ := strconv.ParseInt(h["seq_no"], 10, 64)
		out = append(out, verify.Record{Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset, Key: string(r.Key),
			EventID: h["event_id"], SeqNo: seq, Value: r.Value, Headers: h})
	})
	return out
}

// Exactly-once (kafka.delivery: exactly-once) through a SIGKILL during a
// transaction, the checkpoint deleted from Redis while stopped (its mirror
// copy, written every second, is older than the last committed
// transaction: the headers win), and a zombie: a publisher paused
// (SIGSTOP) while a second one starts, fenced when resumed (it exits with
// the named error). A read_committed consumer sees every event exactly
// once, in order.
func TestExactlyOnce(t *testing.T) {
	e := newEnv(t)
	e.noHA = true // the zombie is fenced by Kafka alone (with ha, the lease would stop it first)
	e.kafkaExtra = "  delivery: exactly-once\n"
	e.batchSize = 50 // many transactions
	plan := workload.Generate(7, 0, 200, 9000, 1, 20, 200)
	cons := newCommittedConsumer(t, e.topic)
	chk := verify.NewChecker(plan.Last)
	waitUnique := func(n int, timeout time.Duration) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for chk.Report().Unique < n {
			if time.Now().After(deadline) {
				rep := chk.Report()
				t.Fatalf("fewer than %d events committed within %s: %s", n, timeout, rep.String())
			}
			chk.Add(cons.poll(context.Background())...)
		}
	}

	a := e.start()
	pr := e.produceBackground(plan, 1500)
	waitUnique(1000, time.Minute)
	a.kill(t) // rows arriving all the time: most likely inside a transaction

	b := e.start()
	waitUnique(3000, time.Minute)
	b.kill(t)
	// The checkpoint lost while stopped; its mirror copy lags.
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	if err := rdb.Del(context.Background(), e.key).Err(); err != nil {
		t.Fatal(err)
	}
	c := e.start()
	if !logHas(c.log, "exactly-once: ") {
		t.Errorf("the restart without a Redis checkpoint did not resume from the last committed transaction (no exactly-once note)")
	}
	if logHas(c.log, "starting from the configured start") {
		t.Errorf("the restart resuming after the last committed transaction logged that it started from the configured start")
	}
	waitUnique(5000, time.Minute)

	// The zombie: c paused, d takes over (its InitProducerId fences c).
	_ = c.cmd.Process.Signal(syscall.SIGSTOP)
	e.serverID++ // the paused one's replica connection stays registered
	d := e.start()
	waitUnique(6000, time.Minute)
	_ = c.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
	case <-time.After(time.Minute):
		t.Fatal("the fenced publisher did not exit")
	}
	// Kafka's fence (PRODUCER_FENCED on its next transactional request) or
	// the checkpoint's (a write that would move it backwards) stops it,
	// whichever it meets first after SIGCONT.
	if !logHas(c.log, "producer fenced") && !logHas(c.log, "another publisher is writing the same checkpoint key") {
		b, _ := os.ReadFile(c.log)
		t.Errorf("the zombie did not exit with the fenced error:\n%s", tail(string(b), 8))
	}
	pr.wait(t)
	deadline := time.Now().Add(2 * time.Minute)
	for !chk.Complete() && time.Now().Before(deadline) {
		chk.Add(cons.poll(context.Background())...)
	}
	// A last poll: nothing more (no late duplicate).
	chk.Add(cons.poll(context.Background())...)
	rep := chk.Report()
	requireOK(t, rep)
	if rep.Duplicates != 0 {
		t.Fatalf("%d duplicates seen by the read_committed consumer", rep.Duplicates)
	}
	d.stop(t, 30*time.Second)
}
