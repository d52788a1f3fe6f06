package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// flight is a round begun and not yet acknowledged (up to the producer's
// MaxInFlight() of them: MaxInFlight with idempotence, else one). Its
// acknowledgement (with the budget to release) and observation wait
// until it lands, in order.
//
// Every round goes this way, whatever the delivery: at-least-once
// acknowledges a round once it landed (done); exactly-once once the
// Kafka transaction holding it committed (commit, below). A failed round
// is recovered (land, recover) or, exactly-once, its transaction produced
// again (redo).
type flight struct {
	r     *Round // nil for a flush with no records (an acknowledgement only)
	msgs  []kafka.Message
	owner []int             // index into pend of each msg's transaction
	pend  []binlog.Position // the pending transaction ends when it was begun
	sizes []int64           // and their Txn.Held
	evs   []int             // and their outbox rows
	owns  []binlog.Position // and their own ends (Txn.Own)
	n     int               // pend[n-1] is acknowledged once it lands (n > 0)
	began time.Time
}

// markInFlight sets inFlight to when the oldest round in flight began
// (0: none), after the rounds in flight changed.
func (w *Writer) markInFlight() {
	if len(w.flights) == 0 {
		w.inFlight.Store(0)
		return
	}
	w.inFlight.Store(w.flights[0].began.UnixNano())
}

// OldestInFlight returns when the oldest produce round still waiting for
// the brokers' answer began, its Begin included (zero: none in flight). It keeps growing
// older while Kafka is down, frozen or refusing, until the retries give
// up (Retries.ToFailure). Safe for concurrent use (a metric computed at
// scrape).
func (w *Writer) OldestInFlight() time.Time {
	if n := w.inFlight.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// answered returns a channel closed once f's latest requests were all
// answered (Wait then returns without waiting on the network unless a
// batch is retried); closed at once for an acknowledgement-only flight.
func (f *flight) answered() <-chan struct{} {
	if f.r == nil {
		return closedChan
	}
	return f.r.answered()
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// roundProducer is the rounds side of *Producer the Writer uses (a fake
// in tests): rounds begun and waited in order, at most MaxInFlight() at
// once, and with exactly-once the open transaction's commit and abort.
// See Producer.Begin, Wait, TxnOpen, Commit and Abort.
type roundProducer interface {
	MaxInFlight() int
	Begin(ctx context.Context, msgs []kafka.Message) (*Round, error)
	Wait(ctx context.Context, r *Round) error
	TxnOpen() (time.Time, bool)
	Commit(ctx context.Context) error
	Abort(ctx context.Context) error
}

func (w *Writer) flush(ctx context.Context, pending *[]binlog.Position) error {
	return w.flushUpTo(ctx, pending, len(*pending))
}

// flushUpTo begins the current round (landing the oldest first when
// MaxInFlight() are in flight: one without idempotence, so that a failed
// round is never overtaken) and leaves its acknowledgement of the first n
// pending transactions, kept pending no longer, to land. A round with no
// records, nothing in flight, acknowledges them at once.
func (w *Writer) flushUpTo(ctx context.Context, pending *[]binlog.Position, n int) error {
	defer w.markInFlight()
	if w.txnMode() && w.due() {
		// Exactly-once: the open transaction is old enough; this round
		// begins the next one.
		if err := w.commit(ctx); err != nil {
			return err
		}
	}
	if len(w.flights) >= w.rounds.MaxInFlight() {
		if err := w.land(ctx); err != nil {
			return err
		}
	}
	f := flight{msgs: w.msgs, owner: w.owner, pend: slices.Clone(*pending), sizes: slices.Clone(w.sizes), evs: slices.Clone(w.events), owns: slices.Clone(w.owns), n: n, began: time.Now()}
	if len(f.msgs) > 0 {
		if w.txnMode() {
			markPartial(f.msgs, f.owner, f.pend, f.owns, n) // committed.go
			o := f.owner[len(f.owner)-1]
			w.whole = o < n && f.pend[o] == f.owns[o]
		}
		w.lastSend = f.began
		if w.inFlight.Load() == 0 {
			// Begin may wait for the brokers itself (its metadata lookup
			// retried while every broker is down): the round counts as
			// unanswered from now.
			w.inFlight.Store(f.began.UnixNano())
		}
		r, err := w.rounds.Begin(ctx, f.msgs)
		if err != nil && (!w.txnMode() || errors.Is(err, ErrPartitionCount) || IsFatal(err)) {
			return w.writeError(err, w.owns)
		} else if err != nil {
			// Exactly-once: nothing of this round was sent; the open
			// transaction is aborted and produced again with it.
			if err := w.redo(ctx, nil, &f, err); err != nil {
				return err
			}
			return w.trim(pending, n, f)
		}
		f.r = r
	} else if len(w.flights) == 0 {
		// Nothing in flight: acknowledge at once. f's slices are the ones
		// still gathering the next round (no trim follows): not kept.
		f.msgs, f.owner = nil, nil
		return w.landed(ctx, f, pending)
	}
	w.flights = append(w.flights, f)
	return w.trim(pending, n, f)
}

// trim drops the first n pending transactions (their acknowledgement is
// f's) and starts the next round.
func (w *Writer) trim(pending *[]binlog.Position, n int, f flight) error {
	w.dropPending(pending, n)
	// The next round is sized like this one (not like the largest so
	// far: a trickle after a backlog would clear megabytes per round).
	w.msgs, w.owner = w.roundSlices(max(len(f.msgs), 8))
	w.bytes = 0
	return nil
}

// Spare round slices: at most spareRounds landed rounds' record and owner
// slices are kept, of at most spareRoundCap records (a backlog's large
// rounds are left to the collector).
const spareRounds, spareRoundCap = 8, 1024

// shares reports whether a and b have the same backing array.
func shares[T any](a, b []T) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

// roundSlices returns empty record and owner slices for a round of about
// n records: a landed round's (keep) when one is large enough.
func (w *Writer) roundSlices(n int) ([]kafka.Message, []int) {
	for i := len(w.spare) - 1; i >= 0; i-- {
		if s := w.spare[i]; cap(s.msgs) >= n && cap(s.owner) >= n {
			w.spare = slices.Delete(w.spare, i, i+1)
			return s.msgs[:0], s.owner[:0]
		}
	}
	return make([]kafka.Message, 0, n), make([]int, 0, n)
}

// keep saves landed round f's record and owner slices (cleared: the
// records' keys, values and headers go to the collector) for roundSlices.
// Only once the round is acknowledged for good: nothing resends it.
func (w *Writer) keep(f flight) {
	if cap(f.msgs) == 0 || cap(f.owner) == 0 || shares(f.msgs, w.msgs) || shares(f.owner, w.owner) {
		return // nothing to keep, or the slices still gathering the next round
	}
	clear(f.msgs)
	if len(w.spare) < spareRounds && cap(f.msgs) <= spareRoundCap && cap(f.owner) <= spareRoundCap {
		w.spare = append(w.spare, flight{msgs: f.msgs[:0], owner: f.owner[:0]})
	}
}

// dropPending drops the first n pending transactions and their sizes,
// row counts and own ends (acknowledged, or left to a flight's).
func (w *Writer) dropPending(pending *[]binlog.Position, n int) {
	*pending = append((*pending)[:0], (*pending)[n:]...)
	w.sizes = append(w.sizes[:0], w.sizes[n:]...)
	w.events = append(w.events[:0], w.events[n:]...)
	w.owns = append(w.owns[:0], w.owns[n:]...)
}

// landed acknowledges f at once (no round in flight) and trims pending.
func (w *Writer) landed(ctx context.Context, f flight, pending *[]binlog.Position) error {
	if err := w.done(ctx, f); err != nil {
		return err
	}
	w.dropPending(pending, f.n)
	return nil
}

// settle lands every round in flight, in order.
func (w *Writer) settle(ctx context.Context) error {
	for len(w.flights) > 0 {
		if err := w.land(ctx); err != nil {
			return err
		}
	}
	if w.txnMode() {
		return w.commit(ctx)
	}
	return nil
}

// land waits for the oldest round in flight and acknowledges it. When it
// failed, the later rounds are waited for too (nothing is in flight
// then), the failed round is recovered (recover: MESSAGE_TOO_LARGE only:
// its records resent one at a time; else a *WriteError), and the later
// rounds' records that the Producer did not write because of it
// (errEarlierFailed) are sent again, in order. Exactly-once: redo.
func (w *Writer) land(ctx context.Context) error {
	// While f's answer is waited for (and a failure recovered), inFlight
	// keeps its start: the oldest round still unanswered.
	defer w.markInFlight()
	f := w.flights[0]
	w.flights = w.flights[1:]
	err := w.wait(ctx, f)
	if err == nil {
		return w.done(ctx, f)
	}
	if w.txnMode() {
		return w.redo(ctx, &f, nil, err)
	}
	later := w.flights
	w.flights = nil
	// Together within one deadline (Retries.Behind): each round's own
	// retries would otherwise add up, one after the other.
	dctx, cancel := context.WithTimeout(ctx, w.behindLimit)
	outcomes := make([]error, len(later))
	for i, g := range later {
		outcomes[i] = w.wait(dctx, g)
	}
	cancel()
	// resend and writeError work on w.msgs and w.owner: lend them.
	msgs, owner, bytes := w.msgs, w.owner, w.bytes
	defer func() { w.msgs, w.owner, w.bytes = msgs, owner, bytes }()
	if err := w.recover(ctx, f, err); err != nil {
		return err
	}
	for i, g := range later {
		if e := outcomes[i]; e != nil {
			var werrs kafka.WriteErrors
			if !errors.As(e, &werrs) || len(werrs) != len(g.msgs) {
				w.msgs, w.owner = g.msgs, g.owner
				return w.writeError(e, g.owns)
			}
			var sub []kafka.Message
			var subOwner []int
			for j, we := range werrs {
				if we == nil {
					continue
				}
				if !errors.Is(we, errEarlierFailed) && !errors.Is(we, kafka.MessageSizeTooLarge) {
					w.msgs, w.owner = g.msgs, g.owner
					return w.writeError(e, g.owns)
				}
				sub, subOwner = append(sub, g.msgs[j]), append(subOwner, g.owner[j])
			}
			g.msgs, g.owner = sub, subOwner
			if e = w.kw.WriteMessages(ctx, sub...); e != nil {
				if err := w.recover(ctx, g, e); err != nil {
					return err
				}
				continue
			}
		}
		if err := w.done(ctx, g); err != nil {
			return err
		}
	}
	return nil
}

// wait returns the outcome of f's round, reported to the Observer.
func (w *Writer) wait(ctx context.Context, f flight) error {
	if f.r == nil {
		return nil
	}
	err := w.rounds.Wait(ctx, f.r)
	if w.obs != nil {
		w.obs.Produced(f.msgs, time.Since(f.began), err)
	}
	return err
}

// recover handles a failed round f (nothing in flight): records the
// broker rejected as too large are resent one at a time (resend), then f
// is acknowledged; any other failure is a *WriteError.
func (w *Writer) recover(ctx context.Context, f flight, err error) error {
	w.msgs, w.owner = f.msgs, f.owner
	failed, ok := brokerTooLarge(err, len(f.msgs))
	if !ok {
		return w.writeError(err, f.owns)
	}
	if err := w.resend(ctx, pendingTxns{f.pend, f.sizes, f.evs, f.owns}, failed); err != nil {
		return err
	}
	return w.done(ctx, f)
}

// done acknowledges a landed round: the end of its last complete
// transaction, with the budget and rows of its transactions. Exactly-once:
// while a transaction is open (or rounds before f wait for its commit),
// f waits for the commit too (commit releases it).
func (w *Writer) done(ctx context.Context, f flight) error {
	if w.txnMode() {
		if _, open := w.rounds.TxnOpen(); open || len(w.uncommitted) > 0 {
			w.uncommitted = append(w.uncommitted, f)
			return nil
		}
	}
	if err := w.ackFirst(ctx, pendingTxns{f.pend, f.sizes, f.evs, f.owns}, f.n); err != nil {
		return err
	}
	w.keep(f)
	return nil
}

// Exactly-once delivery with rounds pipelined inside a Kafka transaction
// (as Kafka Streams' commit.interval.ms): the Writer begins rounds into
// the open transaction (the Producer adds new partitions before sending,
// sequences continue within the epoch, up to MaxInFlight rounds in
// flight) and commits it when Config.TransactionInterval has passed since
// it began (before the next round, at a whole binlog transaction), when
// nothing is gathered nor queued (Run), or at settle (shutdown, a poison
// record, a dead letter). A landed round's acknowledgement waits in
// uncommitted until the commit succeeded. When a round, or the commit,
// fails, the transaction is aborted and every round of it is produced
// again (redo); a commit whose answer never came fails the pipeline.

// txnMode reports whether the Writer pipelines rounds inside Kafka
// transactions (exactly-once).
func (w *Writer) txnMode() bool { return w.txn }

// due reports whether the open transaction is to be committed before the
// next round: TransactionInterval passed since it began, and its last
// round ended on a whole binlog transaction (no record of it is then
// marked binlog_txn_partial only because the commit cut it; forced once
// the transaction is TransactionTimeout/4 old, long before the
// coordinator would abort it).
func (w *Writer) due() bool {
	began, open := w.rounds.TxnOpen()
	if !open {
		return false
	}
	age := time.Since(began)
	return age >= w.cfg.TransactionInterval && (w.whole || age >= TransactionTimeout/4)
}

// commit lands every round in flight, commits the open transaction and
// releases the acknowledgements of its rounds, in order. A refused commit
// (the transaction was not committed) aborts it and produces its rounds
// again (redo); a fence, or a commit with no answer (the outcome unknown:
// only the start decision can tell what was committed), is a *WriteError.
func (w *Writer) commit(ctx context.Context) error {
	for len(w.flights) > 0 {
		if err := w.land(ctx); err != nil {
			return err
		}
	}
	if err := w.rounds.Commit(ctx); err != nil {
		if errors.Is(err, ErrFenced) || !CommitRefused(err) {
			var last *kafka.Message
			var pos binlog.Position
			for _, f := range w.uncommitted {
				if len(f.msgs) > 0 {
					last, pos = &f.msgs[len(f.msgs)-1], f.owns[f.owner[len(f.msgs)-1]]
				}
			}
			if last == nil {
				return fmt.Errorf("sink: %w", err)
			}
			return &WriteError{EventID: header(last, router.HeaderEventID), Topic: last.Topic, Pos: pos, Err: fmt.Errorf("commit of the transaction holding it: %w", err)}
		}
		return w.redo(ctx, nil, nil, err)
	}
	w.lastCommit = time.Now()
	return w.release(ctx)
}

// release acknowledges the rounds of the committed transaction, as one Ack.
func (w *Writer) release(ctx context.Context) error {
	var a Ack
	for _, f := range w.uncommitted {
		if f.n > 0 {
			a.End = f.pend[f.n-1]
		}
		a.Txns += f.n
		for i := range f.n {
			a.Held += f.sizes[i]
			a.Events += f.evs[i]
		}
		clear(f.msgs)
	}
	if a.Txns == 0 {
		clear(w.uncommitted)
		w.uncommitted = w.uncommitted[:0]
		return nil
	}
	err := w.ack(ctx, a)
	if err == nil {
		for _, f := range w.uncommitted {
			w.ackedCommits(f.owns, f.evs, f.n)
		}
	}
	clear(w.uncommitted)
	w.uncommitted = w.uncommitted[:0]
	return err
}

// redo handles a failure inside the open transaction: the oldest round
// in flight, f, failed with cause, or the next round, next, could not be
// begun (nothing of it sent), or the commit was refused (both nil). The
// rounds still in flight are waited for, the transaction is aborted
// (Producer.Abort: a new epoch follows), and every round of it, f and next
// included, is produced again in order, the same records with the same headers, each in a transaction of
// its own committed before its acknowledgement (WriteMessages: up to
// txnRedos new transactions; records the broker rejects as too large are
// resent one at a time, resend). A fence or a fatal cause is a
// *WriteError at once.
//
// All of it, however many rounds the transaction held, runs within one
// deadline (Retries.Redo: one round's worst case, WriteMessages's
// txnRedos transactions); past it the Writer fails with a *WriteError,
// and the pipeline restarts (its start decision settles what was
// committed). Each round's own retries would otherwise add up, one after
// the other.
func (w *Writer) redo(ctx context.Context, f, next *flight, cause error) error {
	defer w.markInFlight()
	rctx, cancel := context.WithTimeout(ctx, w.redoLimit)
	defer cancel()
	err := w.redoWithin(rctx, ctx, f, next, cause)
	if err == nil || rctx.Err() == nil || ctx.Err() != nil {
		return err
	}
	why := fmt.Sprintf("the redo of the aborted transaction ran out of its deadline (%s, from kafka.delivery-timeout, max-attempts, dial-timeout and write-timeout)", w.redoLimit)
	var we *WriteError
	if errors.As(err, &we) {
		we.Err = fmt.Errorf("%s: %w", why, we.Err)
		return err
	}
	return fmt.Errorf("sink: %s: %w", why, err)
}

// redoWithin is redo, the Kafka requests under rctx (its deadline), the
// acknowledgements under ctx.
func (w *Writer) redoWithin(rctx, ctx context.Context, f, next *flight, cause error) error {
	rounds := w.uncommitted
	w.uncommitted = nil
	failed := f
	if f != nil {
		rounds = append(rounds, *f)
	}
	later := w.flights
	w.flights = nil
	for _, g := range later {
		_ = w.wait(rctx, g) // produced again below, whatever the outcome
	}
	rounds = append(rounds, later...)
	if next != nil {
		rounds, failed = append(rounds, *next), next
	}
	if len(rounds) == 0 {
		return fmt.Errorf("sink: %w", cause)
	}
	if failed == nil {
		failed = &rounds[len(rounds)-1]
	}
	// resend and writeError work on w.msgs and w.owner: lend them.
	msgs, owner, bytes := w.msgs, w.owner, w.bytes
	defer func() { w.msgs, w.owner, w.bytes = msgs, owner, bytes }()
	fail := func(g flight, err error) error {
		if len(g.msgs) == 0 {
			return fmt.Errorf("sink: %w", err)
		}
		w.msgs, w.owner = g.msgs, g.owner
		return w.writeError(err, g.owns)
	}
	if err := w.rounds.Abort(rctx); err != nil {
		return fail(*failed, err)
	}
	if IsFatal(first(cause)) || errors.Is(cause, ErrFenced) {
		return fail(*failed, cause)
	}
	records := 0
	for _, g := range rounds {
		records += len(g.msgs)
	}
	w.log.Warn("transaction aborted; producing its rounds again, each in a new transaction",
		zap.String("transactional_id", w.cfg.TxnID()), zap.Int("rounds", len(rounds)), zap.Int("records", records), zap.Duration("deadline", w.redoLimit), zap.Error(first(cause)))
	for _, g := range rounds {
		if len(g.msgs) > 0 {
			if err := w.kw.WriteMessages(rctx, g.msgs...); err != nil {
				if err := w.recover(rctx, g, err); err != nil {
					return err
				}
				continue
			}
		}
		if err := w.done(ctx, g); err != nil {
			return err
		}
	}
	return nil
}
