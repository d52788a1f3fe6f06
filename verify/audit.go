package verify

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Row is an outbox row as stored in the table: an event that must have
// been published.
type Row struct {
	ID             uint64
	ConversationID int64
	SeqNo          int64
}

// Audit compares the records of one or more topics with the outbox rows
// of an id range [MinID, MaxID]. Memory is one bit per id in the range plus
// a few words per (topic, conversation): about 1.3 MB for ten million
// events over a hundred thousand conversations.
//
// An audit of a table whose id column is a string (NewStringAudit) has no
// range: it remembers each id seen (a map entry per event).
type Audit struct {
	minID, maxID uint64
	seen         []uint64            // bitmap of ids published at least once
	str          map[string]struct{} // string ids published at least once (NewStringAudit)
	order        string              // the header holding the ordering column's value; "" none
	conv         map[string]*convState
	rep          AuditReport
	maxMissing   uint64 // the largest id of a missing row (integer ids)
}

type convState struct {
	partition int
	maxSeq    int64
}

// AuditReport is the outcome of an audit.
type AuditReport struct {
	MinID, MaxID uint64
	// Records read from the topics; InRange of them carried an event id in
	// [MinID, MaxID]; the others are counted in OutOfRange and ignored.
	Records, InRange, OutOfRange int
	// Rows in the table within the range.
	Rows int
	// Duplicates: records beyond the first of their event id. MaxReplay is
	// the largest number of seq_no a duplicate lay behind the newest event
	// of its conversation at that point (how far a restart went back).
	Duplicates int
	MaxReplay  int64
	// Missing: rows never published (MissingIDs lists the first ones).
	Missing    int
	MissingIDs []uint64
	// MissingStrIDs lists the first missing ids of a string-id table.
	MissingStrIDs []string
	// NotInTable: published events absent from the table (deleted since,
	// e.g. by the delete-in-the-same-transaction pattern). Not an error.
	NotInTable int
	// Reordered: first deliveries whose seq_no is below an earlier first
	// delivery of the same conversation in the same topic.
	Reordered int
	// Split: (topic, conversation) pairs seen on more than one partition.
	Split    int
	Problems []string
	// OldestPublished is the smallest event id in range found on the
	// topics (integer ids; 0: none). When every missing row is older
	// (BeforeFirst), the publisher most likely started after them
	// (source.start: latest): the report says to verify from there.
	OldestPublished uint64
	BeforeFirst     bool
}

// OK reports whether nothing was lost, reordered or split.
func (r *AuditReport) OK() bool { return r.Missing == 0 && r.Reordered == 0 && r.Split == 0 }

// String renders the report as a small table.
func (r *AuditReport) String() string {
	var b strings.Builder
	if r.MinID == 0 && r.MaxID == 0 {
		fmt.Fprintf(&b, "event ids          every row (string ids)\n")
	} else {
		fmt.Fprintf(&b, "event ids          %d … %d\n", r.MinID, r.MaxID)
	}
	fmt.Fprintf(&b, "rows in table      %d\n", r.Rows)
	fmt.Fprintf(&b, "records read       %d (in range %d, outside %d)\n", r.Records, r.InRange, r.OutOfRange)
	fmt.Fprintf(&b, "missing            %d\n", r.Missing)
	fmt.Fprintf(&b, "duplicates         %d (furthest replay: %d events back)\n", r.Duplicates, r.MaxReplay)
	fmt.Fprintf(&b, "reordered          %d\n", r.Reordered)
	fmt.Fprintf(&b, "split              %d\n", r.Split)
	fmt.Fprintf(&b, "not in table       %d\n", r.NotInTable)
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "! %s\n", p)
	}
	if len(r.MissingIDs) > 0 {
		ids := make([]string, len(r.MissingIDs))
		for i, id := range r.MissingIDs {
			ids[i] = strconv.FormatUint(id, 10)
		}
		fmt.Fprintf(&b, "! missing event ids (first %d): %s\n", len(ids), strings.Join(ids, " "))
	}
	if len(r.MissingStrIDs) > 0 {
		fmt.Fprintf(&b, "! missing event ids (first %d): %s\n", len(r.MissingStrIDs), strings.Join(r.MissingStrIDs, " "))
	}
	if r.BeforeFirst {
		fmt.Fprintf(&b, "! every missing row is older than the oldest event on the topics (id %d): if the publisher started after them (source.start: latest, or a checkpoint set later), verify from there: --since-id %d\n",
			r.OldestPublished, r.OldestPublished)
	}
	return b.String()
}

// NewAudit audits event ids minID … maxID.
func NewAudit(minID, maxID uint64) *Audit {
	n := uint64(0)
	if maxID >= minID {
		n = maxID - minID + 1
	}
	return &Audit{minID: minID, maxID: maxID, seen: make([]uint64, (n+63)/64), conv: map[string]*convState{}, order: "seq_no",
		rep: AuditReport{MinID: minID, MaxID: maxID}}
}

// NewStringAudit audits a table whose id column is a string (a UUID, as
// in the Debezium layout): every record with an event_id is in range.
func NewStringAudit() *Audit {
	return &Audit{str: map[string]struct{}{}, conv: map[string]*convState{}, order: "seq_no"}
}

// SetOrder names the header holding the ordering column's value (the
// mapping's order column, published as a header; "seq_no" by default);
// "" checks no order (the mapping has no ordering column, or it is not
// published as a header).
func (a *Audit) SetOrder(header string) { a.order = header }

// seq returns r's ordering value (0 without an order header).
func (a *Audit) seq(r *Record) int64 {
	switch a.order {
	case "":
		return 0
	case "seq_no":
		return r.SeqNo
	}
	v, _ := strconv.ParseInt(r.Headers[a.order], 10, 64)
	return v
}

// first marks r's event id as seen and reports whether it was new; ok is
// false for an id outside the audit (no event_id, out of range).
func (a *Audit) first(r *Record) (isNew, ok bool) {
	if a.str != nil {
		if r.EventID == "" {
			return false, false
		}
		if _, dup := a.str[r.EventID]; dup {
			return false, true
		}
		a.str[r.EventID] = struct{}{}
		return true, true
	}
	id, err := strconv.ParseUint(r.EventID, 10, 64)
	if err != nil || id < a.minID || id > a.maxID {
		return false, false
	}
	w, m := a.bit(id)
	if a.seen[w]&m != 0 {
		return false, true
	}
	a.seen[w] |= m
	return true, true
}

func (a *Audit) problem(format string, args ...any) {
	if len(a.rep.Problems) < 20 {
		a.rep.Problems = append(a.rep.Problems, fmt.Sprintf(format, args...))
	}
}

func (a *Audit) bit(id uint64) (word int, mask uint64) {
	i := id - a.minID
	return int(i / 64), 1 << (i % 64)
}

// Add checks one record. Records of a partition must come in offset order.
func (a *Audit) Add(r Record) {
	a.rep.Records++
	isNew, ok := a.first(&r)
	if !ok {
		a.rep.OutOfRange++
		return
	}
	a.rep.InRange++
	seq := a.seq(&r)
	k := r.Topic + "\x00" + r.Key
	c := a.conv[k]
	if c == nil {
		c = &convState{partition: r.Partition, maxSeq: -1 << 63}
		a.conv[k] = c
	} else if c.partition != r.Partition {
		a.rep.Split++
		a.problem("topic %s key %s on partitions %d and %d", r.Topic, r.Key, c.partition, r.Partition)
		c.partition = r.Partition
	}
	if !isNew {
		a.rep.Duplicates++
		if back := c.maxSeq - seq; back > a.rep.MaxReplay {
			a.rep.MaxReplay = back
		}
		return
	}
	if seq < c.maxSeq {
		a.rep.Reordered++
		a.problem("topic %s key %s: %s %d (event %s) after %d, partition %d offset %d",
			r.Topic, r.Key, a.order, seq, r.EventID, c.maxSeq, r.Partition, r.Offset)
	} else {
		c.maxSeq = seq
	}
}

// AddRow checks that a stored row was published.
func (a *Audit) AddRow(row Row) {
	if row.ID < a.minID || row.ID > a.maxID {
		return
	}
	a.rep.Rows++
	w, m := a.bit(row.ID)
	if a.seen[w]&m == 0 {
		a.rep.Missing++
		a.maxMissing = max(a.maxMissing, row.ID)
		if len(a.rep.MissingIDs) < 20 {
			a.rep.MissingIDs = append(a.rep.MissingIDs, row.ID)
		}
	}
}

// AddRowID checks that a stored row of a string-id table (NewStringAudit)
// was published.
func (a *Audit) AddRowID(id string) {
	a.rep.Rows++
	if _, ok := a.str[id]; !ok {
		a.rep.Missing++
		if len(a.rep.MissingStrIDs) < 20 {
			a.rep.MissingStrIDs = append(a.rep.MissingStrIDs, id)
		}
	}
}

// Clone returns an independent copy, so that rows can be checked against
// the records read so far while more records are still to come.
func (a *Audit) Clone() *Audit {
	b := *a
	b.seen = append([]uint64(nil), a.seen...)
	if a.str != nil {
		b.str = make(map[string]struct{}, len(a.str))
		for k := range a.str {
			b.str[k] = struct{}{}
		}
	}
	b.rep.Problems = append([]string(nil), a.rep.Problems...)
	b.rep.MissingIDs, b.rep.MissingStrIDs = nil, nil
	return &b
}

// Report returns the result. Call it after every record and every row was
// added; published ids without a row count as NotInTable.
func (a *Audit) Report() AuditReport {
	rep := a.rep
	published := 0
	for _, w := range a.seen {
		published += bits.OnesCount64(w)
	}
	published += len(a.str)
	rep.NotInTable = published - (rep.Rows - rep.Missing)
	for i, w := range a.seen {
		if w != 0 {
			rep.OldestPublished = a.minID + uint64(i)*64 + uint64(bits.TrailingZeros64(w))
			break
		}
	}
	rep.BeforeFirst = rep.Missing > 0 && a.str == nil && rep.OldestPublished > 0 && a.maxMissing < rep.OldestPublished
	return rep
}
