package main

import (
	"fmt"
	"io"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// retentionStatus is how close the checkpoint is to the oldest binlog the
// server still keeps (status --json: "retention").
type retentionStatus struct {
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
func (st *status) computeRetention(files []binlog.LogFile, ret binlog.Retention) {
	if len(files) == 0 {
		return
	}
	r := &retentionStatus{OldestBinlog: files[0].Name, Files: len(files)}
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
func (st status) writeRetention(w io.Writer) {
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
	line("  expiry", "%s", orNone(expiry))
	if r.HeadroomBytes == nil {
		line("  headroom", "(unknown)")
	} else {
		line("  headroom", "%d bytes, %d files before the checkpoint's file (from the start of the oldest binlog to the checkpoint)", *r.HeadroomBytes, *r.HeadroomFiles)
	}
	if r.Warning != "" {
		line("  WARNING", "%s", r.Warning)
	}
}
