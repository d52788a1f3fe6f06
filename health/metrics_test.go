package health

import (
	"errors"
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
)

func TestMetricsObserver(t *testing.T) {
	m := NewMetrics(BuildInfo{}).Source("default")
	msgs := func(topics ...string) []kafka.Message {
		out := make([]kafka.Message, len(topics))
		for i, tp := range topics {
			out[i] = kafka.Message{Topic: tp}
		}
		return out
	}
	m.Produced(msgs("a", "a", "b", "a"), 3*time.Millisecond, nil)
	m.Produced(msgs("a", "b", "b"), time.Second, kafka.WriteErrors{nil, kafka.NotLeaderForPartition, kafka.NotLeaderForPartition})
	m.Produced(msgs("c"), time.Second, errors.New("dial tcp: refused"))
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"produced a", testutil.ToFloat64(m.produced.WithLabelValues("a", "")), 4},
		{"produced b", testutil.ToFloat64(m.produced.WithLabelValues("b", "")), 1},
		{"failed b", testutil.ToFloat64(m.failed.WithLabelValues("b")), 2},
		{"failed c", testutil.ToFloat64(m.failed.WithLabelValues("c")), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.seconds); n != 2 {
		t.Errorf("produce_seconds has %d series, want ok and error", n)
	}

	commit := time.Now().Add(-3 * time.Second).Truncate(time.Second)
	m.Acked(binlog.Position{File: "mariadb-bin.000001", Pos: 4, Time: commit})
	if got := testutil.ToFloat64(m.commitTS); got != float64(commit.Unix()) {
		t.Errorf("acked commit timestamp %v, want %v", got, commit.Unix())
	}
	if d := testutil.ToFloat64(m.delay); d < 3 || d > 60 {
		t.Errorf("ack delay %v s, want about 3", d)
	}
	m.Restarted()
	m.Requested(3)
	m.Requested(5)
	m.Transacted(true)
	m.Transacted(true)
	m.Transacted(false)
	if n := m.PurgedSkip(); n != 1 {
		t.Errorf("PurgedSkip = %d, want 1", n)
	}

	srv := httptest.NewServer(m.m.Handler())
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`cdc_outbox_records_produced_total{source="default",table="",topic="a"} 4`, `cdc_outbox_pipeline_restarts_total{source="default"} 1`,
		`cdc_outbox_purged_skips_total{source="default"} 1`, `cdc_outbox_produce_seconds_count{result="error",source="default"} 2`,
		`cdc_outbox_produce_request_records_count{source="default"} 2`, `cdc_outbox_produce_request_records_sum{source="default"} 8`,
		`cdc_outbox_kafka_transactions_total{result="committed",source="default"} 2`, `cdc_outbox_kafka_transactions_total{result="aborted",source="default"} 1`, "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Every counter exists at 0 before anything happened, and the gauges that
// are not known yet are NaN rather than a misleading 0.
func TestMetricsFromTheStart(t *testing.T) {
	m := NewMetrics(BuildInfo{Version: "v1.0.0"}).Source("default")
	m.InitTopics("im.events")
	m.SetDeadLetterTopic("im.dlq")
	fams, err := m.m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range fams {
		got[f.GetName()] = true
	}
	for _, name := range []string{"records_produced_total", "records_failed_total", "produce_seconds", "records_dead_lettered_total",
		"poison_records_total", "pipeline_restarts_total", "purged_skips_total", "checkpoint_write_errors_total", "checkpoint_mirror_errors_total",
		"source_connected", "source_caught_up", "seconds_behind_source", "bytes_behind_source", "checkpoint_age_seconds",
		"retention_headroom_bytes", "retention_headroom_seconds", "build_info"} {
		if !got[Prefix+name] {
			t.Errorf("%s%s not exposed from the start", Prefix, name)
		}
	}
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"failed im.events", testutil.ToFloat64(m.failed.WithLabelValues("im.events"))},
		{"produced im.dlq", testutil.ToFloat64(m.produced.WithLabelValues("im.dlq", ""))},
		{"dead-lettered invalid_json", testutil.ToFloat64(m.dead.WithLabelValues(string(sink.ReasonInvalidJSON), ""))},
		{"poison too_large", testutil.ToFloat64(m.poison.WithLabelValues(string(sink.ReasonTooLarge), ""))},
		{"restarts", testutil.ToFloat64(m.restarts)},
		{"checkpoint age", m.CheckpointAge()},
	} {
		if c.v != 0 {
			t.Errorf("%s = %v at start, want 0", c.name, c.v)
		}
	}
	for name, v := range map[string]float64{"seconds behind": m.SecondsBehind(), "bytes behind": testutil.ToFloat64(m.bytesBehind),
		"headroom bytes": testutil.ToFloat64(m.headBytes), "last ack": testutil.ToFloat64(m.ackTS)} {
		if !math.IsNaN(v) {
			t.Errorf("%s = %v before anything was known, want NaN", name, v)
		}
	}
}

func TestDeadLetterCounts(t *testing.T) {
	m := NewMetrics(BuildInfo{}).Source("default")
	m.SetDeadLetterTopic("dlq")
	dl := func(reason sink.Reason) kafka.Message {
		return kafka.Message{Topic: "dlq", Headers: []kafka.Header{{Key: "event_id", Value: []byte("1")}, {Key: sink.HeaderDLQReason, Value: []byte(reason)}}}
	}
	m.Produced([]kafka.Message{{Topic: "t"}, dl(sink.ReasonInvalidJSON), {Topic: "t"}}, time.Millisecond, nil)
	m.Produced([]kafka.Message{dl(sink.ReasonTooLarge)}, time.Millisecond, errors.New("broker down")) // not acknowledged
	m.PoisonStopped(sink.ReasonInvalidTopic)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"dead-lettered invalid_json", testutil.ToFloat64(m.dead.WithLabelValues("invalid_json", "")), 1},
		{"dead-lettered too_large (failed)", testutil.ToFloat64(m.dead.WithLabelValues("too_large", "")), 0},
		{"poison invalid_json", testutil.ToFloat64(m.poison.WithLabelValues("invalid_json", "")), 1},
		{"poison invalid_topic (stopped)", testutil.ToFloat64(m.poison.WithLabelValues("invalid_topic", "")), 1},
		{"produced dlq", testutil.ToFloat64(m.produced.WithLabelValues("dlq", "")), 1},
		{"produced t", testutil.ToFloat64(m.produced.WithLabelValues("t", "")), 2},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestSecondsBehind(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name                string
		caughtUp            bool
		lastCommit, okUntil time.Time
		now                 time.Time
		want                float64
	}{
		{"caught up", true, t0.Add(-time.Hour), time.Time{}, t0, 0},
		{"behind, never caught up", false, t0.Add(-90 * time.Second), time.Time{}, t0, 90},
		{"idle for an hour, then behind for 2 s", false, t0.Add(-time.Hour), t0.Add(-2 * time.Second), t0, 2},
		{"acked past the caught-up moment", false, t0.Add(-time.Second), t0.Add(-5 * time.Second), t0, 1},
		{"nothing known", false, time.Time{}, time.Time{}, t0, math.NaN()},
		{"commit time ahead of the clock", false, t0.Add(time.Second), time.Time{}, t0, 0},
	} {
		got := SecondsBehind(c.caughtUp, c.lastCommit, c.okUntil, time.Time{}, 0, c.now)
		if got != c.want && !(math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// The gauge keeps growing while the publisher is disconnected: it is not
// frozen at the last acknowledgement like ack_delay_seconds.
func TestSecondsBehindGrowsWhileDisconnected(t *testing.T) {
	m := NewMetrics(BuildInfo{}).Source("default")
	clock := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return clock }
	m.SeedCommitTime(clock.Add(-10 * time.Second)) // the checkpoint's event_time
	if got := m.SecondsBehind(); got != 10 {
		t.Errorf("not connected yet: %v, want 10 (from the checkpoint's commit time)", got)
	}
	m.SourceState(true, false)
	m.Acked(binlog.Position{File: "f", Pos: 100, Time: clock.Add(-time.Second)})
	m.SourceState(true, true)
	clock = clock.Add(time.Hour) // idle, caught up
	if got := m.SecondsBehind(); got != 0 {
		t.Errorf("caught up after an idle hour: %v, want 0", got)
	}
	m.SourceState(false, false) // the source goes away
	if testutil.ToFloat64(m.connected) != 0 || testutil.ToFloat64(m.caughtUpG) != 0 {
		t.Errorf("source_connected/caught_up not 0 after a disconnect")
	}
	clock = clock.Add(45 * time.Second)
	if got := m.SecondsBehind(); got != 45 {
		t.Errorf("45 s after the disconnect: %v, want 45", got)
	}
	clock = clock.Add(15 * time.Second)
	if got := m.SecondsBehind(); got != 60 {
		t.Errorf("60 s after the disconnect: %v, want 60", got)
	}
	m.SourceState(true, true)
	if got := m.SecondsBehind(); got != 0 {
		t.Errorf("reconnected and caught up: %v", got)
	}
	m.SourceState(false, true) // connected false implies not caught up
	if testutil.ToFloat64(m.caughtUpG) != 0 {
		t.Errorf("caught_up 1 while disconnected")
	}
}

// A frozen source (issue 30 item 5): caught up at its last heartbeat,
// then silent; the lag counts from when it was last heard, past the stale
// allowance, not from the pipeline restart that follows the read timeout,
// and the heard age grows from the start.
func TestSecondsBehindFrozenSource(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		caughtUp bool
		heard    time.Time
		okUntil  time.Time
		now      time.Time
		want     float64
	}{
		{"caught up, heard 1 s ago", true, t0.Add(-time.Second), time.Time{}, t0, 0},
		{"caught up, silent within stale", true, t0.Add(-3 * time.Second), time.Time{}, t0, 0},
		{"caught up, silent past stale", true, t0.Add(-11 * time.Second), time.Time{}, t0, 11},
		{"disconnected after a freeze", false, t0.Add(-11 * time.Second), t0.Add(-11 * time.Second), t0, 11},
	} {
		got := SecondsBehind(c.caughtUp, t0.Add(-time.Hour), c.okUntil, c.heard, 3*time.Second, c.now)
		if got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	m := NewMetrics(BuildInfo{}).Source("default")
	clock := t0
	m.now = func() time.Time { return clock }
	heard := t0
	m.SetHeard(func() time.Time { return heard }, 3*time.Second)
	m.SourceState(true, true)
	if m.SecondsBehind() != 0 || m.HeardAge() != 0 {
		t.Fatalf("caught up: behind %v, heard age %v", m.SecondsBehind(), m.HeardAge())
	}
	clock = t0.Add(8 * time.Second) // frozen: no heartbeat since t0
	if got := m.SecondsBehind(); got != 8 {
		t.Errorf("frozen for 8 s, still reported caught up: behind %v, want 8", got)
	}
	if got := m.HeardAge(); got != 8 {
		t.Errorf("heard age %v, want 8", got)
	}
	m.SourceState(false, false)                                        // the read timeout restarts the pipeline
	m.SetHeard(func() time.Time { return time.Time{} }, 3*time.Second) // the next reader has heard nothing yet
	clock = t0.Add(20 * time.Second)
	if got := m.SecondsBehind(); got != 20 {
		t.Errorf("after the restart: behind %v, want 20 (from the last heartbeat, not from the restart)", got)
	}
	if got := m.HeardAge(); got != 20 {
		t.Errorf("heard age after the restart %v, want 20", got)
	}
}

func TestCheckpointAge(t *testing.T) {
	m := NewMetrics(BuildInfo{}).Source("default")
	clock := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return clock }
	p1 := binlog.Position{File: "f", Pos: 100}
	p2 := binlog.Position{File: "f", Pos: 200}
	m.Acked(p1)
	clock = clock.Add(700 * time.Millisecond)
	if got := m.CheckpointAge(); got != 0.7 {
		t.Errorf("acked 0.7 s ago, not saved: %v", got)
	}
	m.CheckpointSaved(p1)
	clock = clock.Add(time.Hour)
	if got := m.CheckpointAge(); got != 0 {
		t.Errorf("saved, then idle an hour: %v, want 0", got)
	}
	m.Acked(p2)
	clock = clock.Add(time.Second)
	m.CheckpointFailed()
	clock = clock.Add(29 * time.Second) // Redis down
	if got := m.CheckpointAge(); got != 30 {
		t.Errorf("Redis down 30 s: %v, want 30", got)
	}
	m.CheckpointSaved(p1) // an older position written while p2 was acknowledged
	clock = clock.Add(2 * time.Second)
	if got := m.CheckpointAge(); got != 2 {
		t.Errorf("saved an older position 2 s ago: %v, want 2", got)
	}
	if testutil.ToFloat64(m.cpErrors) != 1 {
		t.Errorf("checkpoint_write_errors_total != 1")
	}
	m.CheckpointMirrorFailed()
	m.CheckpointMirrorFailed()
	if testutil.ToFloat64(m.mirrorErrs) != 2 {
		t.Errorf("checkpoint_mirror_errors_total != 2")
	}
}

func TestRetentionHeadroom(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		expire    time.Duration
		fileStart time.Time
		want      time.Duration
	}{
		{"a day left", 7 * 24 * time.Hour, now.Add(-6 * 24 * time.Hour), 24 * time.Hour},
		{"past due", time.Hour, now.Add(-2 * time.Hour), 0},
		{"no expiry", 0, now.Add(-time.Hour), -1},
	} {
		if got := RetentionHeadroom(c.expire, c.fileStart, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	m := NewMetrics(BuildInfo{}).Source("default")
	m.SetRetentionHeadroom(1<<20, time.Hour)
	if testutil.ToFloat64(m.headBytes) != 1<<20 || testutil.ToFloat64(m.headSeconds) != 3600 {
		t.Errorf("headroom gauges %v %v", testutil.ToFloat64(m.headBytes), testutil.ToFloat64(m.headSeconds))
	}
	m.SetRetentionHeadroom(-1, -1)
	if !math.IsNaN(testutil.ToFloat64(m.headBytes)) || !math.IsNaN(testutil.ToFloat64(m.headSeconds)) {
		t.Errorf("unknown headroom not NaN")
	}
}

// Two sources in one process report to series of their own (the source
// label), the scrape-time gauges included; Forget removes a source's
// series (its lease moved to another instance) and Source starts anew.
func TestMetricsPerSource(t *testing.T) {
	all := NewMetrics(BuildInfo{})
	a, b := all.Source("shard1"), all.Source("shard2")
	if all.Source("shard1") != a {
		t.Fatal("Source returned another Source for the same name")
	}
	clock := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	a.now, b.now = func() time.Time { return clock }, func() time.Time { return clock }
	a.Produced([]kafka.Message{{Topic: "t"}, {Topic: "t"}}, time.Millisecond, nil)
	b.Produced([]kafka.Message{{Topic: "t"}}, time.Millisecond, nil)
	a.SourceState(true, true)
	b.SeedCommitTime(clock.Add(-7 * time.Second))
	b.Restarted()
	gather := func() string {
		var sb strings.Builder
		srv := httptest.NewServer(all.Handler())
		defer srv.Close()
		res, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		sb.Write(body)
		return sb.String()
	}
	body := gather()
	for _, want := range []string{
		`cdc_outbox_records_produced_total{source="shard1",table="",topic="t"} 2`,
		`cdc_outbox_records_produced_total{source="shard2",table="",topic="t"} 1`,
		`cdc_outbox_seconds_behind_source{source="shard1"} 0`,
		`cdc_outbox_seconds_behind_source{source="shard2"} 7`,
		`cdc_outbox_source_connected{source="shard1"} 1`,
		`cdc_outbox_source_connected{source="shard2"} 0`,
		`cdc_outbox_pipeline_restarts_total{source="shard1"} 0`,
		`cdc_outbox_pipeline_restarts_total{source="shard2"} 1`,
		`cdc_outbox_checkpoint_age_seconds{source="shard2"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	b.Forget()
	body = gather()
	if strings.Contains(body, `source="shard2"`) {
		t.Errorf("series of shard2 after Forget:\n%s", body)
	}
	if !strings.Contains(body, `cdc_outbox_records_produced_total{source="shard1",table="",topic="t"} 2`) {
		t.Errorf("Forget of shard2 removed shard1's series")
	}
	if c := all.Source("shard2"); c == b || testutil.ToFloat64(c.restarts) != 0 {
		t.Errorf("Source after Forget is not new")
	}
}

// Records carry their outbox table in WriterData (router.Route): the
// table label tells sharded tables apart; dead letters name theirs in
// dlq_table; records without one count under the first table.
func TestMetricsTableLabel(t *testing.T) {
	m := NewMetrics(BuildInfo{}).Source("default")
	m.SetTables("im.t_00", "im.t_01")
	m.SetDeadLetterTopic("dlq")
	m.InitTopics("im.events")
	t0, t1 := &binlog.Table{Schema: "im", Name: "t_00"}, &binlog.Table{Schema: "im", Name: "t_01"}
	dl := kafka.Message{Topic: "dlq", Headers: []kafka.Header{{Key: sink.HeaderDLQReason, Value: []byte(sink.ReasonUndecodable)}, {Key: sink.HeaderDLQTable, Value: []byte("im.t_01")}}}
	m.Produced([]kafka.Message{{Topic: "im.events", WriterData: t0}, {Topic: "im.events", WriterData: t1}, {Topic: "im.events", WriterData: t1}, dl, {Topic: "im.events"}}, time.Millisecond, nil)
	m.PoisonStopped(sink.ReasonInvalidJSON)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"produced t_00 (and one without a table)", testutil.ToFloat64(m.produced.WithLabelValues("im.events", "im.t_00")), 2},
		{"produced t_01", testutil.ToFloat64(m.produced.WithLabelValues("im.events", "im.t_01")), 2},
		{"dead letter t_01", testutil.ToFloat64(m.dead.WithLabelValues("undecodable", "im.t_01")), 1},
		{"produced dlq t_01", testutil.ToFloat64(m.produced.WithLabelValues("dlq", "im.t_01")), 1},
		{"poison stopped: first table", testutil.ToFloat64(m.poison.WithLabelValues("invalid_json", "im.t_00")), 1},
		{"dead-letter series of t_01 exist at 0", testutil.ToFloat64(m.dead.WithLabelValues("too_large", "im.t_01")), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// The series of before the tables were known are gone; 2 tables x the reasons known in advance.
	if n := testutil.CollectAndCount(m.poison); n != 2*len(poisonReasons) {
		t.Errorf("poison_records_total has %d series, want %d", n, 2*len(poisonReasons))
	}
}
