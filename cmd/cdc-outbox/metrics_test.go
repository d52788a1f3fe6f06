package main

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// The metrics themselves are tested in package health; this checks run's
// route and the counters it drives.
func TestMetricsHandler(t *testing.T) {
	m := newMetrics()
	s := m.Source("default")
	s.Restarted()
	if n := s.PurgedSkip(); n != 1 {
		t.Errorf("purgedSkip = %d, want 1", n)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`cdc_outbox_pipeline_restarts_total{source="default"} 1`, `cdc_outbox_purged_skips_total{source="default"} 1`, `cdc_outbox_build_info{commit="",date="",goversion=`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
