package main

import (
	"net/http"

	"github.com/cdc-outbox/cdc-outbox/health"
)

// metrics are run's Prometheus metrics, served at /metrics on metrics-addr;
// the metric set and its semantics live in package health (health.Metrics
// lists them). The Writer reports to it as its sink.Observer.
type metrics struct{ *health.Metrics }

func newMetrics() *metrics {
	return &metrics{health.NewMetrics(health.BuildInfo{Version: version})}
}

// handler serves the metrics in the Prometheus text format at /metrics.
func (m *metrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	return mux
}
