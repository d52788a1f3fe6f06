package sink

import (
	"errors"

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
