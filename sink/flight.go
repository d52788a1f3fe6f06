package sink

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/segmentio/kafka-go"
)

// flight is a round begun and not yet acknowledged (idempotent producer:
// up to MaxInFlight of them). Its acknowledgement (with the budget to
// release) and observation wait until it lands, in order.
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

// pipelined reports whether the Writer sends a round before the previous
// one was acknowledged (the idempotent producer keeps them in order).
func (w *Writer) pipelined() bool { return w.prod != nil && w.prod.MaxInFlight() > 1 }

// launch is flushUpTo for the pipelined Writer: it begins the current
// round (landing the oldest first when MaxInFlight are in flight) and
// leaves its acknowledgement of the first n pending transactions to land.
func (w *Writer) launch(ctx context.Context, pending *[]binlog.Position, n int) error {
	if len(w.flights) >= w.prod.MaxInFlight() {
		if err := w.land(ctx); err != nil {
			return err
		}
	}
	f := flight{msgs: w.msgs, owner: w.owner, pend: slices.Clone(*pending), sizes: slices.Clone(w.sizes), evs: slices.Clone(w.events), owns: slices.Clone(w.owns), n: n, began: time.Now()}
	if len(f.msgs) > 0 {
		r, err := w.prod.Begin(ctx, f.msgs)
		if err != nil {
			return w.writeError(err, w.owns)
		}
		f.r = r
	} else if len(w.flights) == 0 {
		// Nothing in flight: acknowledge at once.
		return w.landed(ctx, f, pending)
	}
	w.flights = append(w.flights, f)
	*pending = append((*pending)[:0], (*pending)[n:]...)
	w.sizes = append(w.sizes[:0], w.sizes[n:]...)
	w.events = append(w.events[:0], w.events[n:]...)
	w.owns = append(w.owns[:0], w.owns[n:]...)
	// The next round is sized like this one (not like the largest so
	// far: a trickle after a backlog would clear megabytes per round).
	w.msgs, w.owner, w.bytes = make([]kafka.Message, 0, max(len(f.msgs), 64)), make([]int, 0, max(len(f.owner), 64)), 0
	return nil
}

// landed acknowledges f at once (no round in flight) and trims pending.
func (w *Writer) landed(ctx context.Context, f flight, pending *[]binlog.Position) error {
	if err := w.done(ctx, f); err != nil {
		return err
	}
	*pending = append((*pending)[:0], (*pending)[f.n:]...)
	w.sizes = append(w.sizes[:0], w.sizes[f.n:]...)
	w.events = append(w.events[:0], w.events[f.n:]...)
	w.owns = append(w.owns[:0], w.owns[f.n:]...)
	return nil
}

// settle lands every round in flight, in order.
func (w *Writer) settle(ctx context.Context) error {
	for len(w.flights) > 0 {
		if err := w.land(ctx); err != nil {
			return err
		}
	}
	return nil
}

// land waits for the oldest round in flight and acknowledges it. When it
// failed, the later rounds are waited for too (nothing is in flight
// then), the failed round is handled as flushUpTo handles a failure
// (MESSAGE_TOO_LARGE: its records resent one at a time; else a
// *WriteError), and the later rounds' records that the Producer did not
// write because of it (errEarlierFailed) are sent again, in order.
func (w *Writer) land(ctx context.Context) error {
	f := w.flights[0]
	w.flights = w.flights[1:]
	err := w.wait(ctx, f)
	if err == nil {
		return w.done(ctx, f)
	}
	later := w.flights
	w.flights = nil
	outcomes := make([]error, len(later))
	for i, g := range later {
		outcomes[i] = w.wait(ctx, g)
	}
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
	err := w.prod.Wait(ctx, f.r)
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
// transaction, with the budget and rows of its transactions.
func (w *Writer) done(ctx context.Context, f flight) error {
	if err := w.ackFirst(ctx, pendingTxns{f.pend, f.sizes, f.evs, f.owns}, f.n); err != nil {
		return err
	}
	clear(f.msgs)
	return nil
}
