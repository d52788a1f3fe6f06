package consumer

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Consumer's Prometheus metrics:
//
//	cdc_consumer_records_total{topic,result}     records by result: handled, late, duplicate, invalid
//	cdc_consumer_replayed_records_total{topic,result} the same, for records with replayed=true
//	cdc_consumer_gaps_total{topic}               seq_no jumps within a conversation (Options.OnGap)
//	cdc_consumer_gap_missing_total{topic}        seq_nos those jumps skipped
//	cdc_consumer_handler_errors_total{topic}     failed handler or store attempts
//	cdc_consumer_committed_offset{topic,partition} the last offset committed (the next one to read)
type Metrics struct {
	records   *prometheus.CounterVec
	replayed  *prometheus.CounterVec
	gaps      *prometheus.CounterVec
	missing   *prometheus.CounterVec
	errors    *prometheus.CounterVec
	committed *prometheus.GaugeVec
}

// NewMetrics returns the metrics registered with reg (not registered when
// reg is nil). Registering twice with one registry panics, as with any
// collector: share one Metrics between Consumers of one process.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cdc_consumer_records_total",
			Help: "Records read, by result: handled, late (handled behind a later seq_no), duplicate (skipped), invalid (skipped)."}, []string{"topic", "result"}),
		replayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cdc_consumer_replayed_records_total",
			Help: "Records with replayed=true, by result."}, []string{"topic", "result"}),
		gaps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cdc_consumer_gaps_total",
			Help: "seq_no jumps within a conversation."}, []string{"topic"}),
		missing: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cdc_consumer_gap_missing_total",
			Help: "seq_nos skipped by the gaps."}, []string{"topic"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cdc_consumer_handler_errors_total",
			Help: "Failed handler or dedupe store attempts (each retried)."}, []string{"topic"}),
		committed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cdc_consumer_committed_offset",
			Help: "The last committed offset (the next to read) per partition."}, []string{"topic", "partition"}),
	}
	if reg != nil {
		reg.MustRegister(m.records, m.replayed, m.gaps, m.missing, m.errors, m.committed)
	}
	return m
}

func (m *Metrics) record(r *Record, topic, result string) {
	m.records.WithLabelValues(topic, result).Inc()
	if r != nil && r.Replayed {
		m.replayed.WithLabelValues(topic, result).Inc()
	}
}

func (m *Metrics) gap(g Gap) {
	m.gaps.WithLabelValues(g.Topic).Inc()
	m.missing.WithLabelValues(g.Topic).Add(float64(g.Missing()))
}

func (m *Metrics) commit(topic string, partition int, offset int64) {
	m.committed.WithLabelValues(topic, strconv.Itoa(partition)).Set(float64(offset))
}
