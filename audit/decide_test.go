package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// The decisions on a record read back from Kafka, behind the duplicate
// results of docs/verify-and-audit.md, "What it counts".
func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		f    recordFacts
		want verdict
	}{
		{"no event id header", recordFacts{}, ignore},
		{"a first delivery", recordFacts{HasID: true}, first},
		{"a replay before its range was audited", recordFacts{HasID: true, Seen: true}, replay},
		{"a duplicate of an audited id", recordFacts{HasID: true, Audited: true, Armed: true}, late},
		{"an audited id before the first audited range (first start)", recordFacts{HasID: true, Audited: true}, ignore},
		{"re-read after a restart, not audited", recordFacts{HasID: true, Reread: true}, rebuild},
		{"re-read after a restart, seen before", recordFacts{HasID: true, Reread: true, Seen: true}, rebuild},
		{"re-read after a restart, audited", recordFacts{HasID: true, Reread: true, Audited: true, Armed: true}, ignore},
	}
	for _, c := range cases {
		if got := classify(c.f); got != c.want {
			t.Errorf("%s: classify(%+v) = %s, want %s", c.name, c.f, got, c.want)
		}
	}
}

func TestCheckKey(t *testing.T) {
	st := keyState{Partition: 1, MaxSeq: 5, Round: 1}
	cases := []struct {
		name                   string
		st                     keyState
		known                  bool
		partition              int
		seq                    int64
		isFirst, ordered       bool
		want                   keyState
		wantSplit, wantReorder bool
	}{
		{"a new key", keyState{}, false, 2, 7, true, true, keyState{Partition: 2, MaxSeq: 7, Round: 3}, false, false},
		{"the next in order", st, true, 1, 6, true, true, keyState{Partition: 1, MaxSeq: 6, Round: 3}, false, false},
		{"an older first delivery", st, true, 1, 4, true, true, keyState{Partition: 1, MaxSeq: 5, Round: 3}, false, true},
		{"an older replayed record", st, true, 1, 4, false, true, keyState{Partition: 1, MaxSeq: 5, Round: 3}, false, false},
		{"no order column", st, true, 1, 0, true, false, keyState{Partition: 1, MaxSeq: 5, Round: 3}, false, false},
		{"another partition", st, true, 0, 6, true, true, keyState{Partition: 0, MaxSeq: 6, Round: 3}, true, false},
		{"a replay on another partition", st, true, 0, 3, false, true, keyState{Partition: 0, MaxSeq: 5, Round: 3}, true, false},
		{"an equal value (no order within one value)", st, true, 1, 5, true, true, keyState{Partition: 1, MaxSeq: 5, Round: 3}, false, false},
	}
	for _, c := range cases {
		got, split, reord := checkKey(c.st, c.known, c.partition, c.seq, c.isFirst, c.ordered, 3)
		if got != c.want || split != c.wantSplit || reord != c.wantReorder {
			t.Errorf("%s: got %+v split=%v reordered=%v, want %+v split=%v reordered=%v", c.name, got, split, reord, c.want, c.wantSplit, c.wantReorder)
		}
	}
}

func TestRowResultAndConfirm(t *testing.T) {
	rows := []struct {
		published, hashed, equal bool
		want                     Result
		suspect                  bool
	}{
		{true, true, true, OK, false},
		{true, false, false, OK, false}, // nothing to compare (not sampled before a restart, an envelope, NULL)
		{true, true, false, Payload, false},
		{false, false, false, "", true},
		{false, true, false, "", true},
	}
	for _, c := range rows {
		got, suspect := rowResult(c.published, c.hashed, c.equal)
		if got != c.want || suspect != c.suspect {
			t.Errorf("rowResult(%v, %v, %v) = %q, %v; want %q, %v", c.published, c.hashed, c.equal, got, suspect, c.want, c.suspect)
		}
	}
	confirms := []struct {
		publishedNow, rowExists bool
		want                    Result
	}{
		{true, true, OK},       // it was in flight
		{true, false, OK},      // in flight, and deleted since
		{false, true, Missing}, // the alert
		{false, false, Unseen}, // deleted or pruned before the audit could tell
	}
	for _, c := range confirms {
		if got := confirm(c.publishedNow, c.rowExists); got != c.want {
			t.Errorf("confirm(%v, %v) = %q, want %q", c.publishedNow, c.rowExists, got, c.want)
		}
	}
}

func TestPassed(t *testing.T) {
	const uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	cases := []struct {
		name     string
		flavor   string
		cp, mark binlog.Position
		want     bool
	}{
		{"same file, after", "mysql", binlog.Position{File: "b.000003", Pos: 900}, binlog.Position{File: "b.000003", Pos: 800}, true},
		{"same file, at", "mysql", binlog.Position{File: "b.000003", Pos: 800}, binlog.Position{File: "b.000003", Pos: 800}, true},
		{"same file, before", "mysql", binlog.Position{File: "b.000003", Pos: 700}, binlog.Position{File: "b.000003", Pos: 800}, false},
		{"a later file", "mysql", binlog.Position{File: "b.000010", Pos: 4}, binlog.Position{File: "b.000009", Pos: 800}, true},
		{"an earlier file", "mysql", binlog.Position{File: "b.000008", Pos: 9000}, binlog.Position{File: "b.000009", Pos: 4}, false},
		{"no file", "mysql", binlog.Position{}, binlog.Position{File: "b.000009", Pos: 4}, false},
		{"MySQL GTID set contains", "mysql", binlog.Position{GTIDSet: uuid + ":1-20"}, binlog.Position{File: "b.000009", GTIDSet: uuid + ":1-15"}, true},
		{"MySQL GTID set short", "mysql", binlog.Position{File: "b.000010", GTIDSet: uuid + ":1-10"}, binlog.Position{File: "b.000009", GTIDSet: uuid + ":1-15"}, false},
		{"MariaDB GTID after", "mariadb", binlog.Position{GTIDSet: "0-1-120"}, binlog.Position{GTIDSet: "0-1-100"}, true},
		{"MariaDB GTID before", "mariadb", binlog.Position{GTIDSet: "0-1-90"}, binlog.Position{GTIDSet: "0-1-100"}, false},
		{"MariaDB a domain missing", "mariadb", binlog.Position{GTIDSet: "0-1-120"}, binlog.Position{GTIDSet: "0-1-100,1-1-5"}, false},
	}
	for _, c := range cases {
		if got := Passed(c.flavor, c.cp, c.mark); got != c.want {
			t.Errorf("%s: Passed(%s, %s) = %v, want %v", c.name, c.cp.Text(), c.mark.Text(), got, c.want)
		}
	}
}

func TestSampled(t *testing.T) {
	n := 0
	for id := uint64(1); id <= 100000; id++ {
		if Sampled(id, 0.1) {
			n++
		}
		if !Sampled(id, 1) {
			t.Fatalf("id %d not in a sample of 1", id)
		}
	}
	if n != 10000 {
		t.Errorf("a sample of 0.1 of 100000 ids took %d, want 10000", n)
	}
}

func TestWindow(t *testing.T) {
	w := window{base: 100}
	for _, id := range []uint64{101, 164, 165, 300} {
		if !w.set(id) {
			t.Fatalf("set(%d) refused", id)
		}
	}
	if w.set(100) || w.set(100+maxWindow+1) {
		t.Error("set accepted an id at the base or too far ahead")
	}
	for id, want := range map[uint64]bool{100: false, 101: true, 102: false, 164: true, 165: true, 300: true, 301: false} {
		if w.has(id) != want {
			t.Errorf("has(%d) = %v, want %v", id, !want, want)
		}
	}
	w.advance(170)
	if w.has(101) || !w.has(300) || !w.has(165) {
		t.Errorf("after advance(170): has(101)=%v has(165)=%v has(300)=%v; want false true true", w.has(101), w.has(165), w.has(300))
	}
	w.advance(10000)
	if w.has(300) || w.base > 10000 {
		t.Errorf("after advance(10000): has(300)=%v base=%d", w.has(300), w.base)
	}
}

func TestFix(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	got := Fix("orders", []uint64{41, 42}, at, at.Add(time.Minute))
	for _, want := range []string{"cdc-outbox replay --source orders --from 2026-05-01T11:59:00Z --to 2026-05-01T12:01:00Z", "dead-letter republish --source orders --event-id 41,42"} {
		if !strings.Contains(got, want) {
			t.Errorf("Fix = %q, want it to contain %q", got, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	d := DefaultConfig()
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := Config{Lag: time.Millisecond, Interval: time.Millisecond, RowsPerSecond: 0, Sample: 1.5, KeyIdle: 0}
	err := bad.Validate()
	for _, want := range []string{"audit.lag", "audit.interval", "audit.rows-per-second", "audit.sample", "audit.key-idle-rounds"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to name %s", err, want)
		}
	}
}
