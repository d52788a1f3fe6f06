package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/sink"
)

func TestReachHint(t *testing.T) {
	cfg := config.Default()
	cfg.Kafka.Brokers = []string{"127.0.0.1:39092", "kafka-2:9092"}
	cfg.Checkpoint.Addr = "127.0.0.1:36379"
	dial := func(addr string) error {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		return &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: syscall.ECONNREFUSED}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{&sink.WriteError{Err: fmt.Errorf("metadata of topic t: %w", dial("127.0.0.1:39092"))}, "cannot reach Kafka at 127.0.0.1:39092: is the broker up, and kafka.brokers right?"},
		{&sink.WriteError{Err: &net.DNSError{Name: "kafka-2", Err: "no such host"}}, "cannot reach Kafka at kafka-2"},
		{&sink.WriteError{Err: &net.DNSError{Name: "kafka", Err: "no such host"}}, "advertises (advertised.listeners)"},
		{fmt.Errorf("checkpoint: GET k from 127.0.0.1:36379: %w", dial("127.0.0.1:36379")), "checkpoint.addr"},
		{fmt.Errorf("binlog: connect: %w; check source.addr", &net.DNSError{Name: "db.internal", Err: "no such host"}), ""},
		{fmt.Errorf("x: %w", dial("10.0.0.9:1")), ""},
		{errors.New("sink: write event 1: NOT_ENOUGH_REPLICAS"), ""},
		{&sink.WriteError{Err: fmt.Errorf("metadata of topic t: %w", context.DeadlineExceeded)}, "no answer from Kafka in time"},
		{fmt.Errorf("checkpoint: GET: %w", context.DeadlineExceeded), ""},
		{&sink.WriteError{Err: &sink.TimeoutError{Addr: "127.0.0.1:39092", What: "a Produce request", Within: "kafka.write-timeout", Bound: 10 * time.Second, Err: context.DeadlineExceeded}},
			"Kafka broker 127.0.0.1:39092 accepts connections but does not answer within kafka.write-timeout (10s)"},
	} {
		if got := ReachHint(c.err, cfg); !strings.Contains(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("ReachHint(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
