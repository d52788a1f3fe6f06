package consumer

import "fmt"

// Verdict is what the Consumer does with one record.
type Verdict int

const (
	// Handle: the conversation's next record (or its first one seen).
	Handle Verdict = iota
	// Duplicate: the event id was handled before; skipped, committed past.
	Duplicate
	// GapThenHandle: seq_no jumped past last+1; the gap is reported, then the
	// record is handled.
	GapThenHandle
	// HandleLate: not seen, but behind the conversation's last seq_no (a
	// replay or resend filling a reported gap, or a duplicate older than the
	// dedupe window and store); handled with Record.Late set.
	HandleLate
)

func (v Verdict) String() string {
	switch v {
	case Handle:
		return "handle"
	case Duplicate:
		return "duplicate"
	case GapThenHandle:
		return "gap"
	case HandleLate:
		return "late"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Decide is the ordering and dedupe rule, a pure function. seen says the
// record's event id was handled before (dedupe window or Store); known says
// the conversation has a last handled seq_no, last. Dedupe comes first, by
// event id only (two distinct events may share a seq_no); the seq_no then
// tells in-order, gap or late.
func Decide(seen, known bool, last, seq int64) Verdict {
	switch {
	case seen:
		return Duplicate
	case !known || seq == last+1:
		return Handle
	case seq > last+1:
		return GapThenHandle
	default: // seq <= last
		return HandleLate
	}
}

// Gap is a seq_no jump within one ordering key (an im conversation): the records After+1 …
// Next-1 were not seen before Next.
type Gap struct {
	Topic     string
	Partition int
	Offset    int64  // of the record with seq_no Next
	Key       string // the ordering key (im: the conversation_id)
	EventType string
	After     int64 // the last seq_no handled
	Next      int64 // the seq_no that arrived
}

// Missing is how many seq_nos the gap skips.
func (g Gap) Missing() int64 { return g.Next - g.After - 1 }

func (g Gap) String() string {
	return fmt.Sprintf("gap in key %s (%s) on %s/%d@%d: seq_no %d after %d, %d missing",
		g.Key, g.EventType, g.Topic, g.Partition, g.Offset, g.Next, g.After, g.Missing())
}
