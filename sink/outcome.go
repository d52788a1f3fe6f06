package sink

import (
	"errors"
	"time"

	"github.com/segmentio/kafka-go"
)

// outcome is what the Producer does with a batch after an attempt.
type outcome int

const (
	// outAcked: written (DUPLICATE_SEQUENCE_NUMBER: the broker has it
	// already, from an attempt whose answer was lost).
	outAcked outcome = iota
	// outRetry: not written, or unknown; resend the same bytes after a backoff.
	outRetry
	// outRetryNow: OUT_OF_ORDER_SEQUENCE_NUMBER while an earlier batch
	// of the partition is not acknowledged: the broker refused it because
	// that one is missing; resend once the earlier one is in, no backoff.
	outRetryNow
	// outReset: the broker lost or refused the producer's state
	// (UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH, or
	// OUT_OF_ORDER_SEQUENCE_NUMBER with every earlier batch acknowledged):
	// a new epoch and sequences from 0 (KIP-360), if nothing unacknowledged
	// may have been written.
	outReset
	// outFail: not retriable; the batch fails.
	outFail
)

// classify decides a batch's outcome from its last attempt's error; head
// reports whether every earlier batch of its partition was acknowledged
// when the attempt was sent (KIP-98 sequence rules, as the Java producer and franz-go apply them).
func classify(err error, head bool) outcome { return classifyBatch(err, head, false) }

// classifyBatch is classify for a transactional producer too (txn): there
// an epoch may not change under an open transaction, so what would reset
// the epoch fails the batch instead (the transaction is aborted and the
// round produced again; a fence is fatal: classifyTxn).
func classifyBatch(err error, head, txn bool) outcome {
	if txn && err != nil {
		switch classifyTxn(err) {
		case txnFenced:
			return outFail
		}
		var ke kafka.Error
		if errors.As(err, &ke) && (ke == kafka.UnknownProducerId || ke == kafka.InvalidTransactionState ||
			ke == kafka.OutOfOrderSequenceNumber && head) {
			return outFail
		}
	}
	if err == nil {
		return outRetry // not answered yet: never the case after collect
	}
	if errors.Is(err, errHeld) {
		return outRetryNow // never sent: send it now, every earlier batch is settled
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.DuplicateSequenceNumber:
			return outAcked
		case kafka.OutOfOrderSequenceNumber:
			if head {
				return outReset
			}
			return outRetryNow
		case kafka.UnknownProducerId, kafka.InvalidProducerEpoch:
			return outReset
		}
	}
	if retriable(err) {
		return outRetry
	}
	return outFail
}

// stateTrust is how long after a partition's last acknowledgement the
// broker is taken to still hold the producer's state there. Kafka drops
// it after producer.id.expiration.ms without a write (default 1 day) or
// when retention deletes all of the producer's records.
const stateTrust = time.Minute

// overtake reports whether a partition's next batch may be sent while
// earlier batches of the partition (earlier of them) are not yet
// acknowledged; acked is when a batch of it was last acknowledged under
// the current producer epoch (zero: never), now the current time.
//
// Only a broker holding the producer's state on the partition refuses a
// batch out of sequence (OUT_OF_ORDER_SEQUENCE_NUMBER). Without that state
// (the producer's first batch there: a new producer id or epoch, a new
// topic, or the state expired), Kafka 2.5 to 4.4 writes a batch at any
// sequence (ProducerAppendInfo.checkSequence, KIP-360; KAFKA-15591): a
// later batch arriving before an earlier one that was refused
// (NOT_LEADER_OR_FOLLOWER on a new partition) would be written ahead of
// it, and the earlier one then refused or, taken as written, lost. So the
// first batch goes alone and the later ones wait for its acknowledgement.
func overtake(earlier int, acked, now time.Time) bool {
	if earlier == 0 {
		return true
	}
	return !acked.IsZero() && now.Sub(acked) < stateTrust
}

// txnOutcome is what the Producer does after a request to the transaction
// coordinator (or a transactional batch's error).
type txnOutcome int

const (
	// txnDone: accepted.
	txnDone txnOutcome = iota
	// txnAgain: CONCURRENT_TRANSACTIONS (the coordinator is still
	// finishing the previous transaction): the same request again shortly.
	txnAgain
	// txnRelookup: the coordinator moved or is not ready
	// (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
	// COORDINATOR_LOAD_IN_PROGRESS) or the connection failed: look it up
	// again and retry after a backoff.
	txnRelookup
	// txnRetry: another retriable error: retry after a backoff.
	txnRetry
	// txnFenced: a newer producer of the transactional id took over
	// (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
	// TRANSACTION_COORDINATOR_FENCED) or the id is not allowed
	// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED): fatal, *FencedError.
	txnFenced
	// txnAbortable: any other refusal: abort the transaction and produce
	// the round again in a new one.
	txnAbortable
)

// classifyTxn decides the outcome of a transactional request's error
// (KIP-98; the Java client's TransactionManager applies the same split).
func classifyTxn(err error) txnOutcome {
	if err == nil {
		return txnDone
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.ProducerFenced, kafka.InvalidProducerEpoch, kafka.TransactionCoordinatorFenced, kafka.TransactionalIDAuthorizationFailed:
			return txnFenced
		case kafka.ConcurrentTransactions:
			return txnAgain
		case kafka.GroupCoordinatorNotAvailable, kafka.NotCoordinatorForGroup, kafka.GroupLoadInProgress:
			return txnRelookup
		}
		if ke.Temporary() {
			return txnRetry
		}
		return txnAbortable
	}
	if retriable(err) {
		return txnRelookup
	}
	return txnAbortable
}
