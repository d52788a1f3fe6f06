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
func classify(err error, head bool) outcome {
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
