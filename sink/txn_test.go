package sink

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// eosProducer returns an exactly-once Producer on cl under transactional id id.
func eosProducer(t *testing.T, cl *kfake.Cluster, id string) *Producer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Brokers = cl.ListenAddrs()
	cfg.Delivery, cfg.TransactionalID = DeliveryExactlyOnce, id
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg = cfg.Transactional("k")
	p := NewProducer(cfg, &kafka.Hash{}, zap.NewNop())
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// committedKeys reads every record of topic "t" at level (read_committed:
// franz-go filters aborted transactions): the keys by partition.
func committedKeys(t *testing.T, brokers []string, level kgo.IsolationLevel) map[int32][]string {
	t.Helper()
	return readT(t, brokers, level, func(r *kgo.Record) (string, bool) { return string(r.Key), true })
}

// readT reads every record of topic "t" at level and returns what pick
// takes of each (nothing when it says false), by partition, in log order.
// It reads until records came and then none for readQuiet (kfake answers
// a fetch with every partition's records at once: the quiet only catches
// a record beyond what was expected), within 30 s: a fixed window from
// the client's start failed under load (a -race run of every package)
// before the first fetch had returned everything.
func readT(t *testing.T, brokers []string, level kgo.IsolationLevel, pick func(*kgo.Record) (string, bool)) map[int32][]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("t"), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	out := map[int32][]string{}
	seen, quiets := false, 0
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), readQuiet)
		fs := cl.PollFetches(ctx)
		quiet := ctx.Err() != nil
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if v, ok := pick(r); ok {
				out[r.Partition] = append(out[r.Partition], v)
			}
		})
		seen = seen || n > 0
		if quiet && n == 0 && seen {
			// Twice in a row: on a loaded machine the fetch of the other
			// partitions (whose start offsets the client looks up on its
			// own) can take one quiet period (a CI run read 9 of 32).
			if quiets++; quiets == 2 {
				return out
			}
		} else {
			quiets = 0
		}
	}
	return out
}

// readQuiet is how long readT waits for more records after the last (twice).
const readQuiet = 1500 * time.Millisecond

func wantKeys(rounds ...[]kafka.Message) map[int32][]string {
	want := map[int32][]string{}
	for _, msgs := range rounds {
		for _, m := range msgs {
			p := int32((&kafka.Hash{}).Balance(m, 0, 1, 2))
			want[p] = append(want[p], string(m.Key))
		}
	}
	return want
}

func sameKeys(t *testing.T, what string, got, want map[int32][]string) {
	t.Helper()
	for p := range int32(3) {
		if !slicesEqual(got[p], want[p]) {
			t.Errorf("%s: partition %d: %d records %v…, want %d %v…", what, p, len(got[p]), head(got[p]), len(want[p]), head(want[p]))
		}
	}
}

// Each round is one committed transaction: a read_committed consumer sees
// every record once, in order, and the newest committed record's headers
// are read back past the commit markers.
func TestKfakeTxnCommit(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, 0, 0, 0)
	p := eosProducer(t, cl, "cdc-outbox-k")
	if p.MaxInFlight() != MaxInFlight {
		t.Fatalf("MaxInFlight = %d, want %d in exactly-once mode (rounds pipelined inside the transaction)", p.MaxInFlight(), MaxInFlight)
	}
	ctx := context.Background()
	var rounds [][]kafka.Message
	for i := range 4 {
		m := roundFrom(i*30, 30)
		for j := range m {
			m[j].Headers = []kafka.Header{{Key: HeaderTxnEnd, Value: []byte("b.000001:" + string(m[j].Key))}}
		}
		if err := p.WriteMessages(ctx, m...); err != nil {
			t.Fatal(err)
		}
		rounds = append(rounds, m)
	}
	sameKeys(t, "read_committed", committedKeys(t, cl.ListenAddrs(), kgo.ReadCommitted()), wantKeys(rounds...))
	cfg := p.cfg
	heads, err := CommittedHeads(ctx, cfg, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := wantKeys(rounds...)
	for part := range int32(3) {
		keys := want[part]
		if got := heads[int(part)][HeaderTxnEnd]; got != "b.000001:"+keys[len(keys)-1] {
			t.Errorf("partition %d: newest committed binlog_txn_end %q, want b.000001:%s", part, got, keys[len(keys)-1])
		}
	}
}

// A newer producer of the same transactional id fences the older one: its
// next round fails with the named, fatal error and writes nothing visible.
func TestKfakeTxnProducerFenced(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, 0, 0, 0)
	ctx := context.Background()
	a := eosProducer(t, cl, "cdc-outbox-k")
	first := roundFrom(0, 30)
	if err := a.WriteMessages(ctx, first...); err != nil {
		t.Fatal(err)
	}
	b := eosProducer(t, cl, "cdc-outbox-k")
	second := roundFrom(30, 30)
	if err := b.WriteMessages(ctx, second...); err != nil {
		t.Fatal(err)
	}
	err := a.WriteMessages(ctx, roundFrom(1000, 30)...)
	var fe *FencedError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFenced) || !IsFatal(err) || fe.TransactionalID != "cdc-outbox-k" {
		t.Fatalf("the fenced producer's round: %v, want a fatal *FencedError", err)
	}
	t.Log(err)
	sameKeys(t, "read_committed", committedKeys(t, cl.ListenAddrs(), kgo.ReadCommitted()), wantKeys(first, second))
}

// A refused commit or a batch refused inside a transaction aborts it;
// the round is produced again in a new transaction: a read_committed
// consumer sees each record once (and, for the refused commit, a
// read_uncommitted one sees the aborted copies too).
func TestKfakeTxnAborted(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	t.Run("commit refused", func(t *testing.T) {
		cl, _ := kfakeFault(t, 0, 0, 0)
		var armed atomic.Bool
		var refused atomic.Int32
		cl.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
			cl.KeepControl()
			r := req.(*kmsg.EndTxnRequest)
			if !armed.Load() || !r.Commit || refused.Load() > 0 {
				return nil, nil, false
			}
			refused.Add(1)
			resp := r.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = 48 // INVALID_TXN_STATE: abortable
			return resp, nil, true
		})
		p := eosProducer(t, cl, "cdc-outbox-k")
		ctx := context.Background()
		r1, r2 := roundFrom(0, 30), roundFrom(30, 30)
		if err := p.WriteMessages(ctx, r1...); err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		if err := p.WriteMessages(ctx, r2...); err != nil {
			t.Fatal(err)
		}
		if refused.Load() != 1 {
			t.Fatal("no commit refused")
		}
		sameKeys(t, "read_committed", committedKeys(t, cl.ListenAddrs(), kgo.ReadCommitted()), wantKeys(r1, r2))
		all := committedKeys(t, cl.ListenAddrs(), kgo.ReadUncommitted())
		if n := len(all[0]) + len(all[1]) + len(all[2]); n != 90 {
			t.Fatalf("read_uncommitted: %d records, want 90 (round 2 twice: once aborted)", n)
		}
	})
	t.Run("produce refused", func(t *testing.T) {
		// UNKNOWN_PRODUCER_ID (no epoch bump inside a transaction) twice.
		cl, failed := kfakeFault(t, 1, 59, 2)
		p := eosProducer(t, cl, "cdc-outbox-k")
		ctx := context.Background()
		r1, r2 := roundFrom(0, 30), roundFrom(30, 30)
		for _, r := range [][]kafka.Message{r1, r2} {
			if err := p.WriteMessages(ctx, r...); err != nil {
				t.Fatal(err)
			}
		}
		if failed.Load() != 2 {
			t.Fatalf("%d failures injected, want 2", failed.Load())
		}
		sameKeys(t, "read_committed", committedKeys(t, cl.ListenAddrs(), kgo.ReadCommitted()), wantKeys(r1, r2))
	})
}

// eosWriter returns an exactly-once Writer on cl (topic "t", 3
// partitions) under transactional id "cdc-outbox-k", with rounds of at
// most 10 records and the transaction interval given.
func eosWriter(t *testing.T, cl *kfake.Cluster, interval time.Duration) *Writer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Brokers = cl.ListenAddrs()
	cfg.Delivery, cfg.TransactionalID = DeliveryExactlyOnce, "cdc-outbox-k"
	cfg.BatchSize, cfg.TransactionInterval = 10, interval
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return NewWriter(cfg.Transactional("k"), router.New(router.Config{Topic: "t"}, router.Reserved{}), router.Balancer(), zap.NewNop())
}

// binlogTxns returns binlog transactions from event id first on: sizes[i]
// events each (conversations 1..7), ends 100 apart.
func binlogTxns(first uint64, sizes ...int) []binlog.Txn {
	var out []binlog.Txn
	id := first
	for _, n := range sizes {
		var evs []binlog.Event
		for range n {
			evs = append(evs, ev(id, int64(id%7)+1, `{}`))
			id++
		}
		out = append(out, txn(uint32(id*100), evs...))
	}
	return out
}

// queued returns a channel holding txns, closed when close is set.
func queued(txns []binlog.Txn, close_ bool) chan binlog.Txn {
	in := make(chan binlog.Txn, len(txns)+1)
	for _, x := range txns {
		in <- x
	}
	if close_ {
		close(in)
	}
	return in
}

// eventIDs reads every record of topic "t" at level: the event ids by
// partition, in log order.
func eventIDs(t *testing.T, brokers []string, level kgo.IsolationLevel) map[int32][]string {
	t.Helper()
	return readT(t, brokers, level, func(r *kgo.Record) (string, bool) {
		for _, h := range r.Headers {
			if h.Key == router.HeaderEventID {
				return string(h.Value), true
			}
		}
		return "", false
	})
}

// checkOnce fails unless got holds event ids from..to each once, and each
// partition's in ascending order (binlog order per conversation).
func checkOnce(t *testing.T, what string, got map[int32][]string, from, to int) {
	t.Helper()
	seen := map[string]int{}
	for p, ids := range got {
		prev := 0
		for _, s := range ids {
			id, _ := strconv.Atoi(s)
			if id <= prev {
				t.Errorf("%s: partition %d: event %d after %d", what, p, id, prev)
			}
			prev = id
			seen[s]++
		}
	}
	for id := from; id <= to; id++ {
		if n := seen[strconv.Itoa(id)]; n != 1 {
			t.Errorf("%s: event %d seen %d times, want once", what, id, n)
		}
	}
	if len(seen) != to-from+1 {
		t.Errorf("%s: %d distinct events, want %d", what, len(seen), to-from+1)
	}
}

// ackLog collects a Writer's acknowledgements; events counts the events
// acknowledged so far (safe for concurrent use).
type ackLog struct {
	mu     sync.Mutex
	acks   []Ack
	events atomic.Int64
	done   chan struct{}
}

func collectAcks(w *Writer) *ackLog {
	l := &ackLog{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for a := range w.Acks() {
			l.mu.Lock()
			l.acks = append(l.acks, a)
			l.mu.Unlock()
			l.events.Add(int64(a.Events))
		}
	}()
	return l
}

// commits counts the EndTxn(commit) requests cl receives and records the
// events acknowledged (acked, set later) when each arrived; refuse says
// whether the coordinator refuses it (INVALID_TXN_STATE, abortable) or
// drops the connection (the answer lost, nothing committed).
type commits struct {
	n        atomic.Int32
	ackedAt  []int64 // events acknowledged when each commit arrived
	mu       sync.Mutex
	acked    atomic.Pointer[ackLog]
	refuse   func(n int32) bool
	drop     func(n int32) bool
	onCommit func()
}

func watchCommits(cl *kfake.Cluster, c *commits) {
	cl.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit {
			return nil, nil, false
		}
		n := c.n.Add(1)
		var acked int64
		if l := c.acked.Load(); l != nil {
			acked = l.events.Load()
		}
		c.mu.Lock()
		c.ackedAt = append(c.ackedAt, acked)
		c.mu.Unlock()
		if c.onCommit != nil {
			c.onCommit()
		}
		if c.drop != nil && c.drop(n) {
			return nil, errors.New("dropped"), true
		}
		if c.refuse != nil && c.refuse(n) {
			resp := r.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = 48 // INVALID_TXN_STATE: abortable
			return resp, nil, true
		}
		return nil, nil, false
	})
}

// A Kafka transaction spans many rounds: a queued backlog of 60 binlog
// transactions (one of 25 rows, larger than a round) in rounds of at most
// 10 records commits in far fewer transactions than rounds, with no
// acknowledgement before the first commit, and a read_committed consumer
// sees every event once, in order.
func TestKfakeTxnWriterSpansRounds(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, -1, 0, 0)
	c := &commits{}
	watchCommits(cl, c)
	w := eosWriter(t, cl, 30*time.Second)
	l := collectAcks(w)
	c.acked.Store(l)
	sizes := []int{3, 2, 25, 1}
	for range 56 {
		sizes = append(sizes, 3)
	}
	txns := binlogTxns(1, sizes...)
	if err := w.Run(context.Background(), queued(txns, true)); err != nil {
		t.Fatal(err)
	}
	<-l.done
	last := l.acks[len(l.acks)-1]
	if last.End != txns[len(txns)-1].End || l.events.Load() != 199 {
		t.Fatalf("last ack %s, %d events acknowledged; want %s, 199", last.End, l.events.Load(), txns[len(txns)-1].End)
	}
	// 199 records in rounds of at most 10: at least 20 rounds.
	if n := c.n.Load(); n < 1 || n > 3 {
		t.Errorf("%d commits for 20+ rounds, want 1 to 3 (a queued backlog commits when the Writer runs dry, or at the interval)", n)
	}
	if c.ackedAt[0] != 0 {
		t.Errorf("%d events acknowledged before the first commit", c.ackedAt[0])
	}
	checkOnce(t, "read_committed", eventIDs(t, cl.ListenAddrs(), kgo.ReadCommitted()), 1, 199)
}

// TransactionInterval 0 commits before every round (a transaction per
// round, the rounds still acknowledged only after their commit).
func TestKfakeTxnWriterIntervalZero(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, -1, 0, 0)
	c := &commits{}
	watchCommits(cl, c)
	w := eosWriter(t, cl, 0)
	l := collectAcks(w)
	c.acked.Store(l)
	txns := binlogTxns(1, 5, 5, 5, 5, 5, 5, 5, 5)
	if err := w.Run(context.Background(), queued(txns, true)); err != nil {
		t.Fatal(err)
	}
	<-l.done
	if n := c.n.Load(); n != 4 {
		t.Errorf("%d commits for 4 rounds, want 4", n)
	}
	for i, acked := range c.ackedAt {
		if acked > int64(10*i) {
			t.Errorf("commit %d: %d events acknowledged before it, at most %d committed", i+1, acked, 10*i)
		}
	}
	checkOnce(t, "read_committed", eventIDs(t, cl.ListenAddrs(), kgo.ReadCommitted()), 1, 40)
}

// A transaction of several rounds whose commit is refused is aborted and
// every round of it produced again: nothing is acknowledged before a
// commit succeeded, the read_committed consumer sees each event once and
// a read_uncommitted one sees the aborted copies too.
func TestKfakeTxnWriterCommitRefused(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, -1, 0, 0)
	c := &commits{refuse: func(n int32) bool { return n == 1 }}
	watchCommits(cl, c)
	w := eosWriter(t, cl, 30*time.Second)
	l := collectAcks(w)
	c.acked.Store(l)
	txns := binlogTxns(1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4)
	if err := w.Run(context.Background(), queued(txns, true)); err != nil {
		t.Fatal(err)
	}
	<-l.done
	if c.n.Load() < 2 || c.ackedAt[0] != 0 || c.ackedAt[1] != 0 {
		t.Fatalf("commits %d, acknowledged before each %v: want the refused one and its redo with nothing acknowledged before either", c.n.Load(), c.ackedAt)
	}
	if l.events.Load() != 48 || l.acks[len(l.acks)-1].End != txns[len(txns)-1].End {
		t.Fatalf("%d events acknowledged, want 48", l.events.Load())
	}
	checkOnce(t, "read_committed", eventIDs(t, cl.ListenAddrs(), kgo.ReadCommitted()), 1, 48)
	all := 0
	for _, ids := range eventIDs(t, cl.ListenAddrs(), kgo.ReadUncommitted()) {
		all += len(ids)
	}
	if all != 96 {
		t.Errorf("read_uncommitted: %d records, want 96 (each once aborted, once committed)", all)
	}
}

// A batch refused inside a transaction of several rounds (the 4th produce
// request: UNKNOWN_PRODUCER_ID, fatal to the transaction) aborts it;
// every round of it, the ones landed before the failure included, is
// produced again.
func TestKfakeTxnWriterRoundFailed(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, -1, 0, 0)
	var produces, failed atomic.Int32
	cl.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		if produces.Add(1) != 4 {
			return nil, nil, false
		}
		failed.Add(1)
		return produceError(req.(*kmsg.ProduceRequest), 59), nil, true
	})
	c := &commits{}
	watchCommits(cl, c)
	w := eosWriter(t, cl, 30*time.Second)
	l := collectAcks(w)
	c.acked.Store(l)
	txns := binlogTxns(1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4)
	if err := w.Run(context.Background(), queued(txns, true)); err != nil {
		t.Fatal(err)
	}
	<-l.done
	if failed.Load() != 1 || l.events.Load() != 48 {
		t.Fatalf("%d failures injected, %d events acknowledged; want 1, 48", failed.Load(), l.events.Load())
	}
	checkOnce(t, "read_committed", eventIDs(t, cl.ListenAddrs(), kgo.ReadCommitted()), 1, 48)
}

// A publisher that dies with a transaction of several rounds open (its
// commit never answered): none of those rounds is acknowledged nor
// visible; after the next start settles the id (InitProducerId aborts the
// transaction) the newest committed record of each partition is one of
// the last committed transaction, whose binlog_txn_end is the resume
// position; a Writer resuming there completes the stream with each event
// seen once.
func TestKfakeTxnWriterCrashMidTransaction(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, -1, 0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var crash atomic.Bool
	c := &commits{drop: func(int32) bool { return crash.Load() }, onCommit: func() {
		if crash.Load() {
			cancel() // the publisher dies as it asks for the commit
		}
	}}
	watchCommits(cl, c)
	first := binlogTxns(1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3)          // events 1..30
	second := binlogTxns(31, 3, 25, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3) // events 31..88, one binlog transaction over 3 rounds
	a := eosWriter(t, cl, 30*time.Second)
	la := collectAcks(a)
	if err := a.Run(context.Background(), queued(first, true)); err != nil {
		t.Fatal(err)
	}
	<-la.done
	b := eosWriter(t, cl, 30*time.Second)
	sent := &countObserver{}
	b.SetObserver(sent)
	lb := collectAcks(b)
	c.acked.Store(lb)
	crash.Store(true)
	if err := b.Run(ctx, queued(second, false)); err == nil {
		t.Fatal("the crashed Writer returned nil")
	}
	<-lb.done
	if len(lb.acks) != 0 {
		t.Fatalf("the crashed Writer acknowledged %v: its transaction never committed", lb.acks)
	}
	crash.Store(false)
	cfg := a.cfg
	if err := SettleTransactions(context.Background(), cfg, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, "read_committed after the crash", eventIDs(t, cl.ListenAddrs(), kgo.ReadCommitted()), 1, 30)
	uncommitted := 0
	for _, ids := range eventIDs(t, cl.ListenAddrs(), kgo.ReadUncommitted()) {
		uncommitted += len(ids)
	}
	// The crashed Writer asked for the commit once its rounds landed, with
	// the rounds of the second part that were not full still gathering
	// (their gap had not passed: latency-budget): what it sent was
	// written, then aborted.
	if n := sent.records.Load(); n < 28 || uncommitted != 30+int(n) {
		t.Fatalf("read_uncommitted: %d records, the crashed Writer sent %d; want 30 + what it sent, at least the 28 up to its binlog transaction over 3 rounds (written, aborted)", uncommitted, n)
	}
	heads, err := CommittedHeads(context.Background(), cfg, "t")
	if err != nil {
		t.Fatal(err)
	}
	resume := ""
	for p, h := range heads {
		end := h[router.HeaderTxnEnd]
		if id, _ := strconv.Atoi(h[router.HeaderEventID]); id > 30 || h[HeaderTxnPartial] != "" {
			t.Errorf("partition %d: newest committed record %v: not of the committed transaction", p, h)
		}
		if end > resume {
			resume = end
		}
	}
	if want := first[len(first)-1].End.FilePos(); resume != want {
		t.Fatalf("resume position %s, want %s (the last committed transaction's end)", resume, want)
	}
	// The next start resumes there: the second part once more.
	d := eosWriter(t, cl, 30*time.Second)
	ld := collectAcks(d)
	if err := d.Run(context.Background(), queued(second, true)); err != nil {
		t.Fatal(err)
	}
	<-ld.done
	checkOnce(t, "read_committed after the restart", eventIDs(t, cl.ListenAddrs(), kgo.ReadCommitted()), 1, 88)
}

// A round that cannot be begun inside an open transaction of several
// rounds (its new partition's AddPartitionsToTxn refused: INVALID_TXN_STATE)
// aborts the transaction; every round of it and the new one are produced
// again, each event seen once.
func TestKfakeTxnWriterAddRefused(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, -1, 0, 0)
	var adds, refused atomic.Int32
	cl.ControlKey(int16(kmsg.AddPartitionsToTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		if adds.Add(1) != 2 {
			return nil, nil, false
		}
		refused.Add(1)
		r := req.(*kmsg.AddPartitionsToTxnRequest)
		resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, tp := range r.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = tp.Topic
			for _, p := range tp.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, 48
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	w := eosWriter(t, cl, 30*time.Second)
	l := collectAcks(w)
	// Three rounds of conversation 1 alone (one partition), then all.
	var txns []binlog.Txn
	for i := range 6 {
		id := uint64(1 + 5*i)
		txns = append(txns, txn(uint32(id*100+500), ev(id, 1, `{}`), ev(id+1, 1, `{}`), ev(id+2, 1, `{}`), ev(id+3, 1, `{}`), ev(id+4, 1, `{}`)))
	}
	txns = append(txns, binlogTxns(31, 3, 3, 3, 3, 3, 3)...)
	if err := w.Run(context.Background(), queued(txns, true)); err != nil {
		t.Fatal(err)
	}
	<-l.done
	if refused.Load() != 1 || l.events.Load() != 48 {
		t.Fatalf("%d AddPartitionsToTxn refused, %d events acknowledged; want 1, 48", refused.Load(), l.events.Load())
	}
	checkOnce(t, "read_committed", eventIDs(t, cl.ListenAddrs(), kgo.ReadCommitted()), 1, 48)
}

// A commit whose outcome stays unknown (CONCURRENT_TRANSACTIONS on every
// attempt: also the answer to a commit sent again while the first one is
// being completed) is not produced again: the Writer stops with a
// *WriteError naming the commit, nothing acknowledged, each record
// written once (the restart's start decision reads what was committed).
func TestKfakeTxnWriterCommitUnknown(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, -1, 0, 0)
	cl.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = 51 // CONCURRENT_TRANSACTIONS
		return resp, nil, true
	})
	w := eosWriter(t, cl, 30*time.Second)
	l := collectAcks(w)
	err := w.Run(context.Background(), queued(binlogTxns(1, 4, 4, 4, 4, 4, 4, 4, 4), true))
	<-l.done
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, kafka.ConcurrentTransactions) || IsFatal(err) {
		t.Fatalf("Run = %v, want a restartable *WriteError with CONCURRENT_TRANSACTIONS", err)
	}
	t.Log(err)
	if len(l.acks) != 0 {
		t.Fatalf("acknowledged %v before any commit succeeded", l.acks)
	}
	all := 0
	for _, ids := range eventIDs(t, cl.ListenAddrs(), kgo.ReadUncommitted()) {
		all += len(ids)
	}
	if all != 32 {
		t.Errorf("read_uncommitted: %d records, want 32 (written once, not produced again)", all)
	}
}

// countObserver counts what the Producer reports: the Produce requests
// and their records, and the transactions ended.
type countObserver struct {
	idObserver
	requests, records, committed, aborted atomic.Int64
}

func (o *countObserver) Requested(n int) { o.requests.Add(1); o.records.Add(int64(n)) }
func (o *countObserver) Transacted(committed bool) {
	if committed {
		o.committed.Add(1)
	} else {
		o.aborted.Add(1)
	}
}

// The Observer is told of every Produce request with its records and of
// every transaction ended: the metrics of produce requests per second,
// records per request and transactions (health) come from it. A refused
// commit counts one aborted transaction.
func TestKfakeTxnWriterObserved(t *testing.T) {
	t.Parallel() // a kfake cluster or silent broker of its own; mostly waits
	cl, _ := kfakeFault(t, -1, 0, 0)
	c := &commits{refuse: func(n int32) bool { return n == 1 }}
	watchCommits(cl, c)
	w := eosWriter(t, cl, 30*time.Second)
	obs := &countObserver{}
	w.SetObserver(obs)
	l := collectAcks(w)
	txns := binlogTxns(1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3)
	if err := w.Run(context.Background(), queued(txns, true)); err != nil {
		t.Fatal(err)
	}
	<-l.done
	// 30 records in rounds of 10 to one broker, produced twice (the
	// first transaction's commit was refused, its rounds produced again).
	if n, r := obs.requests.Load(), obs.records.Load(); r != 60 || n < 6 {
		t.Errorf("%d requests with %d records reported, want 6 or more with 60", n, r)
	}
	if got, want := obs.committed.Load(), int64(c.n.Load()-1); got != want || obs.aborted.Load() != 1 {
		t.Errorf("transactions reported: %d committed, %d aborted; want %d, 1", got, obs.aborted.Load(), want)
	}
}
