package health

import (
	"github.com/cdc-outbox/cdc-outbox/audit"
	"github.com/prometheus/client_golang/prometheus"
)

// The continuous audit's metrics (package audit; audit.enabled in run, or
// the audit command), labelled {source}, and {table} where given:
//
//	cdc_outbox_audit_events_total{source,table,result}  events audited, by audit.Result: ok, missing, reordered, split, duplicate, duplicate_late, payload_mismatch, not_in_table, unseen
//	cdc_outbox_audit_records_read_total{source}          records the audit read back from Kafka
//	cdc_outbox_audit_rows_read_total{source}             outbox rows the audit read from the table
//	cdc_outbox_audit_audited_id{source,table}            the largest id audited (the audit's cursor)
//	cdc_outbox_audit_behind_ids{source,table}            ids the checkpoint has passed that are not audited yet
//	cdc_outbox_audit_running{source}                     1 while the audit runs, 0 once it stopped for good
//	cdc_outbox_audit_errors_total{source}                audit sessions interrupted by a failure (retried)
//
// Missing and reordered are alerts (CdcOutboxAuditMissing,
// CdcOutboxAuditReordered in deploy/prometheus), and so are a stopped or
// failing audit (CdcOutboxAuditStopped, CdcOutboxAuditFailing).
type auditVecs struct {
	events    *prometheus.CounterVec
	records   *prometheus.CounterVec
	rows      *prometheus.CounterVec
	audited   *prometheus.GaugeVec
	behindIDs *prometheus.GaugeVec
	running   *prometheus.GaugeVec
	errors    *prometheus.CounterVec
}

func newAuditVecs() auditVecs {
	return auditVecs{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "audit_events_total",
			Help: "Events the continuous audit checked, by source, outbox table and result (ok, missing, reordered, split, duplicate, duplicate_late, payload_mismatch, not_in_table, unseen; docs/verify-and-audit.md)."}, []string{LabelSource, "table", "result"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "audit_records_read_total",
			Help: "Records the continuous audit read back from Kafka, by source."}, []string{LabelSource}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "audit_rows_read_total",
			Help: "Outbox rows the continuous audit read from the source's tables, by source."}, []string{LabelSource}),
		audited: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "audit_audited_id",
			Help: "The largest outbox id the continuous audit has audited (its cursor), by source and table."}, []string{LabelSource, "table"}),
		behindIDs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "audit_behind_ids",
			Help: "Outbox ids the checkpoint has passed that the continuous audit has not audited yet (audit.rows-per-second bounds its pace), by source and table."}, []string{LabelSource, "table"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Prefix + "audit_running",
			Help: "1 while the continuous audit of the source runs (retrying failures included), 0 once it stopped for good (its state unreadable, no integer-id table: the log says why); publishing goes on without it."}, []string{LabelSource}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Prefix + "audit_errors_total",
			Help: "Sessions of the continuous audit of the source interrupted by a failure (the database, Kafka or Redis unreachable), each retried after a backoff of audit.interval doubling to a minute."}, []string{LabelSource}),
	}
}

func (v auditVecs) collectors() []prometheus.Collector {
	return []prometheus.Collector{v.events, v.records, v.rows, v.audited, v.behindIDs, v.running, v.errors}
}

// AuditSource is one source's audit metrics; it implements audit.Observer.
type AuditSource struct {
	v      auditVecs
	source string
	rec    prometheus.Counter
	rows   prometheus.Counter
	run    prometheus.Gauge
	errs   prometheus.Counter
	known  map[string]bool // tables whose result series exist (owned by the audit's goroutine)
}

// Audit returns the audit metrics of source, creating the series of
// tables (every result at 0; others at their first Progress) so that the
// alerts see a counter before its first increase. Its methods are called
// from the one audit goroutine of the source.
func (m *Metrics) Audit(source string, tables ...string) *AuditSource {
	a := &AuditSource{v: m.audit, source: source, rec: m.audit.records.WithLabelValues(source), rows: m.audit.rows.WithLabelValues(source),
		run: m.audit.running.WithLabelValues(source), errs: m.audit.errors.WithLabelValues(source), known: map[string]bool{}}
	for _, t := range tables {
		a.init(t)
	}
	return a
}

func (a *AuditSource) init(table string) {
	if a.known[table] {
		return
	}
	a.known[table] = true
	for _, r := range audit.Results {
		a.v.events.WithLabelValues(a.source, table, string(r))
	}
}

// Count implements audit.Observer.
func (a *AuditSource) Count(table string, r audit.Result, n int) {
	a.v.events.WithLabelValues(a.source, table, string(r)).Add(float64(n))
}

// Read implements audit.Observer.
func (a *AuditSource) Read(records, rows int) {
	a.rec.Add(float64(records))
	a.rows.Add(float64(rows))
}

// Progress implements audit.Observer; the first call for a table creates
// its result series at 0.
func (a *AuditSource) Progress(table string, audited, behind uint64) {
	a.init(table)
	a.v.audited.WithLabelValues(a.source, table).Set(float64(audited))
	a.v.behindIDs.WithLabelValues(a.source, table).Set(float64(behind))
}

// Running implements audit.Observer.
func (a *AuditSource) Running(on bool) {
	if on {
		a.run.Set(1)
	} else {
		a.run.Set(0)
	}
}

// Interrupted implements audit.Observer.
func (a *AuditSource) Interrupted() { a.errs.Inc() }
