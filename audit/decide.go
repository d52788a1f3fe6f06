package audit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// Result names what the audit counted (the result label of
// cdc_outbox_audit_events_total).
type Result string

// Results. Missing and Reordered are alerts (deploy/prometheus); the others
// metrics.
const (
	OK        Result = "ok"        // row and record agree
	Missing   Result = "missing"   // a row whose record is not in Kafka, confirmed a round later
	Reordered Result = "reordered" // a first delivery whose order value is below an earlier one of its key
	Split     Result = "split"     // a key's record on another partition than its earlier ones
	Duplicate Result = "duplicate" // a record beyond the first of its event id, before its range was audited (a replay after a restart)
	// Late is a duplicate of an event whose range was already audited:
	// beyond the replay window (a publisher restart replays only what
	// is after the checkpoint, and audited ranges are behind it).
	Late    Result = "duplicate_late"
	Payload Result = "payload_mismatch" // the record value differs from the row's payload column
	// NotInTable: records of ids without a row (deleted in the same
	// transaction, or pruned since): published, nothing to compare.
	NotInTable Result = "not_in_table"
	// Unseen: ids of an audited range with neither a row nor a record
	// (rolled-back inserts, or rows deleted or pruned before the audit
	// read them): what the audit could not see.
	Unseen Result = "unseen"
)

// Results lists every Result (each series exists from the start).
var Results = []Result{OK, Missing, Reordered, Split, Duplicate, Late, Payload, NotInTable, Unseen}

// Passed reports whether checkpoint position cp is at or past mark, the
// server's binlog end read just after a range's largest id: then every
// transaction committed before the range was read is acknowledged. With
// both GTID sets known it compares them (cp's set contains mark's: MySQL
// manual "GTID Sets"; MariaDB: per domain); else file and offset
// (binlog.ComparePos). A position without a file is not passed.
func Passed(flavor string, cp, mark binlog.Position) bool {
	if cp.GTIDSet != "" && mark.GTIDSet != "" {
		a, errA := mysql.ParseGTIDSet(flavor, cp.GTIDSet)
		b, errB := mysql.ParseGTIDSet(flavor, mark.GTIDSet)
		if errA == nil && errB == nil {
			return a.Contain(b)
		}
	}
	if cp.File == "" || mark.File == "" {
		return false
	}
	return binlog.ComparePos(cp, mark) >= 0
}

// sampleDen is the denominator of Sampled's fraction.
const sampleDen = 10000

// Sampled reports whether id is in the sample of fraction frac: id mod
// 10000 < frac × 10000 (the same ids after a restart; SQL computes the
// same predicate).
func Sampled(id uint64, frac float64) bool {
	return id%sampleDen < sampleCut(frac)
}

func sampleCut(frac float64) uint64 { return uint64(frac*sampleDen + 0.5) }

// recordFacts are what the audit knows about one record it reads.
type recordFacts struct {
	HasID   bool // it carries an integer event_id header
	Audited bool // its id is at or below the cursor: its range was audited
	Seen    bool // its id was read before, in the window not yet audited
	// Reread: its offset is below where the previous run had read to
	// (a restart reads the window again, to rebuild it, counting nothing).
	Reread bool
	// Armed: its offset is at or after the point from which a duplicate
	// of an audited id is a fault (the read end when the first range was
	// audited: before that, ids at or below the first cursor may still
	// arrive for the first time).
	Armed bool
}

// verdict is what a record means.
type verdict int

const (
	ignore  verdict = iota // nothing to do
	first                  // a first delivery: remember the id, check order and partition
	replay                 // a duplicate inside the replay window
	late                   // a duplicate of an audited id: beyond the replay window
	rebuild                // re-read after a restart: remember the id, count nothing
)

func (v verdict) String() string {
	return [...]string{"ignore", "first", "replay", "late", "rebuild"}[v]
}

// classify decides what a record is.
func classify(f recordFacts) verdict {
	switch {
	case !f.HasID:
		return ignore
	case f.Audited && f.Reread:
		return ignore
	case f.Audited && f.Armed:
		return late
	case f.Audited:
		return ignore
	case f.Reread:
		return rebuild
	case f.Seen:
		return replay
	}
	return first
}

// keyState is what the audit remembers of a key (a conversation): its
// partition, its largest order value among first deliveries, and the
// round it was last seen in.
type keyState struct {
	Partition int
	MaxSeq    int64
	Round     int
}

// checkKey checks a record of a key against the key's state (known:
// there is one), returning the next state. Every record counts for the
// partition (split: a key on a second partition); only first deliveries
// for the order (ordered: the mapping has an order column published as a
// header), so that a replay's older values are not reordering.
func checkKey(st keyState, known bool, partition int, seq int64, isFirst, ordered bool, round int) (next keyState, split, reordered bool) {
	if !known {
		st = keyState{Partition: partition, MaxSeq: -1 << 63}
	} else if st.Partition != partition {
		split = true
		st.Partition = partition
	}
	st.Round = round
	if isFirst && ordered {
		if seq < st.MaxSeq {
			reordered = true
		} else {
			st.MaxSeq = seq
		}
	}
	return st, split, reordered
}

// rowResult decides a row of an audited range: published (its id was
// read), and with hashed (the record's payload hash is known and the row
// has a payload to compare) whether they agree. A row not published is a
// suspect, confirmed missing only a round later (confirm).
func rowResult(published, hashed, equal bool) (Result, bool) {
	switch {
	case !published:
		return "", true // suspect
	case hashed && !equal:
		return Payload, false
	}
	return OK, false
}

// confirm decides a suspect a round later: published since (it was in
// flight: OK), still missing while its row exists (Missing), or its row
// is gone too (Unseen: deleted or pruned before the audit could tell).
func confirm(publishedNow, rowExists bool) Result {
	switch {
	case publishedNow:
		return OK
	case rowExists:
		return Missing
	}
	return Unseen
}

// Fix returns the remedy for missing events: republish them from the
// binlog with replay over the window their range was committed in (from
// a minute before from to to), or, if they were dead-lettered, with
// dead-letter republish. ids are the event ids (the first ones).
func Fix(source string, ids []uint64, from, to time.Time) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	src := ""
	if source != "" && source != "default" {
		src = " --source " + source
	}
	return fmt.Sprintf("republish them: cdc-outbox replay%s --from %s --to %s (the window they were committed in; consumers see the others again as duplicates), "+
		"or, if they were dead-lettered, cdc-outbox dead-letter republish%s --event-id %s",
		src, from.Add(-time.Minute).UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), src, strings.Join(s, ","))
}
