package pipeline

import (
	"time"

	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/sink"
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
	// The Kafka side's loops, as sink adds them up from the loops' own
	// bounds (sink.Config.Retries): Request, Batch, CoordinatorCall,
	// Transaction, Redo, Behind, LeaderWaits, and the worst cases from a
	// Kafka fault to the Writer's failing.
	sink.Retries
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
	// (at-least-once: ToFailure, a failed round and the rounds behind it;
	// exactly-once: ToFailureExactlyOnce, a failed round, commit or begin
	// and the redo of its transaction), the source silent
	// (SourceSilence), each + FinalWrite + RestartBackoff. From Redis
	// unreachable to the lease's loss: LeaseLoss (the pipeline then stops
	// at once, without a drain).
	KafkaToRestart, KafkaToRestartExactlyOnce, SourceToRestart, RedisToLeaseLoss time.Duration
}

// Retries returns cfg's retry budget (see RetryBudget).
func Retries(cfg config.Config) RetryBudget {
	b := RetryBudget{Retries: cfg.Kafka.Retries()}
	b.SourceSilence = cfg.Source.ReadTimeout
	b.RedisCommand = cfg.Checkpoint.Timeout
	b.FinalWrite = 2 * cfg.Checkpoint.Timeout
	b.MirrorCopy = cfg.Checkpoint.MirrorInterval
	b.RestartBackoff = cfg.RetryBackoffMax
	b.LeaseRenew = cfg.HA.RenewEvery()
	b.LeaseLoss = cfg.HA.TTL - cfg.HA.StopMargin()
	b.HandOver = cfg.HA.HandOverAfter + cfg.HA.TTL
	b.Drain = cfg.ShutdownTimeout
	b.KafkaToRestart = b.ToFailure + b.FinalWrite + b.RestartBackoff
	b.KafkaToRestartExactlyOnce = b.ToFailureExactlyOnce + b.FinalWrite + b.RestartBackoff
	b.SourceToRestart = b.SourceSilence + b.FinalWrite + b.RestartBackoff
	b.RedisToLeaseLoss = b.LeaseLoss
	return b
}
