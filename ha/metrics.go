package ha

import (
	"github.com/cdc-outbox/cdc-outbox/health"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the lease metrics, registered when Options.Registerer is set:
//
//	cdc_outbox_standby{source}                 1 while this instance waits for the source's lease, 0 while it publishes it
//	cdc_outbox_lease_token{source}             fencing token of this instance's current or last term of the source
//	cdc_outbox_lease_acquired_total{source}    ownership terms begun (takeovers and hand-overs included)
//	cdc_outbox_lease_lost_total{source}        terms that ended by losing the lease (not renewed in time, or taken over)
//	cdc_outbox_instances_alive                 instances alive in the group (ha.group), this one included
type Metrics struct {
	standby  *prometheus.GaugeVec
	token    *prometheus.GaugeVec
	acquired *prometheus.CounterVec
	lost     *prometheus.CounterVec
	alive    prometheus.Gauge
}

// NewMetrics returns the metrics, registered on r when r is not nil.
func NewMetrics(r prometheus.Registerer) *Metrics {
	p := health.Prefix
	m := &Metrics{
		standby: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "standby",
			Help: "1 while this instance waits for the source's lease (standby), 0 while it holds it and publishes."}, []string{"source"}),
		token: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "lease_token",
			Help: "Fencing token of this instance's current (or last) ownership term of the source."}, []string{"source"}),
		acquired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "lease_acquired_total",
			Help: "Ownership terms of the source this instance began."}, []string{"source"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "lease_lost_total",
			Help: "Ownership terms that ended by losing the lease (not renewed in time, or taken over)."}, []string{"source"}),
		alive: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "instances_alive",
			Help: "Instances alive in the group (ha.group), this one included."}),
	}
	if r != nil {
		r.MustRegister(m.standby, m.token, m.acquired, m.lost, m.alive)
	}
	return m
}

// Init creates the series of source at their starting values (standby 1,
// the counters 0) when the source enters the instance, before any term:
// a counter that first appears at 1 gives Prometheus's increase() nothing
// to see, so the first lease lost would raise no CdcOutboxLeaseLost.
func (m *Metrics) Init(source string) {
	m.standby.WithLabelValues(source).Set(1)
	m.acquired.WithLabelValues(source).Add(0)
	m.lost.WithLabelValues(source).Add(0)
}
