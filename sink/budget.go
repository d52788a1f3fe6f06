package sink

import "time"

// DefaultLatencyBudget is the default latency budget (the configuration's
// latency-budget): at most 111 rounds per second less than half full (a
// gap of 9 ms), where sending each round as soon as the previous one is
// answered made about 312 at 5,000 events/s (issue 37; the brokers' cost
// follows them), with source.linger staying 3 ms; aimed at p99 commit →
// append within 15 ms on a quiet machine (BENCHMARKS.md, "Latency
// budget").
const DefaultLatencyBudget = 15 * time.Millisecond

// Latency budget bounds (the configuration's latency-budget).
const (
	MinLatencyBudget = time.Millisecond
	MaxLatencyBudget = 10 * time.Second
)

// Share is how a latency budget is spent by the stages (Split).
type Share struct {
	// Linger is the binlog stream's pause after a read that drained it
	// (binlog.Config.Linger, source.linger): a fifth of the budget, at
	// most 10 ms (above ~15 ms the pause is skipped anyway at 5,000
	// events/s: 64 KiB arrive within it).
	Linger time.Duration
	// Gap is the least time between the starts of two produce rounds
	// that are less than half full (Writer: a round half full or more
	// goes at once, so a backlog is not slowed): three fifths of the
	// budget. A round whose
	// predecessor began longer ago than Gap goes at once (a trickle pays
	// no wait); at a higher rate rounds, and so the Produce requests per
	// broker, stay under 1/Gap per second and grow instead of
	// multiplying. An exactly-once Writer that ran dry commits at most
	// once per Gap as well.
	Gap time.Duration
	// TransactionInterval is how long an exactly-once transaction stays
	// open for more rounds while rounds keep coming (a backlog; see
	// Config.TransactionInterval): the budget, at least
	// DefaultTransactionInterval (more commits slow a drain, not a
	// trickle) and at most TransactionTimeout/2.
	TransactionInterval time.Duration
}

// Split returns how budget (the p99 commit → append latency the operator
// accepts, MinLatencyBudget to MaxLatencyBudget) is spent: the time from a
// commit to its append is the binlog pause (at most Linger), the wait for
// the next round (at most Gap) and the round trip (~1–3 ms on a healthy
// broker), so Linger + Gap leave a fifth of it for the round trip.
func Split(budget time.Duration) Share {
	return Share{
		Linger:              min(budget/5, 10*time.Millisecond),
		Gap:                 budget * 3 / 5,
		TransactionInterval: min(max(budget, DefaultTransactionInterval), TransactionTimeout/2),
	}
}

// CommitSpacing returns the least time between two commits of an
// exactly-once Writer that ran dry (nothing gathered, queued or in
// flight; Writer.wantCommit): the transaction interval, at least the
// budget's Gap, so that at a steady rate one Kafka transaction spans the
// produce rounds of a whole interval (as Kafka Streams' commit.interval.ms,
// 100 ms under exactly_once_v2) instead of one round each: the broker pays
// about 1–1.5 ms of CPU per transaction (the transaction log's
// AddPartitionsToTxn, PrepareCommit and CompleteCommit records, the
// partition verification of KIP-890, one WriteTxnMarkers request and a
// marker per partition; BENCHMARKS.md, issue 37). A commit whose
// predecessor is that old or older goes at once (sendAt), so a trickle
// pays no wait. With no budget (gap 0: the cadence before it) it is 0, a
// commit as soon as the Writer runs dry.
func CommitSpacing(gap, interval time.Duration) time.Duration {
	if gap <= 0 {
		return 0
	}
	return max(gap, interval)
}

// commitAt returns when a Writer run dry commits, given the previous
// commit (lastCommit), the start of the last round with records
// (lastSend), the CommitSpacing and the gap: at sendAt(lastCommit, now,
// spacing), unless that falls in the second half of the last round's gap,
// where the next round is due soon: a commit there (EndTxn, then the
// markers that the next AddPartitionsToTxn waits for) would delay that
// round by a few round trips. It then waits for the gap's end: a round
// due then goes first, and the commit follows its landing, early in the
// next gap (with nothing to send, it commits then). A pure function
// (Writer.wantCommit).
func commitAt(lastCommit, lastSend, now time.Time, spacing, gap time.Duration) time.Time {
	at := sendAt(lastCommit, now, spacing)
	if gap <= 0 || lastSend.IsZero() {
		return at
	}
	if since := at.Sub(lastSend); since > gap/2 && since < gap {
		return lastSend.Add(gap)
	}
	return at
}

// sendAt returns when a round that is not full may be sent: at once
// (now) when the previous round began gap or longer ago (or never), else
// gap after it began. A pure function of its inputs (the Writer's
// cadence, for rounds and for the commits of a Writer run dry).
func sendAt(last, now time.Time, gap time.Duration) time.Time {
	if last.IsZero() || now.Sub(last) >= gap {
		return now
	}
	return last.Add(gap)
}
