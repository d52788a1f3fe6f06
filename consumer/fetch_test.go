package consumer

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
)

func TestFetchFatal(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"login refused", fmt.Errorf("failed to dial: %w", &sink.SecurityError{Setting: "kafka.sasl", Err: kafka.SASLAuthenticationFailed}), true},
		{"topic authorization failed", kafka.TopicAuthorizationFailed, true},
		{"offset out of range (past the end: wait)", fmt.Errorf("fetch t/0: %w", kafka.OffsetOutOfRange), false},
		{"storage error", kafka.KafkaStorageError, false},
		{"not leader", fmt.Errorf("read: %w", kafka.NotLeaderForPartition), false},
		{"broker unreachable", fmt.Errorf("failed to dial: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), false},
	} {
		if got := fetchFatal(c.err); got != c.want {
			t.Errorf("%s: fetchFatal(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
