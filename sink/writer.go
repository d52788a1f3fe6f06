package sink

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/internal/secure"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"go.uber.org/zap"
)

// Router maps an event to its record; *router.Router implements it. On
// router.ErrTopic (a topic no record may go to, router.CheckTopic) it
// returns the record too, its Topic that name.
type Router interface {
	Route(e *binlog.Event, end binlog.Position) (kafka.Message, error)
}

// producer is the part of *Producer the Writer uses (a fake in tests):
// a write of records as one call (dead letters, the records resent one at
// a time, the rounds of an aborted transaction produced again) and the
// rounds, pipelined (roundProducer, flight.go).
type producer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
	roundProducer
}

// Writer is the Kafka stage. Run consumes transactions; Acks delivers the
// end position of each acknowledged run of transactions, in order. Poison
// records (see Check) are handled by Config.OnPoison.
type Writer struct {
	cfg    Config
	router Router
	kw     producer
	acks   chan Ack
	log    *zap.Logger
	warn   *logging.Limiter // dead-letter warnings: at most 10 per second

	dead  atomic.Uint64   // dead-letter records acknowledged
	acked binlog.Position // newest position sent on acks

	msgs  []kafka.Message
	bytes int64
	owner []int // index into pending of the transaction each msg belongs to

	sizes  []int64           // Txn.Held of each pending transaction, reported on ack
	events []int             // outbox rows of each pending transaction
	owns   []binlog.Position // Txn.Own of each pending transaction: its own end, for headers and errors
	parts  int               // topics in the last Ack's Partitions
	obs    Observer
	// commits: obs's CommitObserver side (nil: none).
	commits CommitObserver
	prod    *Producer  // kw before any wrapping; nil with a fake
	gate    *topicGate // does a record's topic exist (kafka.missing-topic); nil with a fake

	// rounds: kw's rounds (flight.go), not wrapped by SetObserver (wait
	// reports each round); txn: they go into Kafka transactions
	// (exactly-once: prod is transactional).
	rounds roundProducer
	txn    bool

	// The deadlines of the recovery from a failed round (Retries): at
	// least once, the rounds in flight behind it waited for (behindLimit);
	// exactly-once, the redo of the aborted transaction (redoLimit).
	behindLimit, redoLimit time.Duration

	flights []flight // rounds in flight (pipelined), oldest first
	// inFlight: when the oldest round not yet answered began (UnixNano;
	// 0: none), for OldestInFlight; set by markInFlight.
	inFlight atomic.Int64
	spare    []flight    // the slices of landed rounds, for the next rounds (roundSlices)
	tick     *time.Timer // bounds Run's wait for the oldest round's answer

	// The cadence (Run, budget.go): the least time between two rounds
	// less than half full (Split(cfg.LatencyBudget).Gap; 0: none), and
	// between two commits of a Writer run dry (CommitSpacing: the
	// transaction interval, at least gap), when the last round with
	// records began and when the last transaction committed; pace wakes
	// Run when the gathered round may go or the transaction commit.
	gap, commitGap       time.Duration
	lastSend, lastCommit time.Time
	pace                 *time.Timer

	// Exactly-once (flight.go, commit): the rounds landed in the open
	// Kafka transaction, acknowledged once it commits, and whether the
	// last round begun ended on a whole binlog transaction.
	uncommitted []flight
	whole       bool

	// A large transaction passed on in fragments (binlog.Txn.Partial):
	// whether the last transaction added was a fragment (the next one is
	// then the same transaction's), and the rows of its fragments added
	// so far (PoisonError.Published).
	inFrag bool
	frag   fragRows
}

// fragRows counts the rows of a transaction's fragments added to rounds,
// with the first and last event ids.
type fragRows struct {
	n           int
	first, last string
}

// Ack reports an acknowledged run of transactions: every record of them,
// and of every transaction before them, was acknowledged by all in-sync
// replicas.
type Ack struct {
	// End is the end of the run's last transaction (its binlog.Txn.End).
	End binlog.Position
	// Held is the sum of the run's Txn.Held: the room in the source's
	// budget that the owner of the pipeline may now release.
	Held int64
	// Txns and Events count the run's transactions and outbox rows
	// (dead-lettered rows included).
	Txns, Events int
	// Partitions is the partition count of every topic written so far
	// (pinned at start or at its first use), to be stored with the
	// checkpoint; set when a topic was added since the previous Ack, nil
	// otherwise (the previous value stands).
	Partitions map[string]int
}

// Observer receives the Writer's measurements (cmd/cdc-outbox exports them
// as Prometheus metrics). Its methods are called from the Writer's
// goroutine and must not block.
type Observer interface {
	// Produced reports one produce call (a round, a resend of one
	// record, a dead letter): its records, how long it took until
	// acknowledged or given up, and its error (nil: all acknowledged; a
	// kafka.WriteErrors says which records failed).
	Produced(msgs []kafka.Message, d time.Duration, err error)
	// Acked reports the end of an acknowledged run of transactions; its
	// Time is the commit time of the last one (MariaDB: 1 s resolution;
	// MySQL 8.0.1+: µs, immediate_commit_timestamp).
	Acked(p binlog.Position)
	// Requested reports one Produce request sent to a broker (a round
	// sends one per leader; a retry sends another) carrying records
	// records: what the broker's request handlers pay per request.
	Requested(records int)
	// Transacted reports the end of one Kafka transaction (exactly-once):
	// committed (EndTxn commit) or aborted. Each writes a marker to every
	// partition the transaction added.
	Transacted(committed bool)
}

// CommitObserver, when an Observer also implements it, is told each
// acknowledged transaction with outbox rows: its commit time (the Time of
// its own end: MySQL's immediate_commit_timestamp, µs; MariaDB's binlog
// event time, 1 s) and the moment of the acknowledgement, for the commit
// → acknowledgement latency histogram. A fragment's commit time is
// unknown (zero) and not reported. Called from the Writer's goroutine; it
// must not block.
type CommitObserver interface {
	AckedCommit(commit, at time.Time)
}

// SetObserver makes the Writer report to o (and to its CommitObserver
// side, if it has one). Call it before Run.
func (w *Writer) SetObserver(o Observer) {
	w.obs = o
	w.kw = observed{w.kw, o}
	w.commits, _ = o.(CommitObserver)
	if w.prod != nil {
		w.prod.obs = o
	}
}

// ackedCommits reports the commit times of the first n of a run's
// transactions (own ends, events per transaction) to the CommitObserver.
func (w *Writer) ackedCommits(owns []binlog.Position, events []int, n int) {
	if w.commits == nil {
		return
	}
	at := time.Now()
	for i := range n {
		if events[i] > 0 && !owns[i].Time.IsZero() {
			w.commits.AckedCommit(owns[i].Time, at)
		}
	}
}

// observed reports each produce call of a producer to an Observer.
type observed struct {
	producer
	obs Observer
}

func (o observed) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	began := time.Now()
	err := o.producer.WriteMessages(ctx, msgs...)
	o.obs.Produced(msgs, time.Since(began), err)
	return err
}

// NewWriter returns a Writer for a validated Config. balancer must be the
// partitioner every producer of these topics uses (router.Balancer()).
func NewWriter(cfg Config, r Router, balancer kafka.Balancer, log *zap.Logger) *Writer {
	log = log.Named("sink")
	p := NewProducer(cfg, balancer, log)
	w := newWriter(cfg, r, p, log)
	w.prod, w.txn = p, p.txn != nil
	w.gate = newTopicGate(cfg, log)
	return w
}

// PinPartitions makes the Writer's producer refuse to write to a topic
// whose partition count differs from counts (see Producer.Pin): the
// counts stored with the checkpoint. Call it before Run.
func (w *Writer) PinPartitions(counts map[string]int) {
	if w.prod != nil {
		w.prod.Pin(counts)
	}
}

// SetPace makes the Writer's producer hold the wake-ups of its produce
// answers in the source's linger pauses (Producer.SetPace). Call it
// before Run.
func (w *Writer) SetPace(p Pacer) {
	if w.prod != nil {
		w.prod.SetPace(p)
	}
}

// Partitions returns the partition count of every topic pinned so far
// (PinPartitions, and each topic at its first use), to be stored with the
// checkpoint (checkpoint.Source.Counts). Safe for concurrent use.
func (w *Writer) Partitions() map[string]int {
	if w.prod == nil {
		return nil
	}
	return w.prod.Pinned()
}

func newWriter(cfg Config, r Router, kw producer, log *zap.Logger) *Writer {
	rt := cfg.Retries()
	gap := Split(cfg.LatencyBudget).Gap
	return &Writer{cfg: cfg, router: r, kw: kw, rounds: kw, acks: make(chan Ack, 64), log: log, tick: stoppedTimer(), pace: stoppedTimer(),
		gap: gap, commitGap: CommitSpacing(gap, cfg.TransactionInterval), warn: logging.NewLimiter(time.Second, 10), behindLimit: rt.Behind, redoLimit: rt.Redo}
}

// DeadLettered returns how many dead-letter records this Writer wrote
// (acknowledged by the broker). Safe for concurrent use.
func (w *Writer) DeadLettered() uint64 { return w.dead.Load() }

// Acks returns the channel of acknowledged runs of transactions, in binlog
// order. It is closed when Run returns.
func (w *Writer) Acks() <-chan Ack { return w.acks }

// Run writes the transactions read from in until in is closed (returning
// nil after flushing everything read) or a write fails (returning a
// *WriteError). Cancelling ctx aborts in-flight writes.
//
// The cadence: the round being gathered goes when it is full, or when the
// oldest round in flight was answered (nothing in flight: at once) and it
// is half full or the previous round began at least
// Split(LatencyBudget).Gap ago (sendAt).
// A trickle of small transactions so becomes one round per round trip,
// and at a higher rate one round per gap (issue 37: the broker's cost
// follows the produce requests), while a backlog still keeps MaxInFlight
// rounds of full batches in flight. Exactly-once: a Writer run dry
// commits once the previous commit is CommitSpacing old (the transaction
// interval: one transaction spans the rounds of an interval; at once at
// a trickle; wantCommit).
func (w *Writer) Run(ctx context.Context, in <-chan binlog.Txn) error {
	defer close(w.acks)
	defer w.kw.Close()
	defer w.pace.Stop()
	if w.gate != nil {
		defer w.gate.close()
	}
	var pending []binlog.Position // ends of transactions with records in w.msgs
	landed := false               // a round landed while the one being gathered waited
	for {
		now := time.Now()
		if len(pending) > 0 && w.mayGo(landed, now) {
			if err := w.flush(ctx, &pending); err != nil {
				return err
			}
			landed = false
			continue
		}
		commitAt, commit := w.wantCommit(len(pending), len(in), now)
		if commit && !now.Before(commitAt) {
			if err := w.commit(ctx); err != nil {
				return err
			}
			continue
		}
		// Wait for a transaction, the oldest round's answer (or
		// leaderCheck: land follows a leader that moved), or the time
		// the gathered round may go or the open transaction commit.
		var answered <-chan struct{}
		var tick <-chan time.Time
		if len(w.flights) > 0 {
			answered = w.flights[0].answered()
			w.tick.Reset(leaderCheck)
			tick = w.tick.C
		} else {
			w.tick.Stop()
		}
		var wake time.Time
		if len(pending) > 0 && len(w.msgs) > 0 && (len(w.flights) == 0 || landed) {
			wake = sendAt(w.lastSend, now, w.gap)
		}
		if commit && (wake.IsZero() || commitAt.Before(wake)) {
			wake = commitAt
		}
		var paced <-chan time.Time
		if !wake.IsZero() {
			w.pace.Reset(wake.Sub(now))
			paced = w.pace.C
		} else {
			w.pace.Stop()
		}
		var txn binlog.Txn
		var ok bool
		select {
		case txn, ok = <-in:
		case <-answered:
			if err := w.land(ctx); err != nil {
				return err
			}
			landed = len(pending) > 0
			continue
		case <-tick:
			if err := w.land(ctx); err != nil {
				return err
			}
			landed = len(pending) > 0
			continue
		case <-paced:
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		w.tick.Stop()
		w.pace.Stop()
		if !ok {
			if len(pending) > 0 {
				if err := w.flush(ctx, &pending); err != nil {
					return err
				}
			}
			return w.settle(ctx)
		}
		for {
			if err := w.add(ctx, &txn, &pending); err != nil {
				return err
			}
			// Merge whatever is already queued into this round.
			if more, ok := tryRecv(in); ok && w.room() {
				txn = more
				continue
			} else if ok {
				// No room left: flush, then carry on with the received txn.
				if err := w.flush(ctx, &pending); err != nil {
					return err
				}
				txn = more
				continue
			}
			break
		}
	}
}

// mayGo reports whether the round being gathered goes now: it is full,
// or nothing in flight holds it (no round in flight, or one landed since
// it began gathering) and it is half full or more (a backlog: its
// requests are already large, the gap would only slow it) or its gap
// passed (sendAt; a round of no records, an acknowledgement only, does
// not wait for the gap).
func (w *Writer) mayGo(landed bool, now time.Time) bool {
	if !w.room() {
		return true
	}
	if len(w.flights) > 0 && !landed {
		return false
	}
	return len(w.msgs) == 0 || w.ample() || !now.Before(sendAt(w.lastSend, now, w.gap))
}

// ample reports whether the round being gathered is half full or more,
// by records (BatchSize) or bytes (BatchBytes).
func (w *Writer) ample() bool {
	return 2*len(w.msgs) >= w.cfg.BatchSize || 2*w.bytes >= w.cfg.BatchBytes
}

// wantCommit reports whether an exactly-once Writer commits its open
// transaction, and from when: once no round is in flight, nothing is
// queued, and nothing is gathered or the last round ended on a whole
// binlog transaction, at the first moment CommitSpacing after the
// previous commit (at once at a trickle; at a steady rate once per
// transaction interval: the commits and their markers per second stay
// bounded, and one transaction spans many rounds), not in the second
// half of a round's gap (commitAt: early in the next one instead).
func (w *Writer) wantCommit(pending, queued int, now time.Time) (time.Time, bool) {
	if !w.txnMode() || len(w.flights) > 0 || queued > 0 || pending > 0 && !w.whole {
		return time.Time{}, false
	}
	if _, open := w.rounds.TxnOpen(); !open {
		return time.Time{}, false
	}
	return commitAt(w.lastCommit, w.lastSend, now, w.commitGap, w.gap), true
}

func tryRecv(in <-chan binlog.Txn) (binlog.Txn, bool) {
	select {
	case t, ok := <-in:
		return t, ok
	default:
		return binlog.Txn{}, false
	}
}

func (w *Writer) room() bool {
	return len(w.msgs) < w.cfg.BatchSize && w.bytes < w.cfg.BatchBytes
}

// add routes txn's events into the current round, flushing full rounds.
// A poison record is handled by the policy: fail writes and acknowledges
// the transactions before the poison one, then returns a *PoisonError;
// dead-letter writes everything before it, then its dead-letter record
// alone, then carries on.
//
// Under fail nothing of txn is written before every row of it was found
// sendable: when a full round would carry some of its records, the rest
// of txn is checked first (scan). A large transaction comes as
// fragments, each a txn: the fragments before a poison row's were written
// (PoisonError.Published says how many rows), nothing of its own.
func (w *Writer) add(ctx context.Context, txn *binlog.Txn, pending *[]binlog.Position) error {
	if !w.inFrag {
		w.frag = fragRows{} // a new transaction
	}
	idx := len(*pending)
	*pending = append(*pending, txn.End)
	w.sizes = append(w.sizes, txn.Held)
	w.events = append(w.events, len(txn.Events))
	// A fragment's End is the previous transaction's (what may be
	// acknowledged); its records and errors name its own end.
	own := txn.Own()
	w.owns = append(w.owns, own)
	if w.cfg.TxnID() != "" && len(w.msgs) > 0 && len(w.msgs)+len(txn.Events) > w.cfg.BatchSize {
		// Exactly-once: a binlog transaction that fits in a round is not
		// split across two Kafka transactions (committed.go, markPartial).
		if err := w.flushUpTo(ctx, pending, idx); err != nil {
			return err
		}
		idx = 0
	}
	scanned := false // the rest of txn was checked (scan)
	for i := range txn.Events {
		e := &txn.Events[i]
		m, p, err := w.check(ctx, e, own)
		if err != nil {
			return err
		}
		if p != nil {
			if w.cfg.OnPoison != PolicyDeadLetter {
				return w.failBefore(ctx, pending, idx, &m, p, own)
			}
			// The dead letter takes the record's place in the stream:
			// nothing after it is written before it is.
			if err := w.flushUpTo(ctx, pending, idx); err != nil {
				return err
			}
			idx = 0
			if err := w.deadLetter(ctx, &m, p, own); err != nil {
				return err
			}
			continue
		}
		size := estimate(&m)
		if len(w.msgs) > 0 && (len(w.msgs)+1 > w.cfg.BatchSize || w.bytes+size > w.cfg.BatchBytes) {
			if i > 0 && !scanned && w.cfg.OnPoison != PolicyDeadLetter {
				// The round holds rows of txn: none is written before
				// the rest of txn is found sendable too.
				scanned = true
				if m, p, err := w.scan(ctx, txn.Events[i:], own); err != nil || p != nil {
					if err != nil {
						return err
					}
					return w.failBefore(ctx, pending, idx, &m, p, own)
				}
			}
			// The transaction does not fit: send what we have. Only the
			// transactions completed before it are acknowledged.
			if err := w.flushUpTo(ctx, pending, idx); err != nil {
				return err
			}
			idx = 0
		}
		w.msgs = append(w.msgs, m)
		w.owner = append(w.owner, idx)
		w.bytes += size
	}
	w.inFrag = txn.Partial
	if n := len(txn.Events); txn.Partial && n > 0 {
		if w.frag.n == 0 {
			w.frag.first = txn.Events[0].EventID()
		}
		w.frag.n += n
		w.frag.last = txn.Events[n-1].EventID()
	}
	return nil
}

// check routes event e of the transaction ending at own and classifies
// its record (CheckEvent, then whether its topic exists: the topic gate).
// It returns the record and its poison (nil: sendable), or a *WriteError
// for a failure that is not a poison verdict.
func (w *Writer) check(ctx context.Context, e *binlog.Event, own binlog.Position) (kafka.Message, *Poison, error) {
	m, err := w.router.Route(e, own)
	p, err := CheckEvent(e, &m, err, w.cfg.BatchBytes)
	if p == nil && err == nil && w.gate != nil {
		p, err = w.gate.check(ctx, m.Topic)
	}
	if err != nil {
		return m, nil, &WriteError{EventID: e.EventID(), Topic: m.Topic, Pos: own, Err: err}
	}
	return m, p, nil
}

// scan checks events (the rest of a transaction ending at own) as add
// does, keeping nothing (memory stays bounded by the round), and returns
// the first poison record with its poison, or an error from check.
func (w *Writer) scan(ctx context.Context, events []binlog.Event, own binlog.Position) (kafka.Message, *Poison, error) {
	for i := range events {
		if m, p, err := w.check(ctx, &events[i], own); err != nil || p != nil {
			return m, p, err
		}
	}
	return kafka.Message{}, nil, nil
}

// failBefore applies the fail policy to poison record m of pending
// transaction idx: the round's records of that transaction are dropped,
// the rest is written and the transactions before idx acknowledged.
func (w *Writer) failBefore(ctx context.Context, pending *[]binlog.Position, idx int, m *kafka.Message, p *Poison, end binlog.Position) error {
	cut := len(w.msgs)
	for cut > 0 && w.owner[cut-1] == idx {
		cut--
	}
	clear(w.msgs[cut:])
	w.msgs, w.owner = w.msgs[:cut], w.owner[:cut]
	if err := w.flushUpTo(ctx, pending, idx); err != nil {
		return err
	}
	if err := w.settle(ctx); err != nil {
		return err
	}
	pe := w.poisonError(m, p, end)
	if w.inFrag {
		// Its transaction's earlier fragments: written above, or before.
		pe.Published, pe.FirstID, pe.LastID = w.frag.n, w.frag.first, w.frag.last
	}
	return pe
}

func (w *Writer) poisonError(m *kafka.Message, p *Poison, end binlog.Position) *PoisonError {
	return &PoisonError{EventID: header(m, router.HeaderEventID), Reason: p.Reason, Topic: p.Topic,
		Row: header(m, router.HeaderBinlogPos), Pos: end, Resume: w.acked, Err: p.Err}
}

// deadLetter writes the dead-letter record of m alone (without its value
// if the dead-letter topic rejects it as too large), then logs and counts it.
func (w *Writer) deadLetter(ctx context.Context, m *kafka.Message, p *Poison, end binlog.Position) error {
	// Everything before the poison record is written first.
	if err := w.settle(ctx); err != nil {
		return err
	}
	d := DeadLetter(m, p, w.cfg.DeadLetterTopic, w.cfg.BatchBytes)
	err := w.kw.WriteMessages(ctx, d)
	if err != nil && len(d.Value) > 0 && errors.Is(first(err), kafka.MessageSizeTooLarge) {
		d = withoutValue(d, len(d.Value))
		err = w.kw.WriteMessages(ctx, d)
	}
	id := header(m, router.HeaderEventID)
	if err != nil {
		return &WriteError{EventID: id, Topic: d.Topic, Pos: end, Err: fmt.Errorf("dead letter (%s): %w", p.Reason, first(err))}
	}
	w.dead.Add(1)
	if ok, suppressed := w.warn.Allow(time.Now()); ok {
		w.log.Warn("poison record sent to the dead-letter topic", zap.String("event_id", id), zap.String("reason", string(p.Reason)),
			zap.String("error", p.Err.Error()), zap.String("topic", p.Topic), zap.String("dead_letter_topic", d.Topic),
			zap.String("binlog_pos", header(m, router.HeaderBinlogPos)), zap.String("binlog_txn_end", end.String()),
			zap.Int("suppressed", suppressed), zap.Uint64("dead_lettered", w.dead.Load()))
	}
	return nil
}

// pendingTxns are the pending transactions of a round: their ends, their
// Txn.Held and their outbox rows, index by index.
type pendingTxns struct {
	ends   []binlog.Position // what may be acknowledged (Txn.End)
	sizes  []int64
	events []int
	owns   []binlog.Position // their own ends (Txn.Own), for errors
}

// ackFirst acknowledges the first n pending transactions (none when n is 0).
func (w *Writer) ackFirst(ctx context.Context, p pendingTxns, n int) error {
	if n == 0 {
		return nil
	}
	a := Ack{End: p.ends[n-1], Txns: n}
	for i := range n {
		a.Held += p.sizes[i]
		a.Events += p.events[i]
	}
	if err := w.ack(ctx, a); err != nil {
		return err
	}
	w.ackedCommits(p.owns, p.events, n)
	return nil
}

func (w *Writer) ack(ctx context.Context, a Ack) error {
	if w.prod != nil && w.prod.pinnedCount() != w.parts {
		// Pinned topics are never removed: a new count means a new topic
		// (the copy is made only then, not at every acknowledgement).
		parts := w.Partitions()
		a.Partitions, w.parts = parts, len(parts)
	}
	select {
	case w.acks <- a:
		w.acked = a.End
		if w.obs != nil {
			w.obs.Acked(a.End)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// brokerTooLarge returns the indexes of the failed records of a round when
// every failure is MESSAGE_TOO_LARGE (whole partition batches rejected).
func brokerTooLarge(err error, n int) ([]int, bool) {
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) || len(werrs) != n {
		return nil, false
	}
	var failed []int
	tooLarge := false
	for i, e := range werrs {
		if e == nil {
			continue
		}
		if errors.Is(e, errTxnAborted) { // exactly-once: acknowledged, then aborted with the others (txn.go)
			failed = append(failed, i)
			continue
		}
		if !errors.Is(e, kafka.MessageSizeTooLarge) {
			return nil, false
		}
		failed, tooLarge = append(failed, i), true
	}
	return failed, tooLarge
}

// resend sends the failed records of a round (indexes into w.msgs, in
// order) one at a time. A record the broker rejects alone is poison
// (ReasonBrokerTooLarge): under the fail policy the transactions before its
// own are acknowledged and a *PoisonError returned, nothing after it being
// sent; under the dead-letter policy its dead letter is written in its
// place and the resend goes on. Any other failure stops with a *WriteError
// (the pipeline restarts). Per partition, no record is sent after an
// earlier one that was neither written nor dead-lettered.
func (w *Writer) resend(ctx context.Context, txns pendingTxns, failed []int) error {
	w.log.Warn("the broker rejected a batch as too large; sending its records one at a time to find the culprit",
		zap.Int("records", len(failed)))
	for _, i := range failed {
		m := &w.msgs[i]
		err := w.kw.WriteMessages(ctx, *m)
		if err == nil {
			continue
		}
		cause := first(err)
		if !errors.Is(cause, kafka.MessageSizeTooLarge) {
			return &WriteError{EventID: header(m, router.HeaderEventID), Topic: m.Topic, Pos: txns.owns[w.owner[i]], Err: cause}
		}
		p := &Poison{Reason: ReasonBrokerTooLarge, Topic: m.Topic,
			Err: fmt.Errorf("%w: topic %s rejected the record alone (%d bytes by estimate): %v: raise the topic's max.message.bytes / the broker's message.max.bytes",
				ErrRecordTooLarge, m.Topic, estimate(m), cause)}
		end := txns.owns[w.owner[i]]
		if w.cfg.OnPoison != PolicyDeadLetter {
			if err := w.ackFirst(ctx, txns, w.owner[i]); err != nil {
				return err
			}
			return w.poisonError(m, p, end)
		}
		if err := w.deadLetter(ctx, m, p, end); err != nil {
			return err
		}
	}
	return nil
}

// first returns the first failure of a kafka.WriteErrors, or err.
func first(err error) error {
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		for _, e := range werrs {
			if e != nil {
				return e
			}
		}
	}
	return err
}

// writeError explains a failed round: owns are the own ends of its
// pending transactions (w.owner indexes them).
func (w *Writer) writeError(err error, owns []binlog.Position) error {
	// The first failure, preferring one that is not MESSAGE_TOO_LARGE
	// (with other failures in the round, a restart comes first).
	at := -1
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		for i, e := range werrs {
			if e != nil && (at < 0 || errors.Is(werrs[at], kafka.MessageSizeTooLarge) && !errors.Is(e, kafka.MessageSizeTooLarge)) {
				at = i
			}
		}
		if at >= 0 {
			err = werrs[at]
		}
	}
	at = max(at, 0)
	if errors.Is(err, kafka.MessageSizeTooLarge) {
		err = fmt.Errorf("%w: %v: raise the broker's message.max.bytes / the topic's max.message.bytes, or kafka.batch-bytes", ErrRecordTooLarge, err)
	} else if errors.Is(err, kafka.UnknownTopicOrPartition) && !w.cfg.AllowAutoTopicCreation {
		err = fmt.Errorf("%w; create the topic (with the partition count you want), or set kafka.allow-auto-topic-creation: true", err)
	} else if errors.Is(err, kafka.UnknownTopicOrPartition) {
		err = fmt.Errorf("%w; kafka.allow-auto-topic-creation is on, but the broker did not create the topic: check the broker's auto.create.topics.enable, or create it", err)
	}
	m := &w.msgs[at]
	return &WriteError{EventID: header(m, router.HeaderEventID), Topic: m.Topic, Pos: owns[w.owner[at]], Err: err}
}

func header(m *kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// estimate is an upper bound of kafka-go's own size accounting of m
// (message header plus key, value and headers), so that a round within
// BatchBytes by this measure never splits into two batches of a partition.
func estimate(m *kafka.Message) int64 {
	n := int64(len(m.Key) + len(m.Value) + 64)
	for _, h := range m.Headers {
		n += int64(len(h.Key) + len(h.Value) + 16)
	}
	return n
}

func compression(name string) (compress.Codec, error) {
	switch name {
	case "", "none":
		return nil, nil
	case "gzip":
		return compress.Gzip.Codec(), nil
	case "snappy":
		return compress.Snappy.Codec(), nil
	case "lz4":
		return compress.Lz4.Codec(), nil
	case "zstd":
		return compress.Zstd.Codec(), nil
	}
	return nil, fmt.Errorf("%q: want none, gzip, snappy, lz4 or zstd", name)
}

// IsFatal reports whether err is a write error that a restart cannot fix:
// a poison record under the fail policy (ErrPoison), a record too large
// (ErrRecordTooLarge), a topic's partition count changed under the
// publisher (ErrPartitionCount), a missing topic the broker refuses to
// create (ErrTopicCreation), or a broker refusal that does not go away.
func IsFatal(err error) bool {
	if errors.Is(err, ErrPoison) || errors.Is(err, ErrRecordTooLarge) || errors.Is(err, ErrPartitionCount) || errors.Is(err, ErrFenced) ||
		errors.Is(err, ErrTopicCreation) {
		return true
	}
	// TLS and SASL (security.go): a handshake or login no retry fixes.
	if errors.Is(err, ErrSecurity) || secure.IsTLSFailure(err) {
		return true
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.InvalidTopic, kafka.TopicAuthorizationFailed, kafka.ClusterAuthorizationFailed,
			kafka.SASLAuthenticationFailed, kafka.UnsupportedSASLMechanism, kafka.IllegalSASLState, kafka.UnsupportedVersion:
			return true
		}
	}
	return false
}

// stoppedTimer returns a timer that has not been started.
func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}
