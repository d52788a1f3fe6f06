package health

import (
	"errors"
	"math"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/segmentio/kafka-go"
)

// Prefix begins every metric name of the publisher.
const Prefix = "cdc_outbox_"

// BuildInfo labels cdc_outbox_build_info.
type BuildInfo struct {
	Version, Commit, Date string
}

// Metrics are the publisher's Prometheus metrics, one registry per
// process, living across pipeline restarts. It implements sink.Observer.
// Every series without a label, and every labelled series whose label
// values are known in advance (result, reason; the table label "" until
// SetTables named the tables), exists from the start,
// at 0 for counters; per-topic series exist once InitTopics named the
// topic (or the first record for it was produced). Gauges that are not
// known yet are NaN, never a made-up 0.
//
// Publishing (reported by the sink's Writer as its Observer):
//
//	cdc_outbox_records_produced_total{topic,table} records acknowledged by Kafka (acks=all), by topic and outbox table (schema.table); dead letters under the dead-letter topic
//	cdc_outbox_records_failed_total{topic}         records whose produce call failed after the producer's retries (sent again after the pipeline restarts)
//	cdc_outbox_produce_seconds{result}             histogram: one produce call (a round) until acknowledged or given up; result ok or error
//	cdc_outbox_acked_commit_timestamp_seconds      commit time of the newest acknowledged transaction (1 s resolution)
//	cdc_outbox_last_ack_timestamp_seconds          when the newest acknowledgement happened
//	cdc_outbox_ack_delay_seconds                   commit → acknowledgement of that transaction, at that moment (frozen between acknowledgements)
//	cdc_outbox_records_dead_lettered_total{reason,table} dead-letter records acknowledged (kafka.on-poison: dead-letter), by sink.Reason and outbox table
//	cdc_outbox_poison_records_total{reason,table}        poison records found, either policy (dead-lettered, or the one that stopped the publisher)
//
// The table label is the row's outbox table, "schema.table" (one series
// per table a pattern matches: sharded tables are visible one by one); the
// poison record that stops the publisher counts under the first table.
//
// Pipeline and source (reported by run):
//
//	cdc_outbox_pipeline_restarts_total             pipeline restarts after retryable errors
//	cdc_outbox_purged_skips_total                  resumes that skipped a purged binlog range (source.on-purged earliest/latest)
//	cdc_outbox_source_connected                    1 while the replication connection is up, else 0
//	cdc_outbox_source_caught_up                    1 while the reader is at the end of the binlog and everything read is acknowledged
//	cdc_outbox_seconds_behind_source               computed at scrape: 0 when caught up; else now − the later of the newest acknowledged commit time and the moment it was last caught up
//	cdc_outbox_bytes_behind_source                 binlog bytes from the newest acknowledged position to the end of the binlog (NaN until measured)
//	cdc_outbox_checkpoint_age_seconds              computed at scrape: how long acknowledged progress has waited to be written to the checkpoint; 0 when the checkpoint is up to date
//	cdc_outbox_checkpoint_saved_timestamp_seconds  when the checkpoint was last written
//	cdc_outbox_checkpoint_write_errors_total       failed checkpoint writes (retried at the next interval)
//	cdc_outbox_retention_headroom_bytes            binlog bytes from the start of the oldest binlog the server keeps to the checkpoint (NaN until measured)
//	cdc_outbox_retention_headroom_seconds          time until the server's binlog expiry may purge the checkpoint's file (NaN until measured or without expiry)
//	cdc_outbox_build_info{version,commit,date,goversion}  1
//
// plus the Go runtime (go_*) and process (process_*) collectors.
type Metrics struct {
	reg      *prometheus.Registry
	now      func() time.Time
	produced *prometheus.CounterVec
	failed   *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	commitTS prometheus.Gauge
	ackTS    prometheus.Gauge
	delay    prometheus.Gauge
	dead     *prometheus.CounterVec
	poison   *prometheus.CounterVec
	restarts prometheus.Counter
	purged   prometheus.Counter
	purgedN  atomic.Uint64

	connected   prometheus.Gauge
	caughtUpG   prometheus.Gauge
	bytesBehind prometheus.Gauge
	cpSavedTS   prometheus.Gauge
	cpErrors    prometheus.Counter
	headBytes   prometheus.Gauge
	headSeconds prometheus.Gauge

	// deadLetterTopic is the topic whose records count as dead letters.
	deadLetterTopic atomic.Pointer[string]
	// tables are the outbox tables known at start (SetTables); the first
	// labels records without a table (the single im table).
	tables atomic.Pointer[[]string]

	mu sync.Mutex
	// source facts for seconds_behind_source
	isConnected, isCaughtUp bool
	lastCommit              time.Time // newest acknowledged commit time
	okUntil                 time.Time // when it was last connected and caught up
	// checkpoint facts for checkpoint_age_seconds
	lastAcked    binlog.Position
	pending      bool
	pendingSince time.Time
}

// poisonReasons are the values of the reason label known in advance.
var poisonReasons = []sink.Reason{sink.ReasonInvalidJSON, sink.ReasonTooLarge, sink.ReasonBrokerTooLarge, sink.ReasonInvalidTopic, sink.ReasonUndecodable}

// NewMetrics returns the metrics registered on a new registry.
func NewMetrics(b BuildInfo) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		now: time.Now,
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "records_produced_total",
			Help: "Records acknowledged by Kafka (acks=all), by topic and outbox table (schema.table); dead letters count under the dead-letter topic."}, []string{"topic", "table"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "records_failed_total",
			Help: "Records whose produce call failed after the producer's retries, by topic; the pipeline sends them again after its restart."}, []string{"topic"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: Prefix + "produce_seconds",
			Help:    "Duration of a produce call (one round of records, until acknowledged or given up), by result.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"result"}),
		commitTS: prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + "acked_commit_timestamp_seconds",
			Help: "Commit time (binlog event timestamp, 1 s resolution) of the newest transaction acknowledged by Kafka; NaN until the first."}),
		ackTS: prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + "last_ack_timestamp_seconds",
			Help: "Unix time of the newest acknowledgement of a transaction; NaN until the first."}),
		delay: prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + "ack_delay_seconds",
			Help: "Commit to acknowledgement of the newest acknowledged transaction (1 s resolution), at that moment; it does not move between acknowledgements (use seconds_behind_source for lag)."}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "records_dead_lettered_total",
			Help: "Dead-letter records acknowledged by Kafka (kafka.on-poison: dead-letter), by poison reason (the dlq_reason header) and outbox table."}, []string{"reason", "table"}),
		poison: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "poison_records_total",
			Help: "Poison records found, by reason and outbox table: dead-lettered ones, and the one that stopped the publisher under kafka.on-poison: fail."}, []string{"reason", "table"}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: Prefix + "pipeline_restarts_total",
			Help: "Pipeline restarts from the last acknowledged position after retryable errors (broker, database, network)."}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{Name: Prefix + "purged_skips_total",
			Help: "Resumes that skipped a purged binlog range under source.on-purged earliest or latest: those events are not published."}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + "source_connected",
			Help: "1 while the replication connection to the source is up, 0 otherwise."}),
		caughtUpG: prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + "source_caught_up",
			Help: "1 while the reader is at the end of the source's binlog and everything it read is acknowledged, 0 otherwise."}),
		bytesBehind: prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + "bytes_behind_source",
			Help: "Binlog bytes from the newest acknowledged position to the source's end of the binlog (every event, not only the outbox's: an upper bound of the work left); NaN until measured."}),
		cpSavedTS: prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + "checkpoint_saved_timestamp_seconds",
			Help: "Unix time of the last successful checkpoint write; NaN until the first."}),
		cpErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: Prefix + "checkpoint_write_errors_total",
			Help: "Checkpoint writes to Redis that failed (retried at the next checkpoint.interval; publishing goes on)."}),
		headBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + "retention_headroom_bytes",
			Help: "Binlog bytes from the start of the oldest binlog the source keeps to the checkpoint: what purging may remove before the checkpoint's file goes; NaN until measured."}),
		headSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Name: Prefix + "retention_headroom_seconds",
			Help: "Seconds until the source's binlog expiry (binlog_expire_logs_seconds / expire_logs_days) may purge the checkpoint's binlog file; NaN until measured or when the server does not expire binlogs."}),
	}
	for _, g := range []prometheus.Gauge{m.commitTS, m.ackTS, m.delay, m.bytesBehind, m.cpSavedTS, m.headBytes, m.headSeconds} {
		g.Set(math.NaN())
	}
	for _, r := range []string{"ok", "error"} {
		m.seconds.WithLabelValues(r)
	}
	m.SetTables() // the table label "" until the tables are known
	behind := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: Prefix + "seconds_behind_source",
		Help: "Seconds the publisher is behind the source, computed at scrape time: 0 while caught up (at the end of the binlog, everything read acknowledged); otherwise now minus the later of the newest acknowledged commit time and the last moment it was caught up, so it keeps growing while the publisher is behind, stalled or disconnected (1 s resolution). NaN while neither is known."},
		m.SecondsBehind)
	cpAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: Prefix + "checkpoint_age_seconds",
		Help: "Seconds that acknowledged progress has waited to be written to the checkpoint, computed at scrape time; 0 when the stored checkpoint is the newest acknowledged position (an idle publisher's checkpoint is not old)."},
		m.CheckpointAge)
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "build_info",
		Help: "1, labelled with the binary's version, commit, build date and Go version."}, []string{"version", "commit", "date", "goversion"})
	info.WithLabelValues(b.Version, b.Commit, b.Date, runtime.Version()).Set(1)
	m.reg.MustRegister(m.produced, m.failed, m.seconds, m.commitTS, m.ackTS, m.delay, m.dead, m.poison,
		m.restarts, m.purged, m.connected, m.caughtUpG, behind, m.bytesBehind, cpAge, m.cpSavedTS, m.cpErrors,
		m.headBytes, m.headSeconds, info,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry the metrics are on (to add more, or gather in tests).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format (for /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// SetTables names the outbox tables known at start ("schema.table"; the
// tables a pattern matches then): the series of each poison reason, and
// of each topic InitTopics names, exist at 0 for each. The first labels
// the records of the single im table (which carry no table). Call it
// before InitTopics.
func (m *Metrics) SetTables(tables ...string) {
	if len(tables) == 0 {
		tables = []string{""}
	}
	tables = append([]string(nil), tables...)
	if old := m.tables.Load(); old != nil && len(*old) == 1 && (*old)[0] == "" && tables[0] != "" {
		for _, r := range poisonReasons { // the series of before the tables were known
			m.dead.DeleteLabelValues(string(r), "")
			m.poison.DeleteLabelValues(string(r), "")
		}
	}
	m.tables.Store(&tables)
	for _, t := range tables {
		for _, r := range poisonReasons {
			m.dead.WithLabelValues(string(r), t)
			m.poison.WithLabelValues(string(r), t)
		}
	}
}

// defaultTable labels the records without a table.
func (m *Metrics) defaultTable() string { return (*m.tables.Load())[0] }

// outboxTable is what the router leaves in a record's WriterData: the
// row's *binlog.Table (or an explicit partition naming it).
type outboxTable interface{ OutboxTable() string }

// tableOf returns a record's outbox table: its WriterData's, a dead
// letter's dlq_table header, else the default.
func (m *Metrics) tableOf(msg *kafka.Message, dead bool) string {
	if t, ok := msg.WriterData.(outboxTable); ok {
		return t.OutboxTable()
	}
	if dead {
		for _, h := range msg.Headers {
			if h.Key == sink.HeaderDLQTable {
				return string(h.Value)
			}
		}
	}
	return m.defaultTable()
}

// InitTopics creates the per-topic series of topics at 0, for each table
// of SetTables (the fixed topics and the dead-letter topic at start; a
// template's topics as they are first written).
func (m *Metrics) InitTopics(topics ...string) {
	for _, t := range topics {
		for _, tb := range *m.tables.Load() {
			m.produced.WithLabelValues(t, tb)
		}
		m.failed.WithLabelValues(t)
	}
}

// SetDeadLetterTopic names the dead-letter topic (kafka.dead-letter-topic
// under kafka.on-poison: dead-letter): its acknowledged records count in
// records_dead_lettered_total and poison_records_total by their
// dlq_reason header. Empty: none.
func (m *Metrics) SetDeadLetterTopic(topic string) {
	m.deadLetterTopic.Store(&topic)
	if topic != "" {
		m.InitTopics(topic)
	}
}

// Produced implements sink.Observer.
func (m *Metrics) Produced(msgs []kafka.Message, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.seconds.WithLabelValues(result).Observe(d.Seconds())
	var werrs kafka.WriteErrors
	partial := errors.As(err, &werrs) && len(werrs) == len(msgs)
	dlq := ""
	if p := m.deadLetterTopic.Load(); p != nil {
		dlq = *p
	}
	// Count in runs of one topic and table: a round usually has one.
	var ok, bad int
	var table string
	flush := func(topic string) {
		if ok > 0 {
			m.produced.WithLabelValues(topic, table).Add(float64(ok))
		}
		if bad > 0 {
			m.failed.WithLabelValues(topic).Add(float64(bad))
		}
		ok, bad = 0, 0
	}
	for i := range msgs {
		dead := dlq != "" && msgs[i].Topic == dlq
		tb := m.tableOf(&msgs[i], dead)
		if i > 0 && (msgs[i].Topic != msgs[i-1].Topic || tb != table) {
			flush(msgs[i-1].Topic)
		}
		table = tb
		if err == nil || partial && werrs[i] == nil {
			ok++
			if dead {
				m.deadLettered(&msgs[i], tb)
			}
		} else {
			bad++
		}
	}
	if len(msgs) > 0 {
		flush(msgs[len(msgs)-1].Topic)
	}
}

func (m *Metrics) deadLettered(msg *kafka.Message, table string) {
	reason := "unknown"
	for _, h := range msg.Headers {
		if h.Key == sink.HeaderDLQReason {
			reason = string(h.Value)
			break
		}
	}
	m.dead.WithLabelValues(reason, table).Inc()
	m.poison.WithLabelValues(reason, table).Inc()
}

// PoisonStopped counts the poison record that stopped the publisher under
// kafka.on-poison: fail (a *sink.PoisonError's Reason), under the first
// table of SetTables.
func (m *Metrics) PoisonStopped(reason sink.Reason) {
	m.poison.WithLabelValues(string(reason), m.defaultTable()).Inc()
}

// Acked implements sink.Observer: p is the end of an acknowledged run of
// transactions, p.Time the commit time of its last one.
func (m *Metrics) Acked(p binlog.Position) {
	now := m.now()
	m.ackTS.Set(float64(now.UnixNano()) / 1e9)
	m.mu.Lock()
	if !p.Time.IsZero() {
		m.commitTS.Set(float64(p.Time.Unix()))
		m.delay.Set(max(now.Sub(p.Time).Seconds(), 0))
		if p.Time.After(m.lastCommit) {
			m.lastCommit = p.Time
		}
	}
	if p != m.lastAcked {
		m.lastAcked = p
		if !m.pending {
			m.pending, m.pendingSince = true, now
		}
	}
	m.mu.Unlock()
}

// Restarted counts a pipeline restart.
func (m *Metrics) Restarted() { m.restarts.Inc() }

// PurgedSkip counts a skipped purged range and returns the count so far.
func (m *Metrics) PurgedSkip() uint64 {
	m.purged.Inc()
	return m.purgedN.Add(1)
}

// SourceState reports the reader's connection and whether it is caught
// up: at the end of the binlog (e.g. on a heartbeat, or when the position
// read equals SHOW BINARY LOG STATUS) with everything it read
// acknowledged. Call it on every change; connected false implies not
// caught up.
func (m *Metrics) SourceState(connected, caughtUp bool) {
	caughtUp = caughtUp && connected
	now := m.now()
	m.mu.Lock()
	if m.isConnected && m.isCaughtUp && !caughtUp {
		m.okUntil = now
	}
	m.isConnected, m.isCaughtUp = connected, caughtUp
	m.mu.Unlock()
	m.connected.Set(b2f(connected))
	m.caughtUpG.Set(b2f(caughtUp))
}

// SeedCommitTime gives the commit time known before anything is
// acknowledged (the checkpoint's event_time at start), so that a
// publisher that cannot connect at all shows its lag growing from there.
func (m *Metrics) SeedCommitTime(t time.Time) {
	m.mu.Lock()
	if t.After(m.lastCommit) {
		m.lastCommit = t
	}
	m.mu.Unlock()
}

// SecondsBehind is the value of cdc_outbox_seconds_behind_source now.
func (m *Metrics) SecondsBehind() float64 {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	return SecondsBehind(m.isConnected && m.isCaughtUp, m.lastCommit, m.okUntil, now)
}

// SecondsBehind decides the lag: 0 when caught up; otherwise the seconds
// from the later of lastCommit (the newest acknowledged commit time) and
// okUntil (when it was last caught up) to now, never negative; NaN when
// both are zero (nothing known).
func SecondsBehind(caughtUp bool, lastCommit, okUntil, now time.Time) float64 {
	if caughtUp {
		return 0
	}
	base := lastCommit
	if okUntil.After(base) {
		base = okUntil
	}
	if base.IsZero() {
		return math.NaN()
	}
	return max(now.Sub(base).Seconds(), 0)
}

// SetBytesBehind reports the binlog bytes from the newest acknowledged
// position to the end of the binlog (binlog.Headroom-style arithmetic over
// SHOW BINARY LOGS); n < 0: unknown (NaN).
func (m *Metrics) SetBytesBehind(n int64) { m.bytesBehind.Set(intOrNaN(n)) }

// CheckpointSaved reports a successful checkpoint write of p.
func (m *Metrics) CheckpointSaved(p binlog.Position) {
	now := m.now()
	m.cpSavedTS.Set(float64(now.UnixNano()) / 1e9)
	m.mu.Lock()
	if p == m.lastAcked {
		m.pending = false
	} else {
		// Acknowledged while it was written: waiting since at least now.
		m.pending, m.pendingSince = true, now
	}
	m.mu.Unlock()
}

// CheckpointFailed counts a failed checkpoint write.
func (m *Metrics) CheckpointFailed() { m.cpErrors.Inc() }

// CheckpointAge is the value of cdc_outbox_checkpoint_age_seconds now.
func (m *Metrics) CheckpointAge() float64 {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.pending {
		return 0
	}
	return max(now.Sub(m.pendingSince).Seconds(), 0)
}

// SetRetentionHeadroom reports the checkpoint's distance from the purge:
// bytes from the start of the oldest binlog kept to the checkpoint (< 0:
// unknown), and the time until the server's expiry may purge the
// checkpoint's file (< 0: unknown or no expiry).
func (m *Metrics) SetRetentionHeadroom(bytes int64, d time.Duration) {
	m.headBytes.Set(intOrNaN(bytes))
	if d < 0 {
		m.headSeconds.Set(math.NaN())
	} else {
		m.headSeconds.Set(d.Seconds())
	}
}

// RetentionHeadroom decides the seconds headroom: expire (the server's
// binlog_expire_logs_seconds; <= 0: no expiry, returns -1) minus the age
// at now of the checkpoint's binlog file, whose first event was written at
// fileStart; never below 0.
func RetentionHeadroom(expire time.Duration, fileStart, now time.Time) time.Duration {
	if expire <= 0 {
		return -1
	}
	return max(expire-now.Sub(fileStart), 0)
}

func intOrNaN(n int64) float64 {
	if n < 0 {
		return math.NaN()
	}
	return float64(n)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
