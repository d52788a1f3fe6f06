package main

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/segmentio/kafka-go"
)

// metrics are run's Prometheus metrics, served at /metrics on metrics-addr.
// They live as long as the process, across pipeline restarts. The Writer
// reports to them as its sink.Observer.
//
//	cdc_outbox_records_produced_total{topic}   records acknowledged by Kafka (dead letters under their topic)
//	cdc_outbox_records_failed_total{topic}     records whose produce call failed (sent again after the restart)
//	cdc_outbox_produce_seconds{result}         duration of a produce call (a round), ok or error
//	cdc_outbox_acked_commit_timestamp_seconds  commit time of the newest acknowledged transaction (1 s resolution)
//	cdc_outbox_last_ack_timestamp_seconds      when the newest acknowledgement happened
//	cdc_outbox_ack_delay_seconds               commit → acknowledgement of that transaction, at that moment
//	cdc_outbox_pipeline_restarts_total         pipeline restarts after retryable errors
//	cdc_outbox_purged_skips_total              resumes that skipped a purged binlog range (source.on-purged earliest/latest): events lost for the topic
//
// plus the Go runtime and process collectors. Lag: ack_delay_seconds says
// how far behind the publisher was at its last acknowledgement; time() -
// last_ack_timestamp_seconds grows when it stalls (or when the outbox is
// idle: read it together with rate(records_produced_total)).
type metrics struct {
	reg      *prometheus.Registry
	produced *prometheus.CounterVec
	failed   *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	commitTS prometheus.Gauge
	ackTS    prometheus.Gauge
	delay    prometheus.Gauge
	restarts prometheus.Counter
	purged   prometheus.Counter
	purgedN  atomic.Uint64
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cdc_outbox_records_produced_total",
			Help: "Records acknowledged by Kafka (acks=all), by topic; dead letters count under the dead-letter topic."}, []string{"topic"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cdc_outbox_records_failed_total",
			Help: "Records whose produce call failed after the producer's retries, by topic; the pipeline sends them again after its restart."}, []string{"topic"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cdc_outbox_produce_seconds",
			Help:    "Duration of a produce call (one round of records, until acknowledged or given up), by result.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"result"}),
		commitTS: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cdc_outbox_acked_commit_timestamp_seconds",
			Help: "Commit time (binlog event timestamp, 1 s resolution) of the newest transaction acknowledged by Kafka."}),
		ackTS: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cdc_outbox_last_ack_timestamp_seconds",
			Help: "Unix time of the newest acknowledgement of a transaction."}),
		delay: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cdc_outbox_ack_delay_seconds",
			Help: "Commit to acknowledgement of the newest acknowledged transaction (1 s resolution): how far behind the source the publisher was then."}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "cdc_outbox_pipeline_restarts_total",
			Help: "Pipeline restarts from the last acknowledged position after retryable errors (broker, database, network)."}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{Name: "cdc_outbox_purged_skips_total",
			Help: "Resumes that skipped a purged binlog range under source.on-purged earliest or latest: those events are not published."}),
	}
	m.reg.MustRegister(m.produced, m.failed, m.seconds, m.commitTS, m.ackTS, m.delay, m.restarts, m.purged,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Produced implements sink.Observer.
func (m *metrics) Produced(msgs []kafka.Message, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.seconds.WithLabelValues(result).Observe(d.Seconds())
	var werrs kafka.WriteErrors
	partial := errors.As(err, &werrs) && len(werrs) == len(msgs)
	// Count in runs of one topic: a round usually has one.
	var ok, bad int
	flush := func(topic string) {
		if ok > 0 {
			m.produced.WithLabelValues(topic).Add(float64(ok))
		}
		if bad > 0 {
			m.failed.WithLabelValues(topic).Add(float64(bad))
		}
		ok, bad = 0, 0
	}
	for i := range msgs {
		if i > 0 && msgs[i].Topic != msgs[i-1].Topic {
			flush(msgs[i-1].Topic)
		}
		if err == nil || partial && werrs[i] == nil {
			ok++
		} else {
			bad++
		}
	}
	if len(msgs) > 0 {
		flush(msgs[len(msgs)-1].Topic)
	}
}

// Acked implements sink.Observer.
func (m *metrics) Acked(p binlog.Position) {
	now := time.Now()
	m.ackTS.Set(float64(now.UnixNano()) / 1e9)
	if !p.Time.IsZero() {
		m.commitTS.Set(float64(p.Time.Unix()))
		m.delay.Set(max(now.Sub(p.Time).Seconds(), 0))
	}
}

func (m *metrics) Restarted() { m.restarts.Inc() }

// purgedSkip counts a skipped purged range and returns the count so far.
func (m *metrics) PurgedSkip() uint64 {
	m.purged.Inc()
	return m.purgedN.Add(1)
}

// handler serves the metrics in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	return mux
}
