package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/audit"
	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/health"
	"github.com/cdc-outbox/cdc-outbox/lease"
	"go.uber.org/zap"
)

// Status is the output of the status command: the checkpoint, the
// server's binlog end and the lag between them.
type Status struct {
	// Source names the source (sources[i].name; "default" without a
	// sources list).
	Source     string                 `json:"source"`
	Key        string                 `json:"key"`
	Checkpoint *checkpoint.Checkpoint `json:"checkpoint"`
	// End is the server's current end of the binlog.
	End binlog.Position `json:"binlog_end"`
	// LagBytes: binlog bytes from the checkpoint to End; nil when unknown.
	LagBytes *int64 `json:"lag_bytes"`
	// LagFiles: binlog files the lag spans beyond the checkpoint's (0: same file).
	LagFiles int `json:"lag_files"`
	// LagSeconds: now minus the checkpoint's event time, in whole seconds
	// (1 s resolution); 0 when caught up; nil when unknown.
	LagSeconds *int64 `json:"lag_seconds"`
	// LastEventTime: commit time of the last checkpointed transaction.
	LastEventTime *time.Time `json:"last_event_time"`
	// AgeSeconds: time since the checkpoint was written, in seconds.
	AgeSeconds *float64 `json:"age_seconds"`
	// Retention: how close the checkpoint is to the oldest binlog kept.
	Retention *Retention `json:"retention"`
	// Lease: the source's lease holder, "<instance id> <token>" (package
	// lease); "" when nobody holds it or ha.enabled is false.
	Lease string `json:"lease,omitempty"`
	// Health: the source's state on the instance that serves this
	// document as /status (streaming, standby, degraded, failed, …, with
	// its reason and since; docs/operations.md, Health model); nil in the
	// status command, which runs apart from any publisher.
	Health *health.Readiness `json:"health,omitempty"`
	// Problem: why the exit Status is 1; empty when fine.
	Problem string `json:"problem,omitempty"`
	// Audit: the continuous audit's state beside the checkpoint (its
	// cursors, totals and newest findings with their event ids and fix);
	// nil when no audit runs (audit.enabled, the audit command).
	Audit *audit.State `json:"audit,omitempty"`
	// Stop: the record of the publisher's last fatal stop, when no
	// publisher started the source since (checkpoint.Stop: when, where,
	// and the error with its fix); nil otherwise.
	Stop *checkpoint.Stop `json:"stop,omitempty"`
	// Error: why the status of the source could not be read (ReadSources
	// of several sources; Read returns it instead).
	Error string `json:"error,omitempty"`
	now   time.Time
	ha    bool // ha.enabled: the lease line is printed
}

// Read reads the checkpoint and the server's binlog end and computes the
// lag and the retention headroom.
func Read(ctx context.Context, cfg config.Config, log *zap.Logger) (Status, error) {
	store := checkpoint.NewStore(cfg.Checkpoint)
	defer store.Close()
	st := Status{Source: "default", Key: store.Key(), now: time.Now()}
	cp, err := store.Load(ctx)
	if errors.Is(err, checkpoint.ErrCorrupt) {
		st.Problem = err.Error()
	} else if err != nil {
		return st, err
	}
	if b, err := store.LoadAudit(ctx); err != nil {
		return st, err
	} else if b != nil {
		if st.Audit, err = audit.ParseState(checkpoint.AuditKey(store.Key()), b); err != nil {
			log.Warn("cannot read the audit's state", zap.Error(err))
		}
	}
	if st.Stop, err = store.LoadStop(ctx); err != nil {
		return st, err
	} else if st.Stop != nil && st.Problem == "" {
		st.Problem = "the publisher stopped and did not start again: " + st.Stop.Reason
	}
	if st.ha = cfg.HA.Enabled; st.ha {
		if st.Lease, err = lease.Holder(ctx, store.Client(), store.Key()); err != nil {
			return st, err
		}
	}
	srv, err := binlog.Connect(ctx, cfg.Source, log.Named("source"))
	if err != nil {
		return st, err
	}
	defer srv.Close()
	if st.End, err = srv.Latest(); err != nil {
		return st, err
	}
	files, err := srv.BinaryLogSizes()
	if err != nil {
		return st, err
	}
	st.compute(cp, files)
	if ret, err := srv.Retention(); err == nil {
		st.computeRetention(files, ret)
	} else {
		log.Warn("cannot read the binlog expiry settings", zap.Error(err))
	}
	return st, nil
}

// Statuses are the statuses of several sources (ReadSources).
type Statuses []Status

// ReadSources reads the status of the sources of cfg that name selects
// (config.Config.Selected: every source for ""). With one source it is
// Read (its error returned); with several, a source that cannot be read
// has its Error set, the others are read all the same, and the joined
// errors (each naming its source) are returned with them.
func ReadSources(ctx context.Context, cfg config.Config, name string, log *zap.Logger) (Statuses, error) {
	ps, err := cfg.Selected(name)
	if err != nil {
		return nil, err
	}
	out := make(Statuses, len(ps))
	var errs []error
	for i, p := range ps {
		st, err := Read(ctx, p.Config, log.With(zap.String("source", p.Name)))
		st.Source = p.Name
		if err != nil {
			if len(ps) == 1 {
				return nil, err
			}
			st.Error = err.Error()
			errs = append(errs, fmt.Errorf("source %s: %w", p.Name, err))
		}
		out[i] = st
	}
	return out, errors.Join(errs...)
}

// JSON is the value status --json prints (and /status serves): the one
// status as an object, several as an array of them.
func (ss Statuses) JSON() any {
	if len(ss) == 1 {
		return ss[0]
	}
	return []Status(ss)
}

// Served is the value run's /status serves and its error: sts (read by
// ReadSources, which returned err) with each source's Health on this
// instance (of). With several sources, one that could not be read keeps
// its Error beside the others and the document is served (nil error), so
// that a stopped source shows there with its state; with one source, err
// is returned (the endpoint answers 503 naming it; /readyz has the
// state). No statuses (a selection error): nil and err.
func Served(sts Statuses, err error, of func(source string) health.Readiness) (any, error) {
	if len(sts) == 0 {
		return nil, err
	}
	for i := range sts {
		r := of(sts[i].Source)
		sts[i].Health = &r
	}
	if len(sts) > 1 {
		err = nil // each source's in its Error
	}
	return sts.JSON(), err
}

// Problem returns the first source's problem ("" when none has one).
func (ss Statuses) Problem() string {
	for _, st := range ss {
		if st.Problem != "" {
			return fmt.Sprintf("source %s: %s", st.Source, st.Problem)
		}
	}
	return ""
}

// Write prints the statuses, each under a "source <name>" line when there
// are several.
func (ss Statuses) Write(w io.Writer) {
	for i, st := range ss {
		if len(ss) > 1 {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "source %s\n", st.Source)
			if st.Error != "" {
				fmt.Fprintf(w, "%-13s%s\n", "ERROR", st.Error)
				continue
			}
		}
		st.Write(w)
	}
}

// compute fills the lag fields from cp (nil: none) and the server's
// binlog files; st.End and st.now must be set.
func (st *Status) compute(cp *checkpoint.Checkpoint, files []binlog.LogFile) {
	st.Checkpoint = cp
	if cp == nil {
		if st.Problem == "" {
			st.Problem = fmt.Sprintf("no checkpoint under Redis key %s: the next run starts from source.start (or --start)", st.Key)
		}
		return
	}
	age := st.now.Sub(cp.UpdatedAt).Round(time.Millisecond).Seconds()
	st.AgeSeconds = &age
	if !cp.EventTime.IsZero() {
		t := cp.EventTime.UTC()
		st.LastEventTime = &t
	}
	if cp.File == "" {
		return // a GTID-only checkpoint: no byte position
	}
	n, nfiles, err := lagBytes(files, cp.Position(), st.End)
	if err != nil {
		st.Problem = err.Error()
		return
	}
	st.LagBytes, st.LagFiles = &n, nfiles
	st.LagSeconds = lagSeconds(n, cp.EventTime, st.now)
}

// lagBytes returns the binlog bytes from from to end and how many files
// after from's the span reaches into: within one file the position
// difference; across files the rest of from's file, the whole files in
// between and end.Pos bytes of end's file (sizes from SHOW BINARY LOGS,
// oldest first). It fails when from's file is not listed (purged, or of
// another server) or from is beyond end.
func lagBytes(files []binlog.LogFile, from, end binlog.Position) (int64, int, error) {
	fi, ei := -1, -1
	for i, f := range files {
		if f.Name == from.File {
			fi = i
		}
		if f.Name == end.File {
			ei = i
		}
	}
	if fi < 0 {
		oldest := "(none)"
		if len(files) > 0 {
			oldest = files[0].Name + ":4"
		}
		return 0, 0, fmt.Errorf("%w: the checkpoint's binlog %s is not on the server (purged, or from another server); oldest available is %s",
			binlog.ErrPositionUnavailable, from.FilePos(), oldest)
	}
	if ei < 0 {
		ei = len(files) - 1 // the end's file not listed yet: count to the last one
		end = binlog.Position{File: files[ei].Name, Pos: uint32(min(files[ei].Size, 1<<32-1))}
	}
	if fi > ei || (fi == ei && from.Pos > end.Pos) {
		return 0, 0, fmt.Errorf("%w: the checkpoint %s is beyond the server's binlog end %s (its binlog was reset or restored, or this is another server: see docs/operations.md, \"When the server's binlog history changes\")",
			binlog.ErrPositionUnavailable, from.FilePos(), end.FilePos())
	}
	n, after, _ := binlog.Span(files, from, end) // both listed, in order: checked above
	return n, after, nil
}

// lagSeconds is now minus the last checkpointed commit time, in whole
// seconds (binlog timestamps have 1 s resolution): 0 when no byte lags
// behind, nil when the event time is unknown.
func lagSeconds(lagBytes int64, eventTime, now time.Time) *int64 {
	var s int64
	switch {
	case lagBytes == 0:
	case eventTime.IsZero():
		return nil
	default:
		s = max(int64(now.Sub(eventTime)/time.Second), 0)
	}
	return &s
}

// write prints st for people.
func (st Status) Write(w io.Writer) {
	line := func(name, format string, a ...any) {
		fmt.Fprintf(w, "%-13s%s\n", name, fmt.Sprintf(format, a...))
	}
	line("checkpoint", "%s", st.Key)
	switch {
	case st.Lease != "":
		fmt.Fprintf(w, "  %-12s%s\n", "lease", "held by "+st.Lease+" (instance id, fencing token)")
	case st.ha:
		fmt.Fprintf(w, "  %-12s%s\n", "lease", "free: no instance publishes the source now")
	}
	if s := st.Stop; s != nil {
		on := ""
		if s.Instance != "" {
			on = " on " + s.Instance
		}
		fmt.Fprintf(w, "  %-12s%s (%s ago)%s, not started since: %s\n", "stopped", s.At.UTC().Format(time.RFC3339), st.now.Sub(s.At).Round(time.Second), on, s.Reason)
	}
	cp := st.Checkpoint
	if cp != nil {
		WriteCheckpoint(w, "  ", cp, st.now)
	} else {
		line("  position", "(none)")
	}
	line("binlog end", "%s:%d", st.End.File, st.End.Pos)
	line("  gtid set", "%s", OrNone(st.End.GTIDSet))
	switch {
	case st.LagBytes == nil:
		line("lag bytes", "(unknown)")
	case st.LagFiles == 0:
		line("lag bytes", "%d", *st.LagBytes)
	default:
		line("lag bytes", "%d (across %d binlog files)", *st.LagBytes, st.LagFiles+1)
	}
	if st.LagSeconds == nil {
		line("lag seconds", "(unknown)")
	} else {
		line("lag seconds", "%d (now - last checkpointed commit time; 1 s resolution)", *st.LagSeconds)
	}
	if st.LastEventTime == nil {
		line("last event", "(unknown)")
	} else {
		line("last event", "%s", st.LastEventTime.Format(time.RFC3339))
	}
	st.writeRetention(w)
	st.writeAudit(w)
	if st.Problem != "" {
		line("FAILED", "%s", st.Problem)
	}
}

// writeAudit writes the audit's cursors, totals and newest findings.
func (st Status) writeAudit(w io.Writer) {
	a := st.Audit
	if a == nil {
		return
	}
	tables := make([]string, 0, len(a.Cursors))
	for t := range a.Cursors {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	for _, t := range tables {
		tot := a.Totals[t]
		fmt.Fprintf(w, "%-13s%s: audited through id %d (%s); ok %d, missing %d, reordered %d, split %d, late duplicates %d, payload differences %d, unseen %d\n",
			"audit", t, a.Cursors[t], Ago(a.UpdatedAt, st.now), tot[audit.OK], tot[audit.Missing], tot[audit.Reordered], tot[audit.Split], tot[audit.Late], tot[audit.Payload], tot[audit.Unseen])
	}
	for _, f := range a.Findings {
		fmt.Fprintf(w, "  %-11s%s %s: %d %s, event ids %s\n", "found", f.At.Format(time.RFC3339), f.Table, f.Count, f.Result, strings.Join(f.EventIDs, " "))
		if f.Fix != "" {
			fmt.Fprintf(w, "  %-11s%s\n", "fix", f.Fix)
		}
	}
}

// Retention is how close the checkpoint is to the oldest binlog the
// server still keeps (Status --json: "retention").
type Retention struct {
	// OldestBinlog: the first file of SHOW BINARY LOGS; Files: how many.
	OldestBinlog string `json:"oldest_binlog"`
	Files        int    `json:"binlog_files"`
	// HeadroomBytes: binlog bytes from the start of the oldest file to the
	// checkpoint; HeadroomFiles: files before the checkpoint's (0: the
	// checkpoint is in the oldest file, the next purge removes it). nil
	// when unknown (no checkpoint, GTID-only checkpoint, file gone).
	HeadroomBytes *int64 `json:"headroom_bytes"`
	HeadroomFiles *int   `json:"headroom_files"`
	// The server's expiry settings; nil when the server has no such variable.
	ExpireSeconds *int64   `json:"binlog_expire_logs_seconds"`
	ExpireDays    *float64 `json:"expire_logs_days"`
	// Warning: set when the checkpoint is in the oldest file.
	Warning string `json:"warning,omitempty"`
}

// computeRetention fills st.Retention from the server's binlog files
// (oldest first) and expiry settings; st.Checkpoint must be set.
func (st *Status) computeRetention(files []binlog.LogFile, ret binlog.Retention) {
	if len(files) == 0 {
		return
	}
	r := &Retention{OldestBinlog: files[0].Name, Files: len(files)}
	if ret.ExpireSeconds >= 0 {
		r.ExpireSeconds = &ret.ExpireSeconds
	}
	if ret.ExpireDays >= 0 {
		r.ExpireDays = &ret.ExpireDays
	}
	if cp := st.Checkpoint; cp != nil && cp.File != "" {
		if n, before, ok := binlog.Headroom(files, cp.Position()); ok {
			r.HeadroomBytes, r.HeadroomFiles = &n, &before
			if before == 0 && len(files) > 1 {
				r.Warning = "the checkpoint is in the oldest binlog file: the next purge (expiry or PURGE BINARY LOGS) removes it; the publisher could then not resume (see source.on-purged)"
			}
		}
	}
	st.Retention = r
}

// writeRetention prints st.Retention for people.
func (st Status) writeRetention(w io.Writer) {
	r := st.Retention
	if r == nil {
		return
	}
	line := func(name, format string, a ...any) {
		fmt.Fprintf(w, "%-13s%s\n", name, fmt.Sprintf(format, a...))
	}
	line("retention", "oldest binlog %s (%d files on the server)", r.OldestBinlog, r.Files)
	expiry := ""
	if r.ExpireSeconds != nil {
		expiry = fmt.Sprintf("binlog_expire_logs_seconds %d", *r.ExpireSeconds)
	}
	if r.ExpireDays != nil {
		if expiry != "" {
			expiry += ", "
		}
		expiry += fmt.Sprintf("expire_logs_days %g", *r.ExpireDays)
	}
	line("  expiry", "%s", OrNone(expiry))
	if r.HeadroomBytes == nil {
		line("  headroom", "(unknown)")
	} else {
		line("  headroom", "%d bytes, %d files before the checkpoint's file (from the start of the oldest binlog to the checkpoint)", *r.HeadroomBytes, *r.HeadroomFiles)
	}
	if r.Warning != "" {
		line("  WARNING", "%s", r.Warning)
	}
}

// Ago formats the time since t, rounded to the second, e.g. "3m12s ago".
func Ago(t, now time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return fmt.Sprintf("%s in the future", -d)
	}
	return d.String() + " ago"
}

// WriteCheckpoint prints cp as indented "name  value" lines; now is the
// reference for ages.
func WriteCheckpoint(w io.Writer, indent string, cp *checkpoint.Checkpoint, now time.Time) {
	line := func(name, format string, a ...any) {
		fmt.Fprintf(w, "%s%-12s%s\n", indent, name, fmt.Sprintf(format, a...))
	}
	if cp.File != "" {
		line("position", "%s:%d", cp.File, cp.Pos)
	} else {
		line("position", "(none: GTID set only)")
	}
	line("gtid set", "%s", OrNone(cp.GTIDSet))
	if cp.GTID != "" {
		line("last gtid", "%s", cp.GTID)
	}
	server := fmt.Sprintf("%s, server_id %d", OrNone(cp.Flavor), cp.ServerID)
	if cp.ServerUUID != "" {
		server += ", server_uuid " + cp.ServerUUID
	}
	line("server", "%s", server)
	if cp.EventTime.IsZero() {
		line("event time", "(unknown: no transaction published since this position was set)")
	} else {
		line("event time", "%s (%s; commit time of the last checkpointed transaction, 1 s resolution)",
			cp.EventTime.UTC().Format(time.RFC3339), Ago(cp.EventTime, now))
	}
	line("updated at", "%s (%s)", cp.UpdatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Ago(cp.UpdatedAt, now))
	if len(cp.Partitions) == 0 {
		line("partitions", "(not stored)")
	} else {
		var parts []string
		for _, t := range slices.Sorted(maps.Keys(cp.Partitions)) {
			parts = append(parts, fmt.Sprintf("%s=%d", t, cp.Partitions[t]))
		}
		line("partitions", "%s", strings.Join(parts, ", "))
	}
}

func OrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
