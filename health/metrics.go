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
// process, living across pipeline restarts. Each source the process
// publishes reports to its own Source (Metrics.Source), whose series carry
// the label source=<name> (sources[i].name; "default" without a sources
// list), so that several sources in one process stay apart. A source's
// series exist while this instance publishes it (from Source to Forget: a
// standby of a source exposes none of them, only cdc_outbox_standby).
// Every series without another label, and every labelled series whose
// label values are known in advance (result, reason), exists from the
// source's start, at 0 for counters; per-topic series exist once
// InitTopics named the topic (or the first record for it was produced).
// Gauges that are not known yet are NaN, never a made-up 0.
//
// Publishing (reported by the sink's Writer as its Observer):
//
//	cdc_outbox_records_produced_total{source,topic,table} records acknowledged by Kafka (acks=all), by topic and outbox table (schema.table); dead letters under the dead-letter topic
//	cdc_outbox_records_failed_total{source,topic}         records whose produce call failed after the producer's retries (sent again after the pipeline restarts)
//	cdc_outbox_produce_seconds{source,result}             histogram: one produce call (a round) until acknowledged or given up; result ok or error
//	cdc_outbox_acked_commit_timestamp_seconds{source}     commit time of the newest acknowledged transaction (1 s resolution)
//	cdc_outbox_last_ack_timestamp_seconds{source}         when the newest acknowledgement happened
//	cdc_outbox_ack_delay_seconds{source}                  commit → acknowledgement of that transaction, at that moment (frozen between acknowledgements)
//	cdc_outbox_commit_to_ack_seconds{source}              histogram: commit → acknowledgement of each transaction with outbox rows (LatencyBuckets, and native buckets); the latency objective
//	cdc_outbox_records_dead_lettered_total{source,reason,table} dead-letter records acknowledged (kafka.on-poison: dead-letter), by sink.Reason and outbox table
//	cdc_outbox_poison_records_total{source,reason,table}        poison records found, either policy (dead-lettered, or the one that stopped the publisher)
//	cdc_outbox_produce_request_records{source}            histogram: records per Produce request sent to a broker (one per leader per round, and each retry); its _count is the requests, what the brokers' request handlers pay for (rate(_sum)/rate(_count): records per request)
//	cdc_outbox_kafka_transactions_total{source,result}    Kafka transactions ended (kafka.delivery: exactly-once), result committed or aborted; each writes a marker to every partition it added
//
// The table label is the row's outbox table, "schema.table" (one series
// per table a pattern matches: sharded tables are visible one by one; ""
// until Source.SetTables named them); the poison record that stops the
// publisher counts under the first table.
//
// Pipeline and source (reported by run), each labelled {source}:
//
//	cdc_outbox_pipeline_restarts_total             pipeline restarts after retryable errors
//	cdc_outbox_purged_skips_total                  resumes that skipped a purged binlog range (source.on-purged earliest/latest)
//	cdc_outbox_source_connected                    1 while the replication connection is up, else 0
//	cdc_outbox_source_caught_up                    1 while the reader is at the end of the binlog and everything read is acknowledged
//	cdc_outbox_seconds_behind_source               computed at scrape: 0 when caught up; else now − the later of the newest acknowledged commit time and the moment it was last caught up
//	cdc_outbox_produce_unanswered_seconds          computed at scrape: how long the oldest produce round in flight has waited for the brokers' answer; 0 when none
//	cdc_outbox_bytes_behind_source                 binlog bytes from the newest acknowledged position to the end of the binlog (NaN until measured)
//	cdc_outbox_checkpoint_age_seconds              computed at scrape: how long acknowledged progress has waited to be written to the checkpoint; 0 when the checkpoint is up to date
//	cdc_outbox_checkpoint_saved_timestamp_seconds  when the checkpoint was last written
//	cdc_outbox_checkpoint_write_errors_total       failed checkpoint writes (retried at the next interval)
//	cdc_outbox_checkpoint_mirror_errors_total      failed copies to the mirror topic (retried at the next mirror interval)
//	cdc_outbox_retention_headroom_bytes            binlog bytes from the start of the oldest binlog the server keeps to the checkpoint (NaN until measured)
//	cdc_outbox_retention_headroom_seconds          time until the server's binlog expiry may purge the checkpoint's file (NaN until measured or without expiry)
//
// The continuous audit's cdc_outbox_audit_* series (Metrics.Audit) are
// listed in audit.go.
//
// Process:
//
//	cdc_outbox_build_info{version,commit,date,goversion}  1
//
// plus the Go runtime (go_*) and process (process_*) collectors.
type Metrics struct {
	reg      *prometheus.Registry
	now      func() time.Time
	produced *prometheus.CounterVec
	failed   *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	latency  *prometheus.HistogramVec
	commitTS *prometheus.GaugeVec
	ackTS    *prometheus.GaugeVec
	delay    *prometheus.GaugeVec
	dead     *prometheus.CounterVec
	poison   *prometheus.CounterVec
	restarts *prometheus.CounterVec
	purged   *prometheus.CounterVec
	requests *prometheus.HistogramVec
	txns     *prometheus.CounterVec

	connected   *prometheus.GaugeVec
	caughtUpG   *prometheus.GaugeVec
	bytesBehind *prometheus.GaugeVec
	cpSavedTS   *prometheus.GaugeVec
	cpErrors    *prometheus.CounterVec
	mirrorErrs  *prometheus.CounterVec
	headBytes   *prometheus.GaugeVec
	headSeconds *prometheus.GaugeVec

	audit auditVecs // audit.go

	mu      sync.Mutex
	sources map[string]*Source
}

// Source is one source's metrics: the series labelled source=<name>. It
// implements sink.Observer, checkpoint.Observer and the publisher's
// observers (pipeline.ObserversOf).
type Source struct {
	m        *Metrics
	name     string
	now      func() time.Time
	produced *prometheus.CounterVec
	failed   *prometheus.CounterVec
	seconds  prometheus.ObserverVec
	// secondsOK and secondsErr are seconds' two series, and
	// producedBy produced's series by topic and table, resolved once:
	// a label lookup hashes the values under the vector's lock, and
	// Produced runs once per produce round.
	secondsOK, secondsErr prometheus.Observer
	latency               prometheus.Observer // commit → acknowledgement (AckedCommit)
	producedMu            sync.Mutex
	producedBy            map[[2]string]prometheus.Counter
	commitTS              prometheus.Gauge
	ackTS                 prometheus.Gauge
	delay                 prometheus.Gauge
	dead                  *prometheus.CounterVec
	poison                *prometheus.CounterVec
	restarts              prometheus.Counter
	purged                prometheus.Counter
	requests              prometheus.Observer
	committed, aborted    prometheus.Counter
	purgedN               atomic.Uint64

	connected   prometheus.Gauge
	caughtUpG   prometheus.Gauge
	bytesBehind prometheus.Gauge
	cpSavedTS   prometheus.Gauge
	cpErrors    prometheus.Counter
	mirrorErrs  prometheus.Counter
	headBytes   prometheus.Gauge
	headSeconds prometheus.Gauge

	// deadLetterTopic is the topic whose records count as dead letters.
	deadLetterTopic atomic.Pointer[string]
	// tables are the outbox tables known at start (SetTables); the first
	// labels records that carry no table.
	tables atomic.Pointer[[]string]

	mu sync.Mutex
	// source facts for seconds_behind_source
	isConnected, isCaughtUp bool
	lastCommit              time.Time // newest acknowledged commit time
	okUntil                 time.Time // when it was last connected and caught up
	// heard tells when the source was last heard from (SetHeard); heardBefore
	// is what an earlier reader's said, kept across pipeline restarts.
	heard       func() time.Time
	inFlight    func() time.Time // the Writer's OldestInFlight (SetInFlight); nil: none yet
	heardBefore time.Time
	stale       time.Duration // caught up, but nothing heard for longer: not caught up
	// checkpoint facts for checkpoint_age_seconds
	lastAcked    binlog.Position
	pending      bool
	pendingSince time.Time
}

// poisonReasons are the values of the reason label known in advance.
var poisonReasons = []sink.Reason{sink.ReasonInvalidJSON, sink.ReasonTooLarge, sink.ReasonBrokerTooLarge, sink.ReasonInvalidTopic, sink.ReasonUndecodable}

// LabelSource is the label naming the source of a series.
const LabelSource = "source"

var (
	secondsBehindDesc = prometheus.NewDesc(Prefix+"seconds_behind_source",
		"Seconds the publisher is behind the source, computed at scrape time: 0 while caught up (at the end of the binlog, everything read acknowledged); otherwise now minus the later of the newest acknowledged commit time and the last moment it was caught up, so it keeps growing while the publisher is behind, stalled or disconnected (1 s resolution). NaN while neither is known.",
		[]string{LabelSource}, nil)
	heardAgeDesc = prometheus.NewDesc(Prefix+"source_heard_age_seconds",
		"Seconds since the source was last heard from (a transaction read or a heartbeat), computed at scrape time; NaN before anything was heard. Grows while the source is frozen or unreachable, whatever the publisher's state; compare with time() - acked_commit_timestamp_seconds, the age of the newest committed event published.",
		[]string{LabelSource}, nil)
	unansweredDesc = prometheus.NewDesc(Prefix+"produce_unanswered_seconds",
		"Seconds the oldest produce round in flight has waited for the brokers' answer, computed at scrape time; 0 when none is in flight. Grows while Kafka is down, frozen or refusing, from the first unanswered request until the retries give up (kafka.max-attempts, kafka.delivery-timeout) and the pipeline restarts; in normal running it stays within the latency budget.",
		[]string{LabelSource}, nil)
	checkpointAgeDesc = prometheus.NewDesc(Prefix+"checkpoint_age_seconds",
		"Seconds that acknowledged progress has waited to be written to the checkpoint, computed at scrape time; 0 when the stored checkpoint is the newest acknowledged position (an idle publisher's checkpoint is not old).",
		[]string{LabelSource}, nil)
)

// NewMetrics returns the metrics registered on a new registry.
func NewMetrics(b BuildInfo) *Metrics {
	src := []string{LabelSource}
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		now:     time.Now,
		sources: map[string]*Source{},
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "records_produced_total",
			Help: "Records acknowledged by Kafka (acks=all), by source, topic and outbox table (schema.table); dead letters count under the dead-letter topic."}, []string{LabelSource, "topic", "table"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "records_failed_total",
			Help: "Records whose produce call failed after the producer's retries, by source and topic; the pipeline sends them again after its restart."}, []string{LabelSource, "topic"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: Prefix + "produce_seconds",
			Help:    "Duration of a produce call (one round of records, until acknowledged or given up), by source and result.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{LabelSource, "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: Prefix + "commit_to_ack_seconds",
			Help:                            "Commit (MySQL: the GTID event's immediate_commit_timestamp, µs; MariaDB: the binlog event time, 1 s, so up to 1 s more) to Kafka's acknowledgement of each transaction with outbox rows, by source: the latency objective's histogram (classic buckets, and native buckets for a scrape that negotiates them).",
			Buckets:                         LatencyBuckets,
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  160,
			NativeHistogramMinResetDuration: time.Hour}, src),
		commitTS: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "acked_commit_timestamp_seconds",
			Help: "Commit time (binlog event timestamp, 1 s resolution) of the newest transaction of the source acknowledged by Kafka; NaN until the first."}, src),
		ackTS: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "last_ack_timestamp_seconds",
			Help: "Unix time of the newest acknowledgement of a transaction of the source; NaN until the first."}, src),
		delay: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "ack_delay_seconds",
			Help: "Commit to acknowledgement of the source's newest acknowledged transaction (1 s resolution), at that moment; it does not move between acknowledgements (use seconds_behind_source for lag)."}, src),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "records_dead_lettered_total",
			Help: "Dead-letter records acknowledged by Kafka (kafka.on-poison: dead-letter), by source, poison reason (the dlq_reason header) and outbox table."}, []string{LabelSource, "reason", "table"}),
		poison: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "poison_records_total",
			Help: "Poison records found, by source, reason and outbox table: dead-lettered ones, and the one that stopped the publisher under kafka.on-poison: fail."}, []string{LabelSource, "reason", "table"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "pipeline_restarts_total",
			Help: "Pipeline restarts of the source from the last acknowledged position after retryable errors (broker, database, network)."}, src),
		purged: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "purged_skips_total",
			Help: "Resumes of the source that skipped a purged binlog range under source.on-purged earliest or latest: those events are not published."}, src),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: Prefix + "produce_request_records",
			Help:    "Records per Produce request sent to a broker (one request per partition leader per round, and one per retry), by source; the _count is the requests: the brokers' cost follows it more than the records.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9)}, src),
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "kafka_transactions_total",
			Help: "Kafka transactions ended (kafka.delivery: exactly-once), by source and result (committed, aborted); each writes a marker to every partition it added."}, []string{LabelSource, "result"}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "source_connected",
			Help: "1 while the replication connection to the source is up, 0 otherwise."}, src),
		caughtUpG: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "source_caught_up",
			Help: "1 while the reader is at the end of the source's binlog and everything it read is acknowledged, 0 otherwise."}, src),
		bytesBehind: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "bytes_behind_source",
			Help: "Binlog bytes from the newest acknowledged position to the source's end of the binlog (every event, not only the outbox's: an upper bound of the work left); NaN until measured."}, src),
		cpSavedTS: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "checkpoint_saved_timestamp_seconds",
			Help: "Unix time of the source's last successful checkpoint write; NaN until the first."}, src),
		cpErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "checkpoint_write_errors_total",
			Help: "Checkpoint writes of the source to Redis that failed (retried at the next checkpoint.interval; publishing goes on)."}, src),
		mirrorErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "checkpoint_mirror_errors_total",
			Help: "Copies of the source's checkpoint to the mirror topic (checkpoint.mirror-topic) that failed (retried at the next checkpoint.mirror-interval; Redis has the checkpoint, a lost Redis key would resume from the older copy)."}, src),
		headBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "retention_headroom_bytes",
			Help: "Binlog bytes from the start of the oldest binlog the source keeps to the checkpoint: what purging may remove before the checkpoint's file goes; NaN until measured."}, src),
		headSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "retention_headroom_seconds",
			Help: "Seconds until the source's binlog expiry (binlog_expire_logs_seconds / expire_logs_days) may purge the checkpoint's binlog file; NaN until measured or when the server does not expire binlogs."}, src),
	}
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "build_info",
		Help: "1, labelled with the binary's version, commit, build date and Go version."}, []string{"version", "commit", "date", "goversion"})
	info.WithLabelValues(b.Version, b.Commit, b.Date, runtime.Version()).Set(1)
	m.audit = newAuditVecs()
	m.reg.MustRegister(m.audit.collectors()...)
	m.reg.MustRegister(m.produced, m.failed, m.seconds, m.latency, m.commitTS, m.ackTS, m.delay, m.dead, m.poison,
		m.restarts, m.purged, m.requests, m.txns, m.connected, m.caughtUpG, scraped{m}, m.bytesBehind, m.cpSavedTS, m.cpErrors,
		m.mirrorErrs, m.headBytes, m.headSeconds, info,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Source returns the metrics of the source named name, creating its
// series (counters at 0, unknown gauges NaN) the first time; later calls
// return the same Source until Forget.
func (m *Metrics) Source(name string) *Source {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.sources[name]; s != nil {
		return s
	}
	l := prometheus.Labels{LabelSource: name}
	s := &Source{m: m, name: name, now: m.now,
		produced: m.produced.MustCurryWith(l), failed: m.failed.MustCurryWith(l), seconds: m.seconds.MustCurryWith(l),
		commitTS: m.commitTS.With(l), ackTS: m.ackTS.With(l), delay: m.delay.With(l),
		dead: m.dead.MustCurryWith(l), poison: m.poison.MustCurryWith(l), restarts: m.restarts.With(l), purged: m.purged.With(l),
		requests: m.requests.With(l), committed: m.txns.With(prometheus.Labels{LabelSource: name, "result": "committed"}),
		aborted:   m.txns.With(prometheus.Labels{LabelSource: name, "result": "aborted"}),
		connected: m.connected.With(l), caughtUpG: m.caughtUpG.With(l), bytesBehind: m.bytesBehind.With(l),
		cpSavedTS: m.cpSavedTS.With(l), cpErrors: m.cpErrors.With(l), mirrorErrs: m.mirrorErrs.With(l), headBytes: m.headBytes.With(l), headSeconds: m.headSeconds.With(l),
	}
	for _, g := range []prometheus.Gauge{s.commitTS, s.ackTS, s.delay, s.bytesBehind, s.cpSavedTS, s.headBytes, s.headSeconds} {
		g.Set(math.NaN())
	}
	s.secondsOK, s.secondsErr = s.seconds.WithLabelValues("ok"), s.seconds.WithLabelValues("error")
	s.latency = m.latency.With(l)
	s.SetTables() // the table label "" until the tables are known
	m.sources[name] = s
	return s
}

// Forget deletes the source's series: this instance no longer publishes
// it (its lease went to another instance, package ha), so it must not
// expose a frozen lag or a disconnected source. Source(name) starts anew.
func (s *Source) Forget() {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sources[s.name] != s {
		return
	}
	delete(m.sources, s.name)
	l := prometheus.Labels{LabelSource: s.name}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.produced, m.failed, m.seconds, m.latency, m.commitTS, m.ackTS, m.delay,
		m.dead, m.poison, m.restarts, m.purged, m.requests, m.txns, m.connected, m.caughtUpG, m.bytesBehind, m.cpSavedTS, m.cpErrors, m.mirrorErrs, m.headBytes, m.headSeconds} {
		v.DeletePartialMatch(l)
	}
}

// Name is the source's name (the value of its source label).
func (s *Source) Name() string { return s.name }

// scraped collects the gauges computed at scrape time, one per source.
type scraped struct{ m *Metrics }

func (c scraped) Describe(ch chan<- *prometheus.Desc) {
	ch <- secondsBehindDesc
	ch <- heardAgeDesc
	ch <- unansweredDesc
	ch <- checkpointAgeDesc
}

func (c scraped) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	ss := make([]*Source, 0, len(c.m.sources))
	for _, s := range c.m.sources {
		ss = append(ss, s)
	}
	c.m.mu.Unlock()
	for _, s := range ss {
		ch <- prometheus.MustNewConstMetric(secondsBehindDesc, prometheus.GaugeValue, s.SecondsBehind(), s.name)
		ch <- prometheus.MustNewConstMetric(heardAgeDesc, prometheus.GaugeValue, s.HeardAge(), s.name)
		ch <- prometheus.MustNewConstMetric(unansweredDesc, prometheus.GaugeValue, s.UnansweredAge(), s.name)
		ch <- prometheus.MustNewConstMetric(checkpointAgeDesc, prometheus.GaugeValue, s.CheckpointAge(), s.name)
	}
}

// Registry is the registry the metrics are on (to add more, or gather in tests).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format (for /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// InitTopics creates the per-topic series of topics at 0 (the fixed
// router.topic and the dead-letter topic at start; a template's topics as
// they are first written).
func (s *Source) InitTopics(topics ...string) {
	for _, t := range topics {
		for _, tb := range *s.tables.Load() {
			s.produced.WithLabelValues(t, tb)
		}
		s.failed.WithLabelValues(t)
	}
}

// SetTables names the outbox tables known at start ("schema.table"; the
// tables a pattern matches then): the series of each poison reason, and
// of each topic InitTopics names, exist at 0 for each. The first labels
// the records of the single im table (which carry no table). Call it
// before InitTopics.
func (s *Source) SetTables(tables ...string) {
	if len(tables) == 0 {
		tables = []string{""}
	}
	tables = append([]string(nil), tables...)
	if old := s.tables.Load(); old != nil && len(*old) == 1 && (*old)[0] == "" && tables[0] != "" {
		for _, r := range poisonReasons { // the series of before the tables were known
			s.dead.DeleteLabelValues(string(r), "")
			s.poison.DeleteLabelValues(string(r), "")
		}
	}
	s.tables.Store(&tables)
	for _, t := range tables {
		for _, r := range poisonReasons {
			s.dead.WithLabelValues(string(r), t)
			s.poison.WithLabelValues(string(r), t)
		}
	}
}

// defaultTable labels the records without a table.
func (s *Source) defaultTable() string { return (*s.tables.Load())[0] }

// outboxTable is what the router leaves in a record's WriterData: the
// row's *binlog.Table (or an explicit partition naming it).
type outboxTable interface{ OutboxTable() string }

// tableOf returns a record's outbox table: its WriterData's, a dead
// letter's dlq_table header, else the default.
func (s *Source) tableOf(msg *kafka.Message, dead bool) string {
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
	return s.defaultTable()
}

// SetDeadLetterTopic names the dead-letter topic (kafka.dead-letter-topic
// under kafka.on-poison: dead-letter): its acknowledged records count in
// records_dead_lettered_total and poison_records_total by their
// dlq_reason header. Empty: none.
func (s *Source) SetDeadLetterTopic(topic string) {
	s.deadLetterTopic.Store(&topic)
	if topic != "" {
		s.InitTopics(topic)
	}
}

// Produced implements sink.Observer.
func (s *Source) Produced(msgs []kafka.Message, d time.Duration, err error) {
	if err != nil {
		s.secondsErr.Observe(d.Seconds())
	} else {
		s.secondsOK.Observe(d.Seconds())
	}
	var werrs kafka.WriteErrors
	partial := errors.As(err, &werrs) && len(werrs) == len(msgs)
	dlq := ""
	if p := s.deadLetterTopic.Load(); p != nil {
		dlq = *p
	}
	// Count in runs of one topic and table: a round usually has one.
	var ok, bad int
	var table string
	flush := func(topic string) {
		if ok > 0 {
			s.producedFor(topic, table).Add(float64(ok))
		}
		if bad > 0 {
			s.failed.WithLabelValues(topic).Add(float64(bad))
		}
		ok, bad = 0, 0
	}
	for i := range msgs {
		dead := dlq != "" && msgs[i].Topic == dlq
		tb := s.tableOf(&msgs[i], dead)
		if i > 0 && (msgs[i].Topic != msgs[i-1].Topic || tb != table) {
			flush(msgs[i-1].Topic)
		}
		table = tb
		if err == nil || partial && werrs[i] == nil {
			ok++
			if dead {
				s.deadLettered(&msgs[i], tb)
			}
		} else {
			bad++
		}
	}
	if len(msgs) > 0 {
		flush(msgs[len(msgs)-1].Topic)
	}
}

// Requested implements sink.Observer: one Produce request sent with
// records records.
func (s *Source) Requested(records int) { s.requests.Observe(float64(records)) }

// Transacted implements sink.Observer: one Kafka transaction ended.
func (s *Source) Transacted(committed bool) {
	if committed {
		s.committed.Inc()
	} else {
		s.aborted.Inc()
	}
}

// producedFor returns produced's series for topic and table.
func (s *Source) producedFor(topic, table string) prometheus.Counter {
	s.producedMu.Lock()
	defer s.producedMu.Unlock()
	k := [2]string{topic, table}
	c := s.producedBy[k]
	if c == nil {
		if s.producedBy == nil {
			s.producedBy = map[[2]string]prometheus.Counter{}
		}
		c = s.produced.WithLabelValues(topic, table)
		s.producedBy[k] = c
	}
	return c
}

func (s *Source) deadLettered(msg *kafka.Message, table string) {
	reason := "unknown"
	for _, h := range msg.Headers {
		if h.Key == sink.HeaderDLQReason {
			reason = string(h.Value)
			break
		}
	}
	s.dead.WithLabelValues(reason, table).Inc()
	s.poison.WithLabelValues(reason, table).Inc()
}

// PoisonStopped counts the poison record that stopped the publisher under
// kafka.on-poison: fail (a *sink.PoisonError's Reason), under the first
// table of SetTables.
func (s *Source) PoisonStopped(reason sink.Reason) {
	s.poison.WithLabelValues(string(reason), s.defaultTable()).Inc()
}

// Acked implements sink.Observer: p is the end of an acknowledged run of
// transactions, p.Time the commit time of its last one.
func (s *Source) Acked(p binlog.Position) {
	now := s.now()
	s.ackTS.Set(float64(now.UnixNano()) / 1e9)
	s.mu.Lock()
	if !p.Time.IsZero() {
		s.commitTS.Set(float64(p.Time.Unix()))
		s.delay.Set(max(now.Sub(p.Time).Seconds(), 0))
		if p.Time.After(s.lastCommit) {
			s.lastCommit = p.Time
		}
	}
	if p != s.lastAcked {
		s.lastAcked = p
		if !s.pending {
			s.pending, s.pendingSince = true, now
		}
	}
	s.mu.Unlock()
}

// LatencyBuckets are the classic buckets of
// cdc_outbox_commit_to_ack_seconds (seconds); the shipped latency
// objective counts the transactions at or under 5 s (le="5").
var LatencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300}

// AckedCommit implements sink.CommitObserver: one transaction committed
// at commit was acknowledged at at (a clock behind the source's counts 0).
func (s *Source) AckedCommit(commit, at time.Time) {
	s.latency.Observe(max(at.Sub(commit).Seconds(), 0))
}

// Restarted counts a pipeline restart.
func (s *Source) Restarted() { s.restarts.Inc() }

// PurgedSkip counts a skipped purged range and returns the count so far.
func (s *Source) PurgedSkip() uint64 {
	s.purged.Inc()
	return s.purgedN.Add(1)
}

// SourceState reports the reader's connection and whether it is caught
// up: at the end of the binlog (e.g. on a heartbeat, or when the position
// read equals SHOW BINARY LOG STATUS) with everything it read
// acknowledged. Call it on every change; connected false implies not
// caught up.
func (s *Source) SourceState(connected, caughtUp bool) {
	caughtUp = caughtUp && connected
	now := s.now()
	s.mu.Lock()
	if s.isConnected && s.isCaughtUp && !caughtUp {
		// Caught up for sure until the source was last heard from (a
		// frozen source said nothing since), and no later than now.
		s.okUntil = now
		if h := s.lastHeardLocked(); !h.IsZero() && h.Before(now) && now.Sub(h) > s.stale {
			s.okUntil = h
		}
	}
	s.isConnected, s.isCaughtUp = connected, caughtUp
	s.mu.Unlock()
	s.connected.Set(b2f(connected))
	s.caughtUpG.Set(b2f(caughtUp))
}

// SeedCommitTime gives the commit time known before anything is
// acknowledged (the checkpoint's event_time at start), so that a
// publisher that cannot connect at all shows its lag growing from there.
func (s *Source) SeedCommitTime(t time.Time) {
	s.mu.Lock()
	if t.After(s.lastCommit) {
		s.lastCommit = t
	}
	s.mu.Unlock()
}

// SetHeard gives the function that tells when the source was last heard
// from (the binlog reader's LastHeard: a transaction read or a
// heartbeat; zero: nothing yet), replacing an earlier one (a pipeline
// restart: what it said is kept), and stale: how long a caught-up source
// may stay silent (heartbeats come every source.heartbeat-period) before
// it counts as behind from when it was last heard.
func (s *Source) SetHeard(fn func() time.Time, stale time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heardBefore = s.lastHeardLocked()
	s.heard, s.stale = fn, stale
}

func (s *Source) lastHeardLocked() time.Time {
	h := s.heardBefore
	if s.heard != nil {
		if t := s.heard(); t.After(h) {
			h = t
		}
	}
	return h
}

// SetInFlight implements pipeline.InFlightObserver.
func (s *Source) SetInFlight(oldest func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight = oldest
}

// UnansweredAge is the value of cdc_outbox_produce_unanswered_seconds
// now: seconds since the oldest produce round in flight began, 0 when
// none is (or no pipeline ran yet).
func (s *Source) UnansweredAge() float64 {
	now := s.now()
	s.mu.Lock()
	f := s.inFlight
	s.mu.Unlock()
	if f == nil {
		return 0
	}
	if t := f(); !t.IsZero() {
		return max(now.Sub(t).Seconds(), 0)
	}
	return 0
}

// HeardAge is the value of cdc_outbox_source_heard_age_seconds now:
// seconds since the source was last heard from, NaN before.
func (s *Source) HeardAge() float64 {
	now := s.now()
	s.mu.Lock()
	h := s.lastHeardLocked()
	s.mu.Unlock()
	if h.IsZero() {
		return math.NaN()
	}
	return max(now.Sub(h).Seconds(), 0)
}

// SecondsBehind is the value of cdc_outbox_seconds_behind_source now.
func (s *Source) SecondsBehind() float64 {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return SecondsBehind(s.isConnected && s.isCaughtUp, s.lastCommit, s.okUntil, s.lastHeardLocked(), s.stale, now)
}

// SecondsBehind decides the lag: 0 when caught up and the source was
// heard from within stale (or stale is 0: not followed); caught up but
// silent for longer (a frozen source: nothing read, no heartbeat), the
// seconds since it was last heard from; otherwise the seconds from the
// later of lastCommit (the newest acknowledged commit time) and okUntil
// (when it was last known caught up) to now. Never negative; NaN when
// nothing is known.
func SecondsBehind(caughtUp bool, lastCommit, okUntil, heard time.Time, stale time.Duration, now time.Time) float64 {
	if caughtUp {
		if stale <= 0 || heard.IsZero() || now.Sub(heard) <= stale {
			return 0
		}
		return now.Sub(heard).Seconds()
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
func (s *Source) SetBytesBehind(n int64) { s.bytesBehind.Set(intOrNaN(n)) }

// CheckpointSaved reports a successful checkpoint write of p.
func (s *Source) CheckpointSaved(p binlog.Position) {
	now := s.now()
	s.cpSavedTS.Set(float64(now.UnixNano()) / 1e9)
	s.mu.Lock()
	if p == s.lastAcked {
		s.pending = false
	} else {
		// Acknowledged while it was written: waiting since at least now.
		s.pending, s.pendingSince = true, now
	}
	s.mu.Unlock()
}

// CheckpointFailed counts a failed checkpoint write.
func (s *Source) CheckpointFailed() { s.cpErrors.Inc() }

// CheckpointMirrorFailed counts a failed copy of the checkpoint to the
// mirror topic (cdc_outbox_checkpoint_mirror_errors_total).
func (s *Source) CheckpointMirrorFailed() { s.mirrorErrs.Inc() }

// CheckpointAge is the value of cdc_outbox_checkpoint_age_seconds now.
func (s *Source) CheckpointAge() float64 {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pending {
		return 0
	}
	return max(now.Sub(s.pendingSince).Seconds(), 0)
}

// SetRetentionHeadroom reports the checkpoint's distance from the purge:
// bytes from the start of the oldest binlog kept to the checkpoint (< 0:
// unknown), and the time until the server's expiry may purge the
// checkpoint's file (< 0: unknown or no expiry).
func (s *Source) SetRetentionHeadroom(bytes int64, d time.Duration) {
	s.headBytes.Set(intOrNaN(bytes))
	if d < 0 {
		s.headSeconds.Set(math.NaN())
	} else {
		s.headSeconds.Set(d.Seconds())
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
