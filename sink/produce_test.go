package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestRetriable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{kafka.NotLeaderForPartition, true},
		{fmt.Errorf("t/1: %w", kafka.LeaderNotAvailable), true},
		{kafka.RequestTimedOut, true},
		{kafka.NotEnoughReplicas, true},
		{kafka.UnknownTopicOrPartition, true},
		{kafka.MessageSizeTooLarge, false},
		{kafka.InvalidTopic, false},
		{kafka.TopicAuthorizationFailed, false},
		{kafka.InvalidMessage, true}, // CORRUPT_MESSAGE
		{io.ErrUnexpectedEOF, true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{errors.New("unexpected produce response"), false},
	} {
		if got := retriable(c.err); got != c.want {
			t.Errorf("retriable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
