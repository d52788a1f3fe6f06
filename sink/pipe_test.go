package sink

// Unit tests of the Writer's rounds (flight.go) as production runs them,
// on a fake producer (no broker): at-least-once with up to MaxInFlight
// rounds in flight (the idempotent Producer), and exactly-once, the
// rounds inside Kafka transactions. Every test checks, as each
// acknowledgement is sent, that the fake had acknowledged (exactly-once:
// committed) every record it covers (ackCheck).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
)

// fakeRounds is a producer whose rounds are answered when the test says
// (hold: answer) or at once. fail queues the outcomes of the record of an
// event id, one each time it is produced (absent or nil: acknowledged).
// With txn it keeps the open transaction as the Producer does: the
// records acknowledged in it become visible at Commit and are dropped by
// Abort; WriteMessages is a transaction of its own, committed before it
// returns (Producer.writeTxn). It refuses what the Producer refuses: more
// than MaxInFlight rounds, Wait out of order, WriteMessages, Commit or
// Abort with rounds in flight, WriteMessages with a transaction open.
type fakeRounds struct {
	txn, hold bool

	mu       sync.Mutex
	inflight []*fakeRound
	begun    []*fakeRound
	visible  map[string]int // records acknowledged (exactly-once: committed): times, by event id
	order    []string       // the visible records, in the order they became visible
	open     []string       // exactly-once: records acknowledged in the open transaction
	txnOpen  bool
	began    time.Time // when the open transaction began
	log      []string  // what was asked, in order

	fail      map[string][]error
	beginErr  []error // the outcomes of Begin, one per call (nil: begun)
	commitErr []error // the outcomes of Commit, one per call (nil: committed)
	commitCtx bool    // Commit gets no answer: it returns when its ctx is done
	// writeTakes: each WriteMessages takes that long (a transaction of
	// its own with its retries), or until its ctx is done.
	writeTakes time.Duration

	waiting         chan int // the number of each round Wait is called for
	commits, aborts int
}

// fakeRound is a round begun: its number (1 on, in Begin order), its
// answer and its records' event ids.
type fakeRound struct {
	n   int
	r   *Round
	p   *fakePending
	ids []string
}

func newFakeRounds(txn, hold bool) *fakeRounds {
	return &fakeRounds{txn: txn, hold: hold, visible: map[string]int{}, fail: map[string][]error{}, waiting: make(chan int, 1024)}
}

func (f *fakeRounds) logf(format string, args ...any) {
	f.log = append(f.log, fmt.Sprintf(format, args...))
}

func (f *fakeRounds) MaxInFlight() int { return MaxInFlight }

func (f *fakeRounds) Begin(_ context.Context, msgs []kafka.Message) (*Round, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.inflight) >= MaxInFlight {
		return nil, fmt.Errorf("fake: %d rounds in flight already", len(f.inflight))
	}
	if len(f.beginErr) > 0 {
		err := f.beginErr[0]
		f.beginErr = f.beginErr[1:]
		if err != nil {
			f.logf("begin refused")
			return nil, err
		}
	}
	fr := &fakeRound{n: len(f.begun) + 1, p: &fakePending{done: make(chan struct{})}, ids: recordIDs(msgs)}
	fr.r = &Round{msgs: msgs, reqs: []*request{{p: fr.p}}}
	f.inflight, f.begun = append(f.inflight, fr), append(f.begun, fr)
	if f.txn && !f.txnOpen {
		f.txnOpen, f.began = true, time.Now()
	}
	f.logf("begin %d", fr.n)
	if !f.hold {
		close(fr.p.done)
	}
	return fr.r, nil
}

// answer answers rounds ns (numbers, 1 on).
func (f *fakeRounds) answer(ns ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range ns {
		if p := f.begun[n-1].p; !isClosed(p.done) {
			close(p.done)
		}
	}
}

func (f *fakeRounds) Wait(ctx context.Context, r *Round) error {
	f.mu.Lock()
	if len(f.inflight) == 0 || f.inflight[0].r != r {
		f.mu.Unlock()
		return errors.New("fake: Wait out of order")
	}
	fr := f.inflight[0]
	f.mu.Unlock()
	f.waiting <- fr.n
	select {
	case <-fr.p.done:
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight = f.inflight[1:]
	if !isClosed(fr.p.done) {
		// As the Producer: no answer, the batches given up.
		f.logf("wait %d: %v", fr.n, ctx.Err())
		return failedAll(len(fr.ids), ctx.Err())
	}
	f.logf("wait %d", fr.n)
	return f.produced(fr.ids, false)
}

// produced applies the outcome of producing the records ids (each one's
// next queued failure; the others acknowledged): exactly-once, into the
// open transaction, or, own (WriteMessages), committed at once when
// none failed.
func (f *fakeRounds) produced(ids []string, own bool) error {
	werrs := make(kafka.WriteErrors, len(ids))
	failed := false
	for i, id := range ids {
		if q := f.fail[id]; len(q) > 0 {
			werrs[i], f.fail[id] = q[0], q[1:]
			failed = failed || werrs[i] != nil
		}
	}
	if f.txn && own && failed {
		f.aborts++
		return abortedErrors(werrs, len(ids))
	}
	for i, id := range ids {
		if werrs[i] != nil {
			continue
		}
		if f.txn && !own {
			f.open = append(f.open, id)
		} else {
			f.visible[id]++
			f.order = append(f.order, id)
		}
	}
	if f.txn && own {
		f.commits++
	}
	if failed {
		return werrs
	}
	return nil
}

func failedAll(n int, err error) kafka.WriteErrors {
	werrs := make(kafka.WriteErrors, n)
	for i := range werrs {
		werrs[i] = err
	}
	return werrs
}

func (f *fakeRounds) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	f.mu.Lock()
	takes := f.writeTakes
	f.mu.Unlock()
	if takes > 0 {
		wait(ctx, takes)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.inflight) > 0 || f.txnOpen {
		return fmt.Errorf("fake: WriteMessages with %d rounds in flight, a transaction open: %v", len(f.inflight), f.txnOpen)
	}
	ids := recordIDs(msgs)
	f.logf("write %s", strings.Join(ids, ","))
	if err := ctx.Err(); err != nil {
		return failedAll(len(ids), err)
	}
	return f.produced(ids, true)
}

func (f *fakeRounds) TxnOpen() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.began, f.txnOpen
}

func (f *fakeRounds) Commit(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.txnOpen {
		return nil
	}
	if len(f.inflight) > 0 {
		return fmt.Errorf("fake: commit with %d rounds in flight", len(f.inflight))
	}
	f.logf("commit asked")
	if f.commitCtx {
		f.mu.Unlock()
		<-ctx.Done()
		f.mu.Lock()
		return fmt.Errorf("EndTxn(commit): %w", ctx.Err())
	}
	if len(f.commitErr) > 0 {
		err := f.commitErr[0]
		f.commitErr = f.commitErr[1:]
		if err != nil {
			f.logf("commit: %v", err)
			return fmt.Errorf("EndTxn(commit): %w", err)
		}
	}
	for _, id := range f.open {
		f.visible[id]++
		f.order = append(f.order, id)
	}
	f.open, f.txnOpen = nil, false
	f.commits++
	f.logf("commit")
	return nil
}

func (f *fakeRounds) Abort(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.inflight) > 0 {
		return fmt.Errorf("fake: abort with %d rounds in flight", len(f.inflight))
	}
	f.open, f.txnOpen = nil, false
	f.aborts++
	f.logf("abort")
	return nil
}

func (f *fakeRounds) Close() error { return nil }

// logged reports whether the fake's log has an entry starting with prefix.
func (f *fakeRounds) logged(prefix string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.log, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

func recordIDs(msgs []kafka.Message) []string {
	ids := make([]string, len(msgs))
	for i := range msgs {
		ids[i] = header(&msgs[i], router.HeaderEventID)
	}
	return ids
}

// ackCheck is an Observer checking each acknowledgement as the Writer
// sends it (Acked is called on the Writer's goroutine right after the
// send, before it does anything else): it ends a transaction after the
// last one acknowledged, and every record of the transactions it covers
// was acknowledged by the fake (exactly-once: committed).
type ackCheck struct {
	idObserver
	f    *fakeRounds
	txns []binlog.Txn
	next int      // the first transaction not acknowledged
	bad  []string // what was wrong
}

func (c *ackCheck) Acked(p binlog.Position) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	i := c.next
	for i < len(c.txns) && c.txns[i].End != p {
		i++
	}
	if i == len(c.txns) {
		c.bad = append(c.bad, fmt.Sprintf("acknowledged %s: no transaction after the last one acknowledged ends there", p))
		return
	}
	for _, x := range c.txns[c.next : i+1] {
		for j := range x.Events {
			if id := x.Events[j].EventID(); c.f.visible[id] == 0 {
				c.bad = append(c.bad, fmt.Sprintf("acknowledged %s with event %s not acknowledged by Kafka (exactly-once: not committed)", p, id))
			}
		}
	}
	c.next = i + 1
}

// acked returns how many transactions were acknowledged.
func (c *ackCheck) acked() int {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	return c.next
}

// fakeWriter returns a Writer on f (topic "t") with rounds of at most 10
// records and no latency budget (a round that is not full goes once the
// one ahead landed; a Writer run dry commits at once), told to c;
// exactly-once when f.txn, with the transaction interval given.
func fakeWriter(f *fakeRounds, interval time.Duration, c *ackCheck) *Writer {
	cfg := DefaultConfig()
	cfg.BatchSize, cfg.LatencyBudget = 10, 0
	if f.txn {
		cfg.Delivery, cfg.TransactionalID, cfg.TransactionInterval = DeliveryExactlyOnce, "cdc-outbox-k", interval
	}
	w := newWriter(cfg.Transactional("k"), router.New(router.Config{Topic: "t"}, router.Reserved{}), f, zap.NewNop())
	w.txn = f.txn
	w.SetObserver(c)
	return w
}

// pairs returns n binlog transactions of 2 events each (events 1..2n).
func pairs(n int) []binlog.Txn {
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = 2
	}
	return binlogTxns(1, sizes...)
}

// start runs w on in; the channel gives Run's error.
func start(ctx context.Context, w *Writer, in <-chan binlog.Txn) <-chan error {
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, in) }()
	return done
}

// result returns Run's error, failing if it takes longer than d.
func result(t *testing.T, done <-chan error, d time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Run did not return within %s", d)
		return nil
	}
}

// awaitWait waits until the Writer waits for round n.
func awaitWait(t *testing.T, f *fakeRounds, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-f.waiting:
			if got == n {
				return
			}
		case <-timeout:
			t.Fatalf("the Writer never waited for round %d", n)
		}
	}
}

// awaitLog waits until the fake's log has an entry starting with prefix.
func awaitLog(t *testing.T, f *fakeRounds, prefix string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !f.logged(prefix); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never asked: %s", prefix)
		}
	}
}

// checkDelivered fails unless the fake made events 1..n visible once each
// (in order when ordered), every acknowledgement passed c's checks, and
// the acknowledgements, in binlog order, cover every transaction of txns
// (each once) with their n events. It returns the acknowledgements' ends.
func checkDelivered(t *testing.T, f *fakeRounds, c *ackCheck, l *ackLog, txns []binlog.Txn, n int, ordered bool) []binlog.Position {
	t.Helper()
	<-l.done
	for _, b := range c.bad {
		t.Error(b)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := 1; id <= n; id++ {
		if k := f.visible[strconv.Itoa(id)]; k != 1 {
			t.Errorf("event %d visible %d times, want once", id, k)
		}
	}
	if len(f.visible) != n {
		t.Errorf("%d events visible, want %d", len(f.visible), n)
	}
	if ordered {
		for i, id := range f.order {
			if id != strconv.Itoa(i+1) {
				t.Fatalf("visible in the order %v, want 1..%d", f.order, n)
			}
		}
	}
	var ends []binlog.Position
	events, count := 0, 0
	for _, a := range l.acks {
		ends = append(ends, a.End)
		events, count = events+a.Events, count+a.Txns
	}
	if c.next != len(txns) || count != len(txns) || events != n {
		t.Errorf("acknowledged %d transactions (%d by count) with %d events, want %d with %d: %v", c.next, count, events, len(txns), n, ends)
	}
	return ends
}

// Up to MaxInFlight rounds are in flight; answers that come out of order
// are acknowledged in order, each round once the fake acknowledged it and
// every round before it: rounds 2 and 1 answered, both are acknowledged
// before the Writer waits for round 3; rounds 5 and 4 wait for round 3.
func TestPipelinedAcksInOrder(t *testing.T) {
	f := newFakeRounds(false, true)
	txns := pairs(25) // 50 events: 5 rounds of 10
	c := &ackCheck{f: f, txns: txns}
	w := fakeWriter(f, 0, c)
	l := collectAcks(w)
	done := start(context.Background(), w, queued(txns, true))
	awaitWait(t, f, 1)
	f.mu.Lock()
	begun := len(f.begun)
	f.mu.Unlock()
	if begun != MaxInFlight {
		t.Fatalf("%d rounds begun before the first was answered, want %d", begun, MaxInFlight)
	}
	f.answer(2)
	f.answer(1)
	awaitWait(t, f, 3)
	if got := c.acked(); got != 10 {
		t.Fatalf("%d transactions acknowledged when the Writer waits for round 3, want 10 (rounds 1 and 2)", got)
	}
	f.answer(5, 4)
	if got := c.acked(); got != 10 {
		t.Fatalf("%d transactions acknowledged with round 3 unanswered, want 10", got)
	}
	f.answer(3)
	if err := result(t, done, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ends := checkDelivered(t, f, c, l, txns, 50, true)
	want := []binlog.Position{txns[4].End, txns[9].End, txns[14].End, txns[19].End, txns[24].End}
	if !slices.Equal(ends, want) {
		t.Errorf("acknowledged %v, want one per round %v", ends, want)
	}
}

// A failed round, at-least-once, as the Writer handles it: a failure that
// is not MESSAGE_TOO_LARGE stops it with a restartable *WriteError naming
// the record, the rounds before acknowledged, nothing after; records
// refused as too large are resent one at a time, and the later rounds'
// records the Producer held back because of the failure
// (errEarlierFailed) are sent again, every event then acknowledged.
func TestPipelinedFailedRound(t *testing.T) {
	t.Run("fails", func(t *testing.T) {
		f := newFakeRounds(false, false)
		f.fail["13"] = []error{kafka.NotEnoughReplicas}
		txns := pairs(25)
		c := &ackCheck{f: f, txns: txns}
		w := fakeWriter(f, 0, c)
		l := collectAcks(w)
		err := result(t, start(context.Background(), w, queued(txns, true)), 10*time.Second)
		var we *WriteError
		if !errors.As(err, &we) || we.EventID != "13" || we.Pos != txns[6].End || !errors.Is(err, kafka.NotEnoughReplicas) || IsFatal(err) {
			t.Fatalf("Run = %v, want a restartable *WriteError for event 13 at %s", err, txns[6].End)
		}
		<-l.done
		for _, b := range c.bad {
			t.Error(b)
		}
		if len(l.acks) != 1 || l.acks[0].End != txns[4].End {
			t.Fatalf("acknowledged %v, want round 1 only (%s)", l.acks, txns[4].End)
		}
	})
	t.Run("too large", func(t *testing.T) {
		f := newFakeRounds(false, false)
		f.fail["13"] = []error{kafka.MessageSizeTooLarge}
		f.fail["25"] = []error{fmt.Errorf("t/1: %w", errEarlierFailed)}
		txns := pairs(25)
		c := &ackCheck{f: f, txns: txns}
		w := fakeWriter(f, 0, c)
		l := collectAcks(w)
		if err := result(t, start(context.Background(), w, queued(txns, true)), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		ends := checkDelivered(t, f, c, l, txns, 50, false)
		if !f.logged("write 13") || !f.logged("write 25") {
			t.Errorf("events 13 and 25 were not sent again alone: %v", f.log)
		}
		if !slices.IsSortedFunc(ends, func(a, b binlog.Position) int { return int(a.Pos) - int(b.Pos) }) {
			t.Errorf("acknowledged out of order: %v", ends)
		}
	})
}

// Cancelling Run returns at once, whatever the Writer waits for: a
// round's answer (MaxInFlight in flight, the next one full), the input
// with a round in flight, or, exactly-once, the commit's answer. Nothing
// is acknowledged.
func TestPipelinedCancel(t *testing.T) {
	for _, txn := range []bool{false, true} {
		for _, c := range []struct {
			name   string
			events int  // queued, in transactions of 2, the input left open
			commit bool // the commit is never answered (exactly-once)
			ready  func(t *testing.T, f *fakeRounds)
		}{
			{"answer", 60, false, func(t *testing.T, f *fakeRounds) { awaitWait(t, f, 1) }},
			{"input", 12, false, func(t *testing.T, f *fakeRounds) { awaitLog(t, f, "begin 1") }},
			{"commit", 20, true, func(t *testing.T, f *fakeRounds) { awaitLog(t, f, "commit asked") }},
		} {
			if c.commit && !txn {
				continue
			}
			t.Run(fmt.Sprintf("%s/exactly-once=%v", c.name, txn), func(t *testing.T) {
				f := newFakeRounds(txn, !c.commit)
				f.commitCtx = c.commit
				txns := pairs(c.events / 2)
				ck := &ackCheck{f: f, txns: txns}
				w := fakeWriter(f, 30*time.Second, ck)
				l := collectAcks(w)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := start(ctx, w, queued(txns, false))
				c.ready(t, f)
				cancel()
				if err := result(t, done, 5*time.Second); !errors.Is(err, context.Canceled) {
					t.Fatalf("Run = %v, want context.Canceled", err)
				}
				<-l.done
				if len(l.acks) != 0 || len(ck.bad) != 0 {
					t.Fatalf("acknowledged %v (%v)", l.acks, ck.bad)
				}
			})
		}
	}
}

// Exactly-once: rounds answered are acknowledged only once the
// transaction holding them committed, as one acknowledgement; a Writer
// run dry commits at once (no latency budget); with a transaction
// interval of 0 each round commits before the next one begins.
func TestTxnAcksAfterCommit(t *testing.T) {
	t.Run("run dry", func(t *testing.T) {
		f := newFakeRounds(true, true)
		txns := pairs(30) // 60 events: 6 rounds
		c := &ackCheck{f: f, txns: txns}
		w := fakeWriter(f, 30*time.Second, c)
		l := collectAcks(w)
		in := queued(txns[:25], false)
		done := start(context.Background(), w, in)
		awaitLog(t, f, "begin 5")
		f.answer(1, 2, 3, 4, 5)
		for deadline := time.Now().Add(10 * time.Second); c.acked() < 25; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d transactions acknowledged after the commit, want 25", c.acked())
			}
		}
		// The rest as it comes (rounds of what arrived), answered at once.
		f.mu.Lock()
		f.hold = false
		f.mu.Unlock()
		for _, x := range txns[25:] {
			in <- x
		}
		close(in)
		if err := result(t, done, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		ends := checkDelivered(t, f, c, l, txns, 60, true)
		if ends[0] != txns[24].End || l.acks[0].Txns != 25 {
			t.Errorf("first acknowledgement %s of %d transactions, want the 5 rounds of the first commit as one: %s of 25", ends[0], l.acks[0].Txns, txns[24].End)
		}
	})
	t.Run("interval 0", func(t *testing.T) {
		f := newFakeRounds(true, false)
		txns := pairs(20) // 4 rounds
		c := &ackCheck{f: f, txns: txns}
		w := fakeWriter(f, 0, c)
		l := collectAcks(w)
		if err := result(t, start(context.Background(), w, queued(txns, true)), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		checkDelivered(t, f, c, l, txns, 40, true)
		if f.commits != 4 {
			t.Errorf("%d commits for 4 rounds, want 4: %v", f.commits, f.log)
		}
	})
}

// Exactly-once, a failure inside the open transaction of 5 rounds: a
// commit refused, a round that failed, a round that could not be begun
// abort it, and every round of it is produced again, each in a
// transaction of its own committed before it is acknowledged; a commit
// whose outcome is unknown and a fence stop the Writer with a
// *WriteError, nothing acknowledged nor produced again.
func TestTxnRedo(t *testing.T) {
	fenced := &FencedError{TransactionalID: "cdc-outbox-k", Op: "Produce", Err: kafka.InvalidProducerEpoch}
	for _, c := range []struct {
		name  string
		setup func(f *fakeRounds)
		want  error // Run's error (nil: every event acknowledged)
		fatal bool
	}{
		{"commit refused", func(f *fakeRounds) { f.commitErr = []error{kafka.InvalidTransactionState} }, nil, false},
		{"round failed", func(f *fakeRounds) { f.fail["23"] = []error{kafka.NotEnoughReplicas} }, nil, false},
		{"begin refused", func(f *fakeRounds) { f.beginErr = []error{nil, nil, kafka.InvalidTransactionState} }, nil, false},
		{"commit unknown", func(f *fakeRounds) { f.commitErr = []error{kafka.ConcurrentTransactions} }, kafka.ConcurrentTransactions, false},
		{"fenced", func(f *fakeRounds) { f.fail["13"] = []error{fenced} }, ErrFenced, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeRounds(true, false)
			c.setup(f)
			txns := pairs(25) // 5 rounds
			ck := &ackCheck{f: f, txns: txns}
			w := fakeWriter(f, 30*time.Second, ck)
			l := collectAcks(w)
			err := result(t, start(context.Background(), w, queued(txns, true)), 10*time.Second)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				checkDelivered(t, f, ck, l, txns, 50, true)
				if f.aborts != 1 || !f.logged("write 1,") {
					t.Errorf("%d aborts, want 1, then every round produced again: %v", f.aborts, f.log)
				}
				return
			}
			var we *WriteError
			if !errors.As(err, &we) || !errors.Is(err, c.want) || IsFatal(err) != c.fatal {
				t.Fatalf("Run = %v, want a *WriteError with %v, fatal %v", err, c.want, c.fatal)
			}
			<-l.done
			if len(l.acks) != 0 || len(ck.bad) != 0 || len(f.visible) != 0 || f.logged("write") {
				t.Fatalf("acknowledged %v (%v), %d events visible; log %v", l.acks, ck.bad, len(f.visible), f.log)
			}
		})
	}
}

// Without idempotence (kafka.idempotent: false) the Writer's rounds go
// the same way, one in flight: on kfake, with the first two produce
// requests to partition 1 refused (NOT_LEADER_OR_FOLLOWER, retried), a
// queued backlog is acknowledged in binlog order and every event is
// written once, each partition in binlog order.
func TestWriterWithoutIdempotence(t *testing.T) {
	cl, failed := kfakeFault(t, 1, 6, 2)
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Idempotent, cfg.BatchSize = cl.ListenAddrs(), false, 10
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(cfg, router.New(router.Config{Topic: "t"}, router.Reserved{}), router.Balancer(), zap.NewNop())
	if w.rounds.MaxInFlight() != 1 {
		t.Fatalf("MaxInFlight %d without idempotence, want 1", w.rounds.MaxInFlight())
	}
	l := collectAcks(w)
	txns := pairs(50)
	if err := w.Run(context.Background(), queued(txns, true)); err != nil {
		t.Fatal(err)
	}
	<-l.done
	if failed.Load() != 2 {
		t.Fatalf("%d failures injected, want 2", failed.Load())
	}
	for i, a := range l.acks {
		if i > 0 && a.End.Pos <= l.acks[i-1].End.Pos {
			t.Fatalf("acknowledged out of order: %s after %s", a.End, l.acks[i-1].End)
		}
	}
	if last := l.acks[len(l.acks)-1]; last.End != txns[49].End || l.events.Load() != 100 {
		t.Fatalf("last acknowledgement %s, %d events; want %s, 100", last.End, l.events.Load(), txns[49].End)
	}
	checkOnce(t, "written", eventIDs(t, cl.ListenAddrs(), kgo.ReadUncommitted()), 1, 100)
}

// OldestInFlight is when the oldest round still unanswered began, kept
// while the Writer waits for it (a broker down or frozen), the next one's
// once it landed, zero when none is in flight: what
// cdc_outbox_produce_unanswered_seconds and its alert follow.
func TestOldestInFlight(t *testing.T) {
	f := newFakeRounds(false, true)
	txns := pairs(25) // 5 rounds of 10
	c := &ackCheck{f: f, txns: txns}
	w := fakeWriter(f, 0, c)
	collectAcks(w)
	before := time.Now()
	if !w.OldestInFlight().IsZero() {
		t.Fatal("a round in flight before any began")
	}
	done := start(context.Background(), w, queued(txns, true))
	awaitWait(t, f, 1)
	first := w.OldestInFlight()
	if first.Before(before) || first.After(time.Now()) {
		t.Fatalf("waiting for round 1: oldest in flight %v, want when it began (after %v)", first, before)
	}
	time.Sleep(20 * time.Millisecond) // still unanswered: it stays
	if got := w.OldestInFlight(); !got.Equal(first) {
		t.Fatalf("round 1 still unanswered: oldest in flight moved from %v to %v", first, got)
	}
	f.answer(1, 2)
	awaitWait(t, f, 3)
	if got := w.OldestInFlight(); !got.After(first) {
		t.Fatalf("waiting for round 3: oldest in flight %v, want a later round's start than round 1's %v", got, first)
	}
	f.answer(3, 4, 5)
	if err := result(t, done, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := w.OldestInFlight(); !got.IsZero() {
		t.Fatalf("every round answered: oldest in flight %v, want none", got)
	}
}
