package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/status"
	"github.com/spf13/cobra"
)

func statusCommand() *cobra.Command {
	var (
		path    string
		source  string
		asJSON  bool
		timeout time.Duration
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

With a sources list: every source (each under a "source <name>" line; --json
prints an array), or the one --source names. With ha.enabled the lease
holder is shown ("<instance id> <token>").
Exit status: 0; 1 when there is no checkpoint, or its binlog file is no
longer on the server (the publisher could not resume), or it is beyond the
end, or the publisher stopped on a fatal error and did not start again
(the "stopped" line: when, where, and the error with its fix); 2 on configuration or connection errors, and when the sources' statuses
are not read within --timeout (a frozen server or Redis: packets held, not
refused). --json prints the same as JSON.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadFor(path, config.ScopeOps)
			if err != nil {
				return err
			}
			log, err := logging.New(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			if timeout <= 0 {
				return fmt.Errorf("--timeout %s: want a positive duration, e.g. 30s", timeout)
			}
			// Cancelled by SIGINT/SIGTERM (execute), and bounded: a server
			// that holds the packets would otherwise keep the command waiting
			// for good (its connection's handshake has no deadline of its own).
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			sts, err := status.ReadSources(ctx, cfg, source, log)
			if d, _ := ctx.Deadline(); err != nil && cmd.Context().Err() == nil && !time.Now().Before(d.Add(-time.Second)) {
				// Past the bound (a dial's own timeout may end a moment
				// before ctx's).
				err = fmt.Errorf("not read within --timeout %s (a database or Redis that holds the packets, or a slow one: raise --timeout): %w", timeout, err)
			}
			if len(sts) == 0 {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(out, sts.JSON()); err != nil {
					return err
				}
			} else {
				sts.Write(out)
			}
			if err != nil {
				return err // a source could not be read: exit 2
			}
			if sts.Problem() != "" {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file (source and checkpoint sections are used)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (an array of the sources' statuses when there are several)")
	cmd.Flags().StringVar(&source, "source", "", "with a sources list: this source only (default: every source)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "bound on reading the statuses (checkpoints, binlog ends, leases); past it: exit 2")
	return cmd
}
