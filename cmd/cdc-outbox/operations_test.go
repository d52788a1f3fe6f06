package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
)

func TestLagBytes(t *testing.T) {
	files := []binlog.LogFile{{Name: "b.000003", Size: 1000}, {Name: "b.000004", Size: 5000}, {Name: "b.000005", Size: 700}, {Name: "b.000006", Size: 300}}
	pos := func(f string, p uint32) binlog.Position { return binlog.Position{File: f, Pos: p} }
	for _, tc := range []struct {
		name      string
		from, end binlog.Position
		want      int64
		files     int
		err       bool
	}{
		{"same file", pos("b.000006", 100), pos("b.000006", 300), 200, 0, false},
		{"caught up", pos("b.000006", 300), pos("b.000006", 300), 0, 0, false},
		{"next file", pos("b.000005", 650), pos("b.000006", 120), 50 + 120, 1, false},
		{"three files", pos("b.000003", 400), pos("b.000006", 120), 600 + 5000 + 700 + 120, 3, false},
		{"purged", pos("b.000001", 4), pos("b.000006", 120), 0, 0, true},
		{"ahead in file", pos("b.000006", 400), pos("b.000006", 300), 0, 0, true},
		{"ahead by file", pos("b.000006", 4), pos("b.000005", 300), 0, 0, true},
	} {
		n, nf, err := lagBytes(files, tc.from, tc.end)
		if (err != nil) != tc.err || n != tc.want || nf != tc.files {
			t.Errorf("%s: got %d bytes, %d files, %v; want %d, %d, err %v", tc.name, n, nf, err, tc.want, tc.files, tc.err)
		}
		if err != nil && !errors.Is(err, binlog.ErrPositionUnavailable) {
			t.Errorf("%s: error %v does not match ErrPositionUnavailable", tc.name, err)
		}
	}
	_, _, err := lagBytes(files, pos("b.000001", 4), pos("b.000006", 1))
	if err == nil || !strings.Contains(err.Error(), "oldest available is b.000003:4") {
		t.Errorf("purged: error should name the oldest file: %v", err)
	}
}

func TestLagSeconds(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 900e6, time.UTC)
	if s := lagSeconds(0, now.Add(-time.Hour), now); s == nil || *s != 0 {
		t.Errorf("caught up: %v, want 0", s)
	}
	if s := lagSeconds(10, time.Time{}, now); s != nil {
		t.Errorf("unknown event time: %v, want nil", *s)
	}
	if s := lagSeconds(10, now.Add(-12*time.Second-800*time.Millisecond), now); s == nil || *s != 12 {
		t.Errorf("behind: %v, want 12 (whole seconds)", s)
	}
	if s := lagSeconds(10, now.Add(time.Minute), now); s == nil || *s != 0 {
		t.Errorf("clock skew: %v, want 0", s)
	}
}

func TestPartitionChanges(t *testing.T) {
	if c := partitionChanges(nil, map[string]int{"a": 3}); len(c) != 0 {
		t.Errorf("no stored counts (old checkpoint): %v", c)
	}
	c := partitionChanges(map[string]int{"a": 3, "b": 6, "gone": 2}, map[string]int{"a": 3, "b": 8, "new": 1})
	if len(c) != 1 || c[0] != (partitionChange{Topic: "b", Stored: 6, Now: 8}) {
		t.Fatalf("changes: %v", c)
	}
	err := partitionChangeError("k", c)
	if !errors.Is(err, ErrPartitionsChanged) || !strings.Contains(err.Error(), "b: 6 → 8 partitions") ||
		!strings.Contains(err.Error(), "--accept-partition-change") || !strings.Contains(err.Error(), "checkpoint set") {
		t.Errorf("error: %v", err)
	}
}

func TestLeastAdvanced(t *testing.T) {
	pos, part := leastAdvanced(map[int]string{0: "b.000005:900", 1: "b.000004:7000", 2: "garbage", 3: "b.000004:6000"})
	if pos != "b.000004:6000" || part != 3 {
		t.Errorf("got %s on %d", pos, part)
	}
	if pos, part := leastAdvanced(map[int]string{}); pos != "" || part != -1 {
		t.Errorf("empty: %s %d", pos, part)
	}
}

func TestStatusOutput(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cp := &checkpoint.Checkpoint{File: "b.000005", Pos: 650, GTIDSet: "0-1-10", GTID: "0-1-10", ServerID: 1, Flavor: "mariadb",
		EventTime: now.Add(-30 * time.Second), UpdatedAt: now.Add(-2 * time.Second), Partitions: map[string]int{"im.events": 8}}
	st := status{Key: "k", End: binlog.Position{File: "b.000006", Pos: 120, GTIDSet: "0-1-12"}, now: now}
	st.compute(cp, []binlog.LogFile{{Name: "b.000005", Size: 700}, {Name: "b.000006", Size: 120}})
	var b bytes.Buffer
	st.write(&b)
	want := `checkpoint   k
  position    b.000005:650
  gtid set    0-1-10
  last gtid   0-1-10
  server      mariadb, server_id 1
  event time  2025-01-02T03:03:35Z (30s ago; commit time of the last checkpointed transaction, 1 s resolution)
  updated at  2025-01-02T03:04:03.000Z (2s ago)
  partitions  im.events=8
binlog end   b.000006:120
  gtid set   0-1-12
lag bytes    170 (across 2 binlog files)
lag seconds  30 (now - last checkpointed commit time; 1 s resolution)
last event   2025-01-02T03:03:35Z
`
	if b.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", b.String(), want)
	}
	if st.Problem != "" {
		t.Errorf("problem: %s", st.Problem)
	}
	none := status{Key: "k", End: st.End, now: now}
	none.compute(nil, nil)
	if none.Problem == "" || none.LagBytes != nil {
		t.Errorf("no checkpoint: %+v", none)
	}
}

func TestCheckReport(t *testing.T) {
	var b bytes.Buffer
	r := &checkReport{w: &b}
	r.ok("redis", "up")
	r.fail("topic", "t does not exist: create it")
	r.summary()
	want := "OK    redis        up\nFAIL  topic        t does not exist: create it\nresult: FAILED (1 of 2 checks failed)\n"
	if b.String() != want || r.failed != 1 {
		t.Errorf("got:\n%s", b.String())
	}
	if errs := split(errors.Join(errors.New("a"), errors.New("b"))); len(errs) != 2 {
		t.Errorf("split: %v", errs)
	}
}
