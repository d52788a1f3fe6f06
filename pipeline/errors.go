package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
)

// Sentinel errors of the publisher. Test with errors.Is.
var (
	// ErrPartitionsChanged reports a topic whose partition count differs
	// from the one stored with the checkpoint: the key → partition mapping
	// changed, so a conversation's records before and after the change are
	// on different partitions and consumers may see them out of order.
	// Confirm with run --accept-partition-change or "checkpoint set".
	ErrPartitionsChanged = errors.New("topic partition count changed")
	// ErrRecover reports a checkpoint recovery (--recover-checkpoint,
	// checkpoint.recover) that cannot be done.
	ErrRecover = errors.New("checkpoint recovery")
	// ErrTopicMissing reports, at start, that the fixed router.topic does
	// not exist and kafka.allow-auto-topic-creation is off: every write
	// would fail, so run refuses to start instead of retrying for ever.
	ErrTopicMissing = errors.New("topic does not exist")
	// ErrBackfill reports a backfill that cannot be done (a checkpoint
	// exists, an unsupported server, a bad source.backfill-where). Errors
	// wrapping it also wrap binlog.ErrStart, so they are fatal.
	ErrBackfill = errors.New("backfill")
	// ErrAbort, as the cause of a cancelled context, makes Run stop at
	// once without draining (see Run).
	ErrAbort = errors.New("pipeline: aborted")
	// ErrLeaseLost reports that the Publisher's Fence was lost (not
	// renewed in time, or taken over): it stopped publishing. Not an error
	// of the source: the instance goes back to standby (package ha).
	ErrLeaseLost = fmt.Errorf("%w: the source's lease was lost", ErrAbort)
)

func backfillError(format string, a ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrBackfill, binlog.ErrStart, fmt.Sprintf(format, a...))
}

// IsFatal decides, in one place, which errors stop the process instead of
// restarting the pipeline: configuration, privileges, server settings,
// unavailable positions, undecodable rows and poison records under
// kafka.on-poison: fail (sink.ErrPoison: invalid JSON, unroutable or
// oversize records), a corrupt checkpoint, a partition count change, a
// start the decision refused, Redis refusing the credentials
// (checkpoint.ErrAuth), a checkpoint write refused (checkpoint.ErrFenced,
// ErrBackwards: this publisher must not go on) and a lost lease.
func IsFatal(err error) bool {
	return binlog.IsFatal(err) || sink.IsFatal(err) || errors.Is(err, router.ErrTopic) ||
		errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrAuth) || errors.Is(err, checkpoint.ErrTLS) ||
		checkpoint.Refused(err) || errors.Is(err, ErrLeaseLost) ||
		errors.Is(err, ErrPartitionsChanged) || errors.Is(err, ErrRecover) ||
		errors.Is(err, ErrTopicMissing) || errors.Is(err, ErrBackfill) || errors.Is(err, sink.ErrMirror)
}

// ReachHint names the setting behind a failed connection to Kafka or Redis
// in err, or the bound a silent broker exceeded (a *sink.TimeoutError),
// for the restart warning, or returns "" (no dial or DNS failure,
// or one to the source, whose errors name source.addr already). The failed
// address is compared with kafka.brokers and checkpoint.addr; a broker
// address that is neither (in a Kafka error) is one the cluster advertises
// (advertised.listeners).
func ReachHint(err error, cfg config.Config) string {
	var dns *net.DNSError
	var op *net.OpError
	var we *sink.WriteError
	var me *sink.MetadataError
	var te *sink.TimeoutError
	target := ""
	switch {
	case errors.As(err, &te):
		// A broker that accepts connections and answers nothing within a
		// bound of the configuration: the error names it.
		return fmt.Sprintf("Kafka broker %s accepts connections but does not answer within %s (%s): is it stopped or overloaded, or a firewall dropping packets? Raise %s if it is only slow",
			te.Addr, te.Within, te.Bound, te.Within)
	case errors.As(err, &dns):
		target = dns.Name
	case errors.As(err, &op) && op.Op == "dial" && op.Addr != nil:
		target = op.Addr.String()
	case (errors.As(err, &we) || errors.As(err, &me)) && errors.Is(err, context.DeadlineExceeded):
		// No connection error: Kafka did not answer in time (often a
		// firewall dropping packets).
		return fmt.Sprintf("no answer from Kafka in time: can this host reach kafka.brokers %v (a firewall dropping packets looks like this), and the addresses the brokers advertise?",
			cfg.Kafka.Brokers)
	default:
		return ""
	}
	is := func(addrs ...string) bool {
		for _, a := range addrs {
			if host, _, _ := net.SplitHostPort(a); a == target || host == target {
				return true
			}
		}
		return false
	}
	switch {
	case is(cfg.Kafka.Brokers...):
		return fmt.Sprintf("cannot reach Kafka at %s: is the broker up, and kafka.brokers right?", target)
	case is(append([]string{cfg.Checkpoint.Addr}, cfg.Checkpoint.Addrs...)...):
		return fmt.Sprintf("cannot reach Redis at %s: is it up, and %s right?", target, cfg.Checkpoint.AddrKey())
	case errors.As(err, &we) || errors.As(err, &me):
		return fmt.Sprintf("cannot reach %s, a broker address the Kafka cluster advertises (advertised.listeners), not one of kafka.brokers: this host must resolve and reach it", target)
	}
	return "" // the source's errors name source.addr themselves
}
