package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/internal/progress"
	"github.com/cdc-outbox/cdc-outbox/replay"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

func replayCommand() *cobra.Command {
	var (
		source         string
		path           string
		o              replay.Options
		fromArg, toArg string
		every          time.Duration
		serverID       uint32
	)
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Re-publish the outbox events of a binlog range (never touches the checkpoint)",
		Long: `replay reads the binlog from --from to --to and publishes the outbox INSERTs
of that range again: to the topics router.topic gives them, or all to --topic.
Records are those of the live publisher (same key, value and headers, so the
same event_id for consumers to dedupe) plus replayed=true and replay_id (one
random UUID per replay run).

Positions: <file>:<pos> (a transaction boundary, e.g. the binlog_txn_end
header of a record), gtid:<set>, or an RFC 3339 time such as
2026-11-29T10:00:00Z. A time stands for the start of the first transaction
committed at or after it (binlog timestamps have a one-second resolution).
The range holds the transactions ending after --from and at or before --to;
without --to it ends at the end of the binlog when the replay starts (it
never waits for new transactions).

replay reads the binlog as a replica with its own server_id (--server-id,
default source.server-id + ha.server-ids, past the live publishers' range),
so it runs beside the live publisher. It
never connects to Redis: the live checkpoint is untouched. Poison records
follow kafka.on-poison as for run.

With --binlog-files <dir or glob>, replay reads archived binlog files
instead (no server connection): --from defaults to the start of the first
file, --to to the end of the last; a <file>:<pos> must be a transaction
boundary of one of the files. Column names come from the binlog's table
maps (binlog_row_metadata=FULL) or from --schema-file / source.schema-file.
A last file that ends early (copied while the server wrote it) ends the
replay after its last complete transaction; the summary says where.

Progress (events/s, position, ETA) goes to stderr every --progress; the
summary (counts per topic, first and last position, transactions) to stdout.
--dry-run reads the range and prints the summary, publishing nothing.

Exit status: 0 done; 1 failed (write error, poison record under
kafka.on-poison: fail, lost connection, interrupted, a damaged binlog
file): the output names the last acknowledged position to resume from with
--from; 2 usage, invalid range or connection error before anything was
published.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope := config.ScopeOps
			if o.Files != "" {
				scope = config.ScopeFiles
			}
			cfg, err := config.LoadSource(path, scope, source)
			if err != nil {
				return err
			}
			cfg.Source.Start = "" // not used here
			if fromArg == "" && o.Files == "" {
				return errors.New(`required flag(s) "from" not set`)
			}
			if fromArg != "" {
				if o.From, err = replay.ParsePoint("--from", fromArg); err != nil {
					return err
				}
			}
			if toArg != "" {
				if o.To, err = replay.ParsePoint("--to", toArg); err != nil {
					return err
				}
			}
			if o.Topic != "" {
				if err := router.ValidTopic(o.Topic); err != nil {
					return fmt.Errorf("--topic %q: %w", o.Topic, err)
				}
				if key := cfg.ReservedTopics().Key(o.Topic); key != "" {
					return fmt.Errorf("--topic %q: is %s: records there would pass for the publisher's own; give another topic", o.Topic, key)
				}
			}
			live, ids := cfg.Source.ServerID, uint32(cfg.HA.IDs())
			if !cmd.Flags().Changed("server-id") {
				serverID = live + ids
			}
			if serverID == 0 || (serverID >= live && serverID < live+ids) {
				return fmt.Errorf("--server-id %d: want a replica server_id other than the live publisher's source.server-id %d (and the %d after it under ha.server-ids)", serverID, live, ids-1)
			}
			cfg.Source.ServerID = serverID
			if every <= 0 {
				return fmt.Errorf("--progress %s: want > 0", every)
			}
			log, err := logging.New(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			return runReplay(cmd.Context(), cfg, o, every, cmd.OutOrStdout(), cmd.ErrOrStderr(), log)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file (source, router and kafka sections are used)")
	f.StringVar(&source, "source", "", "with a sources list: the source to act on (required when there are several)")
	f.StringVar(&fromArg, "from", "", "start: <file>:<pos>, gtid:<set> or an RFC 3339 time (required)")
	f.StringVar(&toArg, "to", "", "end (included): <file>:<pos>, gtid:<set> or an RFC 3339 time; default: the binlog end at start")
	f.StringVar(&o.Topic, "topic", "", "publish every record to this topic instead of the routed one")
	f.Uint32Var(&serverID, "server-id", 0, "replica server_id of the replay (default: source.server-id + ha.server-ids)")
	f.BoolVar(&o.DryRun, "dry-run", false, "read the range and print what would be published; publish nothing")
	f.DurationVar(&every, "progress", 5*time.Second, "interval of progress lines on stderr")
	f.StringVar(&o.Files, "binlog-files", "", "read archived binlog files (a directory or a glob) instead of the server; --from defaults to the first file, --to to the end of the last")
	f.StringVar(&o.SchemaFile, "schema-file", "", "with --binlog-files: a file with the outbox table's CREATE TABLE, for binlogs without column names (default: source.schema-file)")
	return cmd
}

// replay resolves and checks the range (errors: exit 2), then reads and
// publishes it (errors: exit 1), printing the plan, the progress and the
// summary.
func runReplay(ctx context.Context, cfg config.Config, o replay.Options, every time.Duration, out, errOut io.Writer, log *zap.Logger) error {
	plan, err := replay.NewPlan(ctx, cfg, o, log)
	if binlog.Damaged(err) {
		// Damage is exit 1 whether it is met planning or reading.
		fmt.Fprintf(out, "result: FAILED: %v\nnothing was published\n", err)
		return exitError{code: 1}
	}
	if err != nil {
		return err
	}
	id := replay.NewID()
	fmt.Fprintf(out, "replay %s: from %s to %s", id, plan.From.Text(), plan.To.Text())
	total := plan.Bytes()
	if total >= 0 {
		fmt.Fprintf(out, " (%d bytes of binlog)", total)
	}
	fmt.Fprintln(out)
	if plan.Files != nil {
		fmt.Fprintf(out, "source: %s (no server connection)\n", plan.Files.Describe())
	}
	if plan.Empty() {
		fmt.Fprintln(out, "nothing to replay: the start is the end of the binlog")
		return nil
	}
	rep := progress.New(progress.Config{Out: errOut, Desc: "replay", Total: total, Bytes: true, Unit: "events", Interval: every})
	var g errgroup.Group
	g.Go(func() error { return rep.Run(ctx) })
	sum, err := replay.Run(ctx, cfg, plan, o, id, func(p replay.Progress) { rep.Update(p.Done, p.Events, p.At.Text()) }, log)
	rep.Finish()
	_ = g.Wait()
	sum.Print(out)
	if plan.Files != nil {
		plan.Files.Report(out)
	}
	if err != nil {
		resume := cmp.Or(plan.ResumeFrom(sum.Acked), "the start of the range (nothing acknowledged)")
		log.Error("replay failed", zap.Error(err))
		fmt.Fprintf(out, "result: FAILED: %v\nresume with --from %s\n", err, resume)
		return exitError{code: 1}
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(out, "result: INTERRUPTED; everything up to %s was published; resume with --from %s\n", sum.Acked.Text(), cmp.Or(plan.ResumeFrom(sum.Acked), "the start of the range"))
		return exitError{code: 1}
	case o.DryRun && len(sum.Poison) > 0 && cfg.Kafka.OnPoison != sink.PolicyDeadLetter:
		p := sum.Poison[0]
		fmt.Fprintf(out, "result: dry run, nothing published; %d poison rows: the real replay (kafka.on-poison: fail) would stop at event %d, after the transaction before %s (see docs/poison.md)\n",
			len(sum.Poison), p.EventID, p.TxnEnd)
		return exitError{code: 1}
	case o.DryRun && len(sum.Poison) > 0:
		fmt.Fprintf(out, "result: dry run, nothing published; %d poison rows would go to the dead-letter topic %s\n", len(sum.Poison), cfg.Kafka.DeadLetterTopic)
	case o.DryRun:
		fmt.Fprintln(out, "result: dry run, nothing published")
	default:
		fmt.Fprintf(out, "result: published %d events (replayed=true, replay_id=%s)\n", sum.Events, id)
	}
	return nil
}
