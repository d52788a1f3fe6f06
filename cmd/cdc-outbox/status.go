package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

func statusCommand() *cobra.Command {
	var (
		path   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the checkpoint, the server's binlog end and the lag between them",
		Long: `status compares the stored checkpoint with the source's current end of the
binlog (SHOW BINARY LOG STATUS / SHOW MASTER STATUS):

  lag bytes    binlog bytes between the checkpoint and the end: the position
               difference within one file; across files, the rest of the
               checkpoint's file plus the sizes of the files after it (SHOW
               BINARY LOGS) up to the end. Counts every event of the binlog,
               not only the outbox table's.
  lag seconds  now minus the commit time of the last checkpointed transaction
               (1 s resolution); 0 when the checkpoint is at the end. After an
               idle period it includes the idle time: an upper bound.
  retention    the oldest binlog the server keeps, the server's expiry
               (binlog_expire_logs_seconds, expire_logs_days) and the headroom:
               bytes and files from the start of the oldest binlog to the
               checkpoint; a WARNING when the checkpoint is in the oldest file.

Exit status: 0; 1 when there is no checkpoint, or its binlog file is no
longer on the server (the publisher could not resume), or it is beyond the
end; 2 on configuration or connection errors. --json prints the same as JSON.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := opsConfig(path)
			if err != nil {
				return err
			}
			log, err := newLogger(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			st, err := readStatus(ctx, cfg, log)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(out, st); err != nil {
					return err
				}
			} else {
				st.write(out)
			}
			if st.Problem != "" {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file (source and checkpoint sections are used)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// status is the output of the status command.
type status struct {
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
	Retention *retentionStatus `json:"retention"`
	// Problem: why the exit status is 1; empty when fine.
	Problem string `json:"problem,omitempty"`
	now     time.Time
}

func readStatus(ctx context.Context, cfg Config, log *zap.Logger) (status, error) {
	store := checkpoint.NewStore(cfg.Checkpoint)
	defer store.Close()
	st := status{Key: store.Key(), now: time.Now()}
	cp, err := store.Load(ctx)
	if errors.Is(err, checkpoint.ErrCorrupt) {
		st.Problem = err.Error()
	} else if err != nil {
		return st, err
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

// compute fills the lag fields from cp (nil: none) and the server's
// binlog files; st.End and st.now must be set.
func (st *status) compute(cp *checkpoint.Checkpoint, files []binlog.LogFile) {
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
		return 0, 0, fmt.Errorf("%w: the checkpoint %s is beyond the server's binlog end %s (another server?)",
			binlog.ErrPositionUnavailable, from.FilePos(), end.FilePos())
	}
	if fi == ei {
		return int64(end.Pos) - int64(from.Pos), 0, nil
	}
	n := max(files[fi].Size-int64(from.Pos), 0)
	for i := fi + 1; i < ei; i++ {
		n += files[i].Size
	}
	return n + int64(end.Pos), ei - fi, nil
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
func (st status) write(w io.Writer) {
	line := func(name, format string, a ...any) {
		fmt.Fprintf(w, "%-13s%s\n", name, fmt.Sprintf(format, a...))
	}
	line("checkpoint", "%s", st.Key)
	cp := st.Checkpoint
	if cp != nil {
		writeCheckpoint(w, "  ", cp, st.now)
	} else {
		line("  position", "(none)")
	}
	line("binlog end", "%s:%d", st.End.File, st.End.Pos)
	line("  gtid set", "%s", orNone(st.End.GTIDSet))
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
	if st.Problem != "" {
		line("FAILED", "%s", st.Problem)
	}
}
