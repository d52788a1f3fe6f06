package sink

import (
	"context"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
	"go.uber.org/zap"
)

// The budget's split (the table docs/operations.md, "Latency budget",
// states).
func TestSplit(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		budget time.Duration
		want   Share
	}{
		{5 * ms, Share{Linger: ms, Gap: 3 * ms, TransactionInterval: 100 * ms}},
		{DefaultLatencyBudget, Share{Linger: 3 * ms, Gap: 9 * ms, TransactionInterval: 100 * ms}},
		{20 * ms, Share{Linger: 4 * ms, Gap: 12 * ms, TransactionInterval: 100 * ms}},
		{100 * ms, Share{Linger: 10 * ms, Gap: 60 * ms, TransactionInterval: 100 * ms}},
		{time.Second, Share{Linger: 10 * ms, Gap: 600 * ms, TransactionInterval: time.Second}},
		{MaxLatencyBudget, Share{Linger: 10 * ms, Gap: 6 * time.Second, TransactionInterval: 10 * time.Second}},
		{0, Share{}},
	} {
		if c.budget == 0 {
			c.want.TransactionInterval = DefaultTransactionInterval
		}
		if got := Split(c.budget); got != c.want {
			t.Errorf("Split(%s) = %+v, want %+v", c.budget, got, c.want)
		}
	}
}

func TestSendAt(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, c := range []struct {
		name      string
		last, now time.Time
		gap       time.Duration
		want      time.Time
	}{
		{"never sent: at once", time.Time{}, t0, 9 * ms, t0},
		{"a trickle: the last round a gap or more ago, at once", t0, t0.Add(9 * ms), 9 * ms, t0.Add(9 * ms)},
		{"long idle: at once", t0, t0.Add(time.Hour), 9 * ms, t0.Add(time.Hour)},
		{"within the gap: at its end", t0, t0.Add(2 * ms), 9 * ms, t0.Add(9 * ms)},
		{"no gap: at once", t0, t0.Add(ms), 0, t0.Add(ms)},
	} {
		if got := sendAt(c.last, c.now, c.gap); !got.Equal(c.want) {
			t.Errorf("%s: sendAt = %s, want %s", c.name, got.Sub(t0), c.want.Sub(t0))
		}
	}
}

// An exactly-once Writer run dry commits at most once per transaction
// interval (at least the gap): one transaction spans the rounds of an
// interval; without a budget, at once.
func TestCommitSpacing(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name          string
		gap, interval time.Duration
		want          time.Duration
	}{
		{"20 ms budget: the 100 ms interval", Split(20 * ms).Gap, Split(20 * ms).TransactionInterval, 100 * ms},
		{"an interval shorter than the gap: the gap", 60 * ms, 10 * ms, 60 * ms},
		{"interval 0 (a transaction per round): the gap", 9 * ms, 0, 9 * ms},
		{"no budget: at once", 0, 100 * ms, 0},
	} {
		if got := CommitSpacing(c.gap, c.interval); got != c.want {
			t.Errorf("%s: CommitSpacing(%s, %s) = %s, want %s", c.name, c.gap, c.interval, got, c.want)
		}
	}
}

// A commit due in the second half of a round's gap waits for the gap's
// end (the round due then goes first; the commit follows its landing).
func TestCommitAt(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, c := range []struct {
		name                      string
		lastCommit, lastSend, now time.Time
		spacing, gap              time.Duration
		want                      time.Time
	}{
		{"a trickle: at once", t0, t0.Add(50 * ms), t0.Add(200 * ms), 100 * ms, 12 * ms, t0.Add(200 * ms)},
		{"due early in a gap (a round just landed): at once", t0, t0.Add(98 * ms), t0.Add(101 * ms), 100 * ms, 12 * ms, t0.Add(101 * ms)},
		{"due at a gap's start: at once", t0, t0.Add(100 * ms), t0.Add(100 * ms), 100 * ms, 12 * ms, t0.Add(100 * ms)},
		{"due in a gap's second half: at its end", t0, t0.Add(92 * ms), t0.Add(93 * ms), 100 * ms, 12 * ms, t0.Add(104 * ms)},
		{"due at half the gap: at once", t0, t0.Add(94 * ms), t0.Add(95 * ms), 100 * ms, 12 * ms, t0.Add(100 * ms)},
		{"no round for a gap or more: at the spacing", t0, t0.Add(80 * ms), t0.Add(90 * ms), 100 * ms, 12 * ms, t0.Add(100 * ms)},
		{"no budget: at the spacing", t0, t0.Add(92 * ms), t0.Add(93 * ms), 0, 0, t0.Add(93 * ms)},
		{"never sent: at the spacing", t0, time.Time{}, t0.Add(50 * ms), 100 * ms, 12 * ms, t0.Add(100 * ms)},
	} {
		if got := commitAt(c.lastCommit, c.lastSend, c.now, c.spacing, c.gap); !got.Equal(c.want) {
			t.Errorf("%s: commitAt = %s, want %s", c.name, got.Sub(t0), c.want.Sub(t0))
		}
	}
}

// cadenceWriter returns a Writer on cl (topic "t") with the latency
// budget given (and the transaction interval derived from it) (exactly-once when eos), told to obs.
func cadenceWriter(t *testing.T, brokers []string, budget time.Duration, eos bool, obs Observer) *Writer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Brokers, cfg.LatencyBudget = brokers, budget
	cfg.TransactionInterval = Split(budget).TransactionInterval // as package config derives it
	if eos {
		cfg.Delivery, cfg.TransactionalID = DeliveryExactlyOnce, "cdc-outbox-k"
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(cfg.Transactional("k"), router.New(router.Config{Topic: "t"}, router.Reserved{}), router.Balancer(), zap.NewNop())
	w.SetObserver(obs)
	return w
}

// stream sends n one-row transactions to w, one per millisecond, and
// returns how long it took until every one was acknowledged.
func stream(t *testing.T, w *Writer, n int) time.Duration {
	t.Helper()
	l := collectAcks(w)
	in := make(chan binlog.Txn)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background(), in) }()
	began := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	ones := make([]int, n)
	for i := range ones {
		ones[i] = 1
	}
	for _, x := range binlogTxns(1, ones...) {
		in <- x
		<-tick.C
	}
	close(in)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-l.done
	if got := l.events.Load(); got != int64(n) {
		t.Fatalf("%d events acknowledged, want %d", got, n)
	}
	return time.Since(began)
}

// With a latency budget, a steady stream of small transactions goes in at
// most one produce round (one request: one broker) per gap, and an
// exactly-once Writer commits at most once per transaction interval (one
// transaction spans several rounds), however fast the broker answers;
// without one (budget 0), a round goes as soon as the previous one is
// answered: many more.
func TestWriterCadence(t *testing.T) {
	cl, _ := kfakeFault(t, -1, 0, 0)
	const n = 300
	for _, eos := range []bool{false, true} {
		budget := 50 * time.Millisecond
		gap := Split(budget).Gap
		obs := &countObserver{}
		d := stream(t, cadenceWriter(t, cl.ListenAddrs(), budget, eos, obs), n)
		// The first round goes at once, then at most one per gap, plus
		// the last at shutdown.
		bound := int64(d/gap) + 2
		if got := obs.requests.Load(); got > bound {
			t.Errorf("exactly-once %v: %d produce requests in %s, want at most %d (one per %s gap)", eos, got, d, bound, gap)
		}
		spacing := CommitSpacing(gap, Split(budget).TransactionInterval)
		if got, most := obs.committed.Load(), int64(d/spacing)+2; got > most {
			t.Errorf("exactly-once %v: %d commits in %s, want at most %d (one per %s transaction interval)", eos, got, d, most, spacing)
		}
		free := &countObserver{}
		stream(t, cadenceWriter(t, cl.ListenAddrs(), 0, eos, free), n)
		if a, b := obs.requests.Load(), free.requests.Load(); a >= b {
			t.Errorf("exactly-once %v: %d requests with a budget, %d without: want fewer with", eos, a, b)
		}
	}
}

// A trickle pays no wait: a round whose predecessor began a gap ago or
// longer goes at once, and the next one waits for the gap.
func TestWriterTrickleAtOnce(t *testing.T) {
	cl, _ := kfakeFault(t, -1, 0, 0)
	budget := 10 * time.Second // a gap of 6 s: no round trip comes near it
	gap := Split(budget).Gap
	obs := &countObserver{}
	w := cadenceWriter(t, cl.ListenAddrs(), budget, false, obs)
	in := make(chan binlog.Txn)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background(), in) }()
	txns := binlogTxns(1, 1, 1)
	first := time.Now()
	in <- txns[0]
	<-w.Acks()
	if d := time.Since(first); d >= gap {
		t.Fatalf("the first round was acknowledged %s after it was queued: it waited for the %s gap", d, gap)
	}
	in <- txns[1]
	a := <-w.Acks()
	if d := time.Since(first); d < gap {
		t.Fatalf("the second round was acknowledged %s after the first began, within the %s gap", d, gap)
	}
	if a.End != txns[1].End {
		t.Fatalf("ack %s, want %s", a.End, txns[1].End)
	}
	close(in)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// An exactly-once Writer at a trickle commits at once (the previous
// commit is older than the transaction interval), and the next commit
// waits for the interval: the record's acknowledgement comes once its
// transaction committed.
func TestWriterCommitTrickle(t *testing.T) {
	cl, _ := kfakeFault(t, -1, 0, 0)
	budget := time.Second // a gap of 600 ms, a transaction interval of 1 s
	spacing := CommitSpacing(Split(budget).Gap, Split(budget).TransactionInterval)
	obs := &countObserver{}
	w := cadenceWriter(t, cl.ListenAddrs(), budget, true, obs)
	in := make(chan binlog.Txn)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background(), in) }()
	txns := binlogTxns(1, 1, 1)
	first := time.Now()
	in <- txns[0]
	<-w.Acks()
	committed := time.Now()
	if d := committed.Sub(first); d >= Split(budget).Gap {
		t.Fatalf("the first transaction committed %s after it was queued: it waited", d)
	}
	in <- txns[1]
	a := <-w.Acks()
	if d := time.Since(committed); d < spacing-50*time.Millisecond {
		t.Fatalf("the second commit came %s after the first, within the %s transaction interval", d, spacing)
	}
	if a.End != txns[1].End {
		t.Fatalf("ack %s, want %s", a.End, txns[1].End)
	}
	close(in)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := obs.committed.Load(); got != 2 {
		t.Fatalf("%d commits, want 2", got)
	}
}

// A Writer idle for longer than leaderCheck after its round landed
// carries on: the timer bounding the wait for an answer is not left
// running without a round in flight (it would land a round that is not
// there).
func TestWriterIdleAfterLanding(t *testing.T) {
	cl, _ := kfakeFault(t, -1, 0, 0)
	w := cadenceWriter(t, cl.ListenAddrs(), DefaultLatencyBudget, false, &countObserver{})
	in := make(chan binlog.Txn)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background(), in) }()
	txns := binlogTxns(1, 3, 3)
	in <- txns[0]
	<-w.Acks()
	time.Sleep(leaderCheck + leaderCheck/2) // idle: nothing in flight, nothing gathered
	in <- txns[1]
	if a := <-w.Acks(); a.End != txns[1].End {
		t.Fatalf("ack %s, want %s", a.End, txns[1].End)
	}
	close(in)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A round half full or more does not wait for the gap (its request is
// already large; a backlog is not slowed): here the second round, sent
// right after the first landed.
func TestWriterAmpleRoundNotPaced(t *testing.T) {
	cl, _ := kfakeFault(t, -1, 0, 0)
	budget := 10 * time.Second // a gap of 6 s
	gap := Split(budget).Gap
	w := cadenceWriter(t, cl.ListenAddrs(), budget, false, &countObserver{})
	in := make(chan binlog.Txn)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background(), in) }()
	half := DefaultConfig().BatchSize / 2
	txns := binlogTxns(1, half, half)
	began := time.Now()
	in <- txns[0]
	<-w.Acks()
	in <- txns[1]
	a := <-w.Acks()
	if d := time.Since(began); d >= gap {
		t.Fatalf("two rounds of %d records took %s: the second waited for the %s gap", half, d, gap)
	}
	if a.End != txns[1].End {
		t.Fatalf("ack %s, want %s", a.End, txns[1].End)
	}
	close(in)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
