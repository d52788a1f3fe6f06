package main

import (
	"github.com/cdc-outbox/cdc-outbox/health"
)

// metrics are run's Prometheus metrics, served at /metrics on metrics-addr;
// the metric set and its semantics live in package health (health.Metrics
// lists them). The Writer reports to it as its sink.Observer.
type metrics struct{ *health.Metrics }

func newMetrics() *metrics {
	return &metrics{health.NewMetrics(health.BuildInfo{Version: version, Commit: commit, Date: date})}
}
