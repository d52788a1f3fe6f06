package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/internal/progress"
	"github.com/cdc-outbox/cdc-outbox/prune"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

func pruneCommand() *cobra.Command {
	var (
		source   string
		path     string
		o        prune.Options
		olderArg string
		serverID uint32
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete outbox rows already published (older than --older-than), in small batches",
		Long: `prune deletes outbox rows that were published (their INSERT lies at or before
the checkpoint) and are older than --older-than (created_at), in batches of
--batch rows with --sleep between batches.

The rule, which never deletes a row that was not published: prune opens a
consistent snapshot (MariaDB: START TRANSACTION WITH CONSISTENT SNAPSHOT,
whose binlog position S is binlog_snapshot_file/position). Every row visible
in it was committed at or before S. It then reads the binlog from the
checkpoint C to S (the publisher's lag; nothing when C is at S) and takes the
smallest outbox id inserted there, B. A row visible in the snapshot with
id < B was therefore committed at or before C: published. prune deletes
exactly those ids (selected in the snapshot, deleted by id) that are also
older than --older-than. Rows committed after the snapshot are never
touched, whatever their id.

It needs DELETE on the outbox table (the publisher's user stays read-only:
run prune as another user, e.g. CDC_OUTBOX_SOURCE_USER=cdc_outbox_prune;
see docs/operations.md), plus the publisher's replication grants to read
the binlog from the checkpoint (as a replica with --server-id, default
source.server-id + ha.server-ids + 1: past the live publishers' range and
replay's default).

Exit status: 0 done (counts on stdout); 1 failed (no checkpoint, the
checkpoint's binlog purged, a missing privilege, a failed DELETE: what was
deleted before is reported); 2 usage, configuration or connection error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadSource(path, config.ScopeOps, source)
			if err != nil {
				return err
			}
			if o.OlderThan, err = prune.ParseAge(olderArg); err != nil {
				return fmt.Errorf("--older-than %q: %w", olderArg, err)
			}
			if o.Batch < 1 || o.Batch > 100000 {
				return fmt.Errorf("--batch %d: want 1 to 100000", o.Batch)
			}
			if o.Sleep < 0 {
				return fmt.Errorf("--sleep %s: want >= 0", o.Sleep)
			}
			live, ids := cfg.Source.ServerID, uint32(cfg.HA.IDs())
			if !cmd.Flags().Changed("server-id") {
				serverID = live + ids + 1
			}
			if serverID == 0 || (serverID >= live && serverID < live+ids) {
				return fmt.Errorf("--server-id %d: want a replica server_id other than the live publisher's source.server-id %d (and the %d after it under ha.server-ids)", serverID, live, ids-1)
			}
			o.ServerID = serverID
			log, err := logging.New(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			rep := progress.New(progress.Config{Out: cmd.ErrOrStderr(), Desc: "prune", Unit: "rows"})
			o.Progress = func(deleted, of, last int64) {
				rep.SetTotal(of)
				rep.Update(deleted, deleted, fmt.Sprintf("id %d", last))
			}
			var g errgroup.Group
			g.Go(func() error { return rep.Run(ctx) })
			defer func() { rep.Finish(); _ = g.Wait() }()
			return runPrune(ctx, cfg, o, cmd.OutOrStdout(), log)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file (source and checkpoint sections are used)")
	f.StringVar(&source, "source", "", "with a sources list: the source to act on (required when there are several)")
	f.StringVar(&olderArg, "older-than", "", "only rows whose created_at is older than this: e.g. 7d, 36h, 90m (required)")
	f.IntVar(&o.Batch, "batch", 1000, "rows per DELETE")
	f.DurationVar(&o.Sleep, "sleep", 100*time.Millisecond, "pause between batches")
	f.BoolVar(&o.DryRun, "dry-run", false, "count what would be deleted; delete nothing")
	f.Uint32Var(&serverID, "server-id", 0, "replica server_id used to read the binlog from the checkpoint (default: source.server-id + ha.server-ids + 1)")
	_ = cmd.MarkFlagRequired("older-than")
	return cmd
}

func runPrune(ctx context.Context, cfg config.Config, o prune.Options, w io.Writer, log *zap.Logger) error {
	sum, err := prune.Run(ctx, cfg, o, log)
	var pf prune.Failed
	if err != nil && !errors.As(err, &pf) {
		return err // exit 2
	}
	if sum != nil {
		sum.Print(w, o.DryRun)
	}
	if err != nil {
		fmt.Fprintf(w, "result: FAILED: %v\n", err)
		return exitError{code: 1}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(w, "result: INTERRUPTED")
		return exitError{code: 1}
	}
	if o.DryRun {
		fmt.Fprintln(w, "result: dry run, nothing deleted")
	} else {
		fmt.Fprintln(w, "result: OK")
	}
	return nil
}
