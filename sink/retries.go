package sink

import "time"

// The retry bounds of the Producer and the Writer that are not
// configuration. The loops use them (backoffDelay, concurrentDelay,
// txnRedos, leaderTries, leaderGap) and Config.Retries adds them up, so
// that a change to a loop changes its stated worst case
// (docs/operations.md, "Retries and timeouts", pinned by
// pipeline.TestRetriesTable and TestRetries here).
const (
	// backoffStep × attempt², at most backoffMax: the wait before a
	// batch's, a metadata lookup's, a producer id's or a coordinator
	// call's next try, and before a transaction's redo (backoffDelay).
	backoffStep = 100 * time.Millisecond
	backoffMax  = time.Second
	// concurrentTries: a coordinator call answered CONCURRENT_TRANSACTIONS
	// is asked again up to concurrentTries−1 times (concurrentDelay apart),
	// without counting as an attempt.
	concurrentTries = 200
	// leaderTries, leaderGap: the start-up reads (retryLeader) retried
	// while a partition's leadership moves.
	leaderTries = 10
	leaderGap   = 300 * time.Millisecond
)

// backoffDelay is the wait before try attempt+1 (Producer.backoff).
func backoffDelay(attempt int) time.Duration {
	return min(time.Duration(attempt*attempt)*backoffStep, backoffMax)
}

// concurrentDelay is the wait after the n-th CONCURRENT_TRANSACTIONS
// answer of a coordinator call (n from 1): 2, 4, 8 ms, then 10 ms.
func concurrentDelay(n int) time.Duration {
	return min(time.Duration(1<<min(n, 4))*time.Millisecond, 10*time.Millisecond)
}

// Retries is the worst case of each of the Kafka side's retry loops under
// a Config, when every request waits out its timeout (a fault that ends
// sooner ends the loop sooner). pipeline.Retries adds the rest (Redis, the
// source, restarts, HA).
type Retries struct {
	// Request: one Kafka request on a new connection (dial-timeout +
	// write-timeout).
	Request time.Duration
	// Batch: one batch's produce retries (Producer.Wait): tried until
	// max-attempts tries were made and delivery-timeout passed since the
	// first, each try a Request, the backoffs between them. The topic
	// metadata lookup of Begin and the idempotent producer id
	// (at-least-once) retry the same way.
	Batch time.Duration
	// CoordinatorCall: one transaction coordinator request (txnCall:
	// InitProducerId, AddPartitionsToTxn, EndTxn; exactly-once):
	// max-attempts tries with the backoffs, and the CONCURRENT_TRANSACTIONS
	// waits.
	CoordinatorCall time.Duration
	// Failure, FailureExactlyOnce: from a Kafka fault to the Writer's
	// seeing it, the first loop that gives up: a batch's (a round's Wait,
	// or its Begin's metadata lookup or producer id), exactly-once also a
	// coordinator call's (a round's Begin, a commit).
	Failure, FailureExactlyOnce time.Duration
	// Transaction: one round produced again under exactly-once
	// (Producer.writeTxn): up to txnRedos transactions, each
	// InitProducerId, AddPartitionsToTxn, the batch, EndTxn commit and,
	// when it fails, EndTxn abort, the backoffs between them.
	Transaction time.Duration
	// Redo: the deadline of the redo of an aborted transaction
	// (Writer.redo): the rounds still in flight waited for, the abort
	// and every round of it produced again, however many, together
	// within one Transaction; then the Writer fails (the pipeline
	// restarts and its start decision settles the transaction).
	Redo time.Duration
	// Behind: at-least-once, after a round failed, the rounds still in
	// flight behind it are waited for (Writer.land) within one Batch,
	// together.
	Behind time.Duration
	// LeaderWaits: the waits between the start-up reads of a partition
	// whose leadership moves (the reads themselves not counted).
	LeaderWaits time.Duration
	// ToFailure, ToFailureExactlyOnce: from a Kafka fault to the Writer's
	// failing (its Run returns, the pipeline restarts): at-least-once
	// Failure + Behind, exactly-once FailureExactlyOnce + Redo.
	ToFailure, ToFailureExactlyOnce time.Duration
}

// tries is n tries of try each with the backoffs between them.
func tries(n int, try time.Duration) time.Duration {
	d := time.Duration(n) * try
	for a := 1; a < n; a++ {
		d += backoffDelay(a)
	}
	return d
}

// Retries returns c's retry budget (see Retries).
func (c Config) Retries() Retries {
	var r Retries
	r.Request = c.DialTimeout + c.WriteTimeout
	// The last try may begin just before delivery-timeout runs out.
	r.Batch = max(tries(c.MaxAttempts, r.Request), c.DeliveryTimeout+backoffMax+r.Request)
	r.CoordinatorCall = tries(c.MaxAttempts, r.Request)
	for n := 1; n < concurrentTries; n++ {
		r.CoordinatorCall += concurrentDelay(n)
	}
	r.Failure = r.Batch
	r.FailureExactlyOnce = max(r.Batch, r.CoordinatorCall)
	// InitProducerId, AddPartitionsToTxn, the batch, EndTxn commit, EndTxn abort.
	r.Transaction = txnRedos * (4*r.CoordinatorCall + r.Batch)
	for a := 1; a < txnRedos; a++ {
		r.Transaction += backoffDelay(a)
	}
	r.Redo = r.Transaction
	r.Behind = r.Batch
	r.LeaderWaits = (leaderTries - 1) * leaderGap
	r.ToFailure = r.Failure + r.Behind
	r.ToFailureExactlyOnce = r.FailureExactlyOnce + r.Redo
	return r
}
