package main

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
)

func TestMetricsObserver(t *testing.T) {
	m := newMetrics()
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
		{"produced a", testutil.ToFloat64(m.produced.WithLabelValues("a")), 4},
		{"produced b", testutil.ToFloat64(m.produced.WithLabelValues("b")), 1},
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

	srv := httptest.NewServer(m.handler())
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`cdc_outbox_records_produced_total{topic="a"} 4`, "cdc_outbox_pipeline_restarts_total 1",
		`cdc_outbox_produce_seconds_count{result="error"} 2`, "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
