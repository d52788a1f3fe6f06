package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/health"
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

func TestStatusOutput(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cp := &checkpoint.Checkpoint{File: "b.000005", Pos: 650, GTIDSet: "0-1-10", GTID: "0-1-10", ServerID: 1, Flavor: "mariadb",
		EventTime: now.Add(-30 * time.Second), UpdatedAt: now.Add(-2 * time.Second), Partitions: map[string]int{"im.events": 8}}
	st := Status{Key: "k", End: binlog.Position{File: "b.000006", Pos: 120, GTIDSet: "0-1-12"}, now: now}
	st.compute(cp, []binlog.LogFile{{Name: "b.000005", Size: 700}, {Name: "b.000006", Size: 120}})
	var b bytes.Buffer
	st.Write(&b)
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
	// A publisher stopped on a fatal error since: the stop record's line,
	// under the checkpoint's key.
	stopped := Status{Key: "k", End: st.End, now: now, Stop: &checkpoint.Stop{At: now.Add(-3 * time.Minute), Instance: "pod-1",
		Reason: "topic im.events does not exist: create it (kafka-topics.sh --create), or set kafka.missing-topic: create"}}
	b.Reset()
	stopped.Write(&b)
	if line := "  stopped     2025-01-02T03:01:05Z (3m0s ago) on pod-1, not started since: topic im.events does not exist: create it (kafka-topics.sh --create), or set kafka.missing-topic: create\n"; !strings.HasPrefix(b.String(), "checkpoint   k\n"+line) {
		t.Errorf("output:\n%s\nwant it to begin with the stop line:\n%s", b.String(), line)
	}
	none := Status{Key: "k", End: st.End, now: now}
	none.compute(nil, nil)
	if none.Problem == "" || none.LagBytes != nil {
		t.Errorf("no checkpoint: %+v", none)
	}
}

func TestStatusRetention(t *testing.T) {
	files := []binlog.LogFile{{Name: "mariadb-bin.000004", Size: 1000}, {Name: "mariadb-bin.000005", Size: 2000}}
	ret := binlog.Retention{ExpireSeconds: 604800, ExpireDays: 7}
	for _, c := range []struct {
		cp      *checkpoint.Checkpoint
		want    string
		warning bool
	}{
		{&checkpoint.Checkpoint{File: "mariadb-bin.000005", Pos: 500}, "1500 bytes, 1 files before", false},
		{&checkpoint.Checkpoint{File: "mariadb-bin.000004", Pos: 300}, "300 bytes, 0 files before", true},
		{&checkpoint.Checkpoint{GTIDSet: "0-1-5"}, "headroom   (unknown)", false},
		{nil, "headroom   (unknown)", false},
	} {
		st := Status{Key: "k", Checkpoint: c.cp}
		st.computeRetention(files, ret)
		var b bytes.Buffer
		st.writeRetention(&b)
		out := b.String()
		if !strings.Contains(out, c.want) || !strings.Contains(out, "oldest binlog mariadb-bin.000004 (2 files") ||
			!strings.Contains(out, "binlog_expire_logs_seconds 604800, expire_logs_days 7") || strings.Contains(out, "WARNING") != c.warning {
			t.Errorf("checkpoint %+v:\n%s", c.cp, out)
		}
	}
	st := Status{}
	st.computeRetention(files, binlog.Retention{ExpireSeconds: -1, ExpireDays: -1})
	if st.Retention.ExpireSeconds != nil || st.Retention.ExpireDays != nil {
		t.Error("missing variables reported")
	}
}

// Several sources print under their names (an unreadable one with its
// error) and as a JSON array; one prints as before, as an object.
func TestStatuses(t *testing.T) {
	n := int64(5)
	a := Status{Source: "shard1", Key: "cp:1", LagBytes: &n, ha: true}
	b := Status{Source: "shard2", Key: "cp:2", Error: "dial tcp: refused"}
	var buf bytes.Buffer
	Statuses{a, b}.Write(&buf)
	out := buf.String()
	for _, want := range []string{"source shard1\ncheckpoint   cp:1\n", "  lease       free: no instance publishes the source now", "lag bytes    5", "source shard2\nERROR        dial tcp: refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	Statuses{a}.Write(&buf)
	if strings.Contains(buf.String(), "source shard1") {
		t.Errorf("one source printed under its name:\n%s", buf.String())
	}
	if _, ok := (Statuses{a}).JSON().(Status); !ok {
		t.Errorf("JSON of one source is not an object")
	}
	if v, ok := (Statuses{a, b}).JSON().([]Status); !ok || len(v) != 2 {
		t.Errorf("JSON of two sources is not an array of them")
	}
	a.Problem = "no checkpoint"
	if p := (Statuses{b, a}).Problem(); p != "source shard1: no checkpoint" {
		t.Errorf("Problem = %q", p)
	}
}

// run's /status gives each source's state on the instance beside its
// status; with several sources one that cannot be read is served with its
// Error and state (issue 30 items 5 and 11: a stopped source shows in
// /status), with one its error is the endpoint's.
func TestServed(t *testing.T) {
	states := map[string]health.Readiness{
		"s0": {Ready: true, State: health.Streaming},
		"s1": {State: health.Failed, Reason: "table im.x does not exist"},
	}
	of := func(name string) health.Readiness { return states[name] }
	readErr := errors.New("source s1: dial tcp: refused")
	v, err := Served(Statuses{{Source: "s0", Key: "cp:0"}, {Source: "s1", Key: "cp:1", Error: "dial tcp: refused"}}, readErr, of)
	sts, ok := v.([]Status)
	if err != nil || !ok || len(sts) != 2 {
		t.Fatalf("two sources: %#v, %v; want both served, no error", v, err)
	}
	for _, st := range sts {
		if st.Health == nil || st.Health.State != states[st.Source].State || st.Health.Reason != states[st.Source].Reason {
			t.Errorf("source %s: health %+v, want %+v", st.Source, st.Health, states[st.Source])
		}
	}
	b, _ := json.Marshal(sts[1])
	if !strings.Contains(string(b), `"health":{"ready":false,"state":"failed","reason":"table im.x does not exist"`) {
		t.Errorf("JSON of the failed source: %s", b)
	}
	v, err = Served(Statuses{{Source: "default", Key: "cp"}}, nil, func(string) health.Readiness { return health.Readiness{State: health.Standby} })
	if st, ok := v.(Status); err != nil || !ok || st.Health == nil || st.Health.State != health.Standby {
		t.Errorf("one source: %#v, %v", v, err)
	}
	if _, err := Served(Statuses{{Source: "default"}}, readErr, of); !errors.Is(err, readErr) {
		t.Errorf("one source that cannot be read: error %v, want %v", err, readErr)
	}
	if v, err := Served(nil, readErr, of); v != nil || !errors.Is(err, readErr) {
		t.Errorf("no statuses: %v, %v", v, err)
	}
}
