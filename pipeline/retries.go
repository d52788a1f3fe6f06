package pipeline

import (
	"time"

	"github.com/cdc-outbox/cdc-outbox/config"
)

// Bounds of package sink's Producer that are not configuration, as
// sink/produce.go and sink/txn.go set them (Producer.backoff, txnCall,
// txnRedos, retryLeader): Retries computes its worst cases with them.
const (
	// produceBackoffStep × attempt², at most produceBackoffMax: the
	// wait before a batch's or a coordinator call's next try.
	produceBackoffStep = 100 * time.Millisecond
	produceBackoffMax  = time.Second
	// concurrentWaits: CONCURRENT_TRANSACTIONS answers are asked again up
	// to 200 times, at most 10 ms apart, without counting as attempts.
	concurrentWaits = 200 * 10 * time.Millisecond
	// txnRedos: a round whose transaction was aborted is produced again
	// in a new transaction, up to 3 transactions.
	txnRedos = 3
	// leaderTries, leaderGap: start-up reads retried while a partition's
	// leadership moves.
	leaderTries = 10
	leaderGap   = 300 * time.Millisecond
)

// restartBackoff is the first wait before a pipeline restart; it doubles
// up to retry-backoff-max and comes back to restartBackoff after a run
// that lasted longer than restartCalm.
const (
	restartBackoff = time.Second
	restartCalm    = time.Minute
)

// RetryBudget is every retry loop's worst case under a configuration,
// and the totals from a fault to a pipeline restart and to a lease loss:
// docs/operations.md, "Retries and timeouts", is its table (pinned by
// TestRetriesTable). Each is an upper bound: a fault that lasts shorter
// ends the loop sooner.
type RetryBudget struct {
	// Request: one Kafka request on a new connection (dial-timeout +
	// write-timeout).
	Request time.Duration
	// Batch: one batch's produce retries: tried until max-attempts tries
	// were made and delivery-timeout passed since the first, each try a
	// Request, the backoffs between them.
	Batch time.Duration
	// CoordinatorCall: one transaction coordinator request
	// (InitProducerId, AddPartitionsToTxn, EndTxn; exactly-once):
	// max-attempts tries with the backoffs, and the CONCURRENT_TRANSACTIONS
	// waits.
	CoordinatorCall time.Duration
	// Transaction: one round under exactly-once with its redos: up to
	// txnRedos transactions, each InitProducerId, AddPartitionsToTxn, the
	// batch and EndTxn, aborted (EndTxn) before the next.
	Transaction time.Duration
	// LeaderWaits: the waits between the start-up reads of a partition
	// whose leadership moves (the reads themselves not counted).
	LeaderWaits time.Duration
	// SourceSilence: a source that sends nothing, not even a heartbeat
	// (read-timeout).
	SourceSilence time.Duration
	// RedisCommand: one Redis command (checkpoint.timeout; the client's
	// one retry within it).
	RedisCommand time.Duration
	// FinalWrite: the checkpoint written when a pipeline stops (2 ×
	// checkpoint.timeout). The periodic writes never stop the pipeline:
	// a failed one is tried again at the next interval.
	FinalWrite time.Duration
	// MirrorCopy: a failed copy to the mirror is tried again after
	// checkpoint.interval, doubling up to mirror-interval.
	MirrorCopy time.Duration
	// RestartBackoff: the longest wait before a pipeline restart
	// (retry-backoff-max); restarts are not bounded in number.
	RestartBackoff time.Duration
	// LeaseRenew: how often the lease is renewed (renew-interval, or
	// lease-ttl/3); LeaseLoss: the longest time renewals may fail before
	// the lease counts as lost (lease-ttl − margin since the last renewal
	// sent).
	LeaseRenew, LeaseLoss time.Duration
	// HandOver: an owner whose pipeline keeps restarting releases the
	// lease after handover-after and acquires again after a lease-ttl.
	HandOver time.Duration
	// Drain: what a signal leaves the pipeline to flush (shutdown-timeout).
	Drain time.Duration

	// Totals from a fault to the pipeline's restart: Kafka unreachable
	// (at-least-once: Batch; exactly-once: Transaction), the source
	// silent (SourceSilence), each + FinalWrite + RestartBackoff. From
	// Redis unreachable to the lease's loss: LeaseLoss (the pipeline then
	// stops at once, without a drain).
	KafkaToRestart, KafkaToRestartExactlyOnce, SourceToRestart, RedisToLeaseLoss time.Duration
}

// produceBackoff is sink's Producer.backoff before try attempt+1.
func produceBackoff(attempt int) time.Duration {
	return min(time.Duration(attempt*attempt)*produceBackoffStep, produceBackoffMax)
}

// tries is n tries of try each with the backoffs between them.
func tries(n int, try time.Duration) time.Duration {
	d := time.Duration(n) * try
	for a := 1; a < n; a++ {
		d += produceBackoff(a)
	}
	return d
}

// Retries returns cfg's retry budget (see RetryBudget).
func Retries(cfg config.Config) RetryBudget {
	k := cfg.Kafka
	var b RetryBudget
	b.Request = k.DialTimeout + k.WriteTimeout
	// The last try may begin just before delivery-timeout runs out.
	b.Batch = max(tries(k.MaxAttempts, b.Request), k.DeliveryTimeout+produceBackoffMax+b.Request)
	b.CoordinatorCall = tries(k.MaxAttempts, b.Request) + concurrentWaits
	b.Transaction = txnRedos * (3*b.CoordinatorCall + b.Batch + b.CoordinatorCall)
	for a := 1; a < txnRedos; a++ {
		b.Transaction += produceBackoff(a)
	}
	b.LeaderWaits = (leaderTries - 1) * leaderGap
	b.SourceSilence = cfg.Source.ReadTimeout
	b.RedisCommand = cfg.Checkpoint.Timeout
	b.FinalWrite = 2 * cfg.Checkpoint.Timeout
	b.MirrorCopy = cfg.Checkpoint.MirrorInterval
	b.RestartBackoff = cfg.RetryBackoffMax
	b.LeaseRenew = cfg.HA.RenewEvery()
	b.LeaseLoss = cfg.HA.TTL - cfg.HA.StopMargin()
	b.HandOver = cfg.HA.HandOverAfter + cfg.HA.TTL
	b.Drain = cfg.ShutdownTimeout
	b.KafkaToRestart = b.Batch + b.FinalWrite + b.RestartBackoff
	b.KafkaToRestartExactlyOnce = b.Transaction + b.FinalWrite + b.RestartBackoff
	b.SourceToRestart = b.SourceSilence + b.FinalWrite + b.RestartBackoff
	b.RedisToLeaseLoss = b.LeaseLoss
	return b
}
