package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/debezium"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/pipeline"
	"github.com/cdc-outbox/cdc-outbox/status"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

// failed prints "FAILED: <msg>" to w and returns exit status 1.
func failed(w io.Writer, format string, a ...any) error {
	fmt.Fprintf(w, "FAILED: "+format+"\n", a...)
	return exitError{code: 1}
}

func checkpointCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Show, set or reset the stored checkpoint (the Redis key checkpoint.key)",
		Long: `checkpoint show|set|reset work on the checkpoint of one source: the Redis key
checkpoint.key holding the binlog position up to which everything was
published; with a sources list, the one --source names. Exit status: 0 on success; 1 when a check failed (position not
on the server, invalid GTID set, publisher running, corrupt value); 2 on
usage, configuration or connection errors.

There is no lock between these commands and a running publisher: a running
publisher overwrites the checkpoint at its next write (every
checkpoint.interval while it publishes, and when it stops). Stop it first.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(checkpointShowCommand(), checkpointSetCommand(), checkpointResetCommand())
	return cmd
}

func checkpointShowCommand() *cobra.Command {
	var (
		path   string
		source string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the stored checkpoint, or say there is none",
		Long: `show prints the stored checkpoint: binlog file:pos, GTID set, the server it
belongs to, the commit time of the last checkpointed transaction (event
time, 1 s resolution), when it was written (updated at) with ages, and the
partition counts stored with it. Exit status 0 also when there is none;
1 when the value is corrupt; 2 on configuration or connection errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadSource(path, config.ScopeCheckpoint, source)
			if err != nil {
				return err
			}
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			out := cmd.OutOrStdout()
			st, err := pipeline.LoadStored(ctx, cfg, zap.NewNop())
			if err != nil {
				return err
			}
			if st.RedisCorrupt != nil {
				return failed(out, "%v", st.RedisCorrupt)
			}
			now := time.Now()
			if asJSON {
				return writeJSON(out, showJSON(st, now))
			}
			cp := st.Redis
			if cp == nil {
				fmt.Fprintf(out, "no checkpoint under Redis key %s (%s)\n", st.Key, cfg.Checkpoint.Where())
			} else {
				fmt.Fprintf(out, "checkpoint %s (%s)\n", st.Key, cfg.Checkpoint.Where())
				status.WriteCheckpoint(out, "  ", cp, now)
			}
			switch {
			case st.MirrorTopic == "":
				fmt.Fprintln(out, "mirror: none (checkpoint.mirror-topic is empty)")
			case st.MirrorErr != nil:
				fmt.Fprintf(out, "mirror %s: cannot read it: %v\n", st.MirrorTopic, st.MirrorErr)
			case st.Mirror == nil:
				fmt.Fprintf(out, "mirror %s: no copy\n", st.MirrorTopic)
			default:
				fmt.Fprintf(out, "mirror %s (copy):\n", st.MirrorTopic)
				status.WriteCheckpoint(out, "  ", st.Mirror, now)
			}
			switch st.Wins() {
			case "redis":
				fmt.Fprintln(out, "wins: redis (the next run resumes from the Redis checkpoint)")
			case "mirror":
				fmt.Fprintln(out, "wins: mirror (Redis lost the key: the next run resumes from the copy and writes it back)")
			default:
				fmt.Fprintln(out, "wins: none: the next run starts from source.start (or --start)")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file (the checkpoint section is used)")
	cmd.Flags().StringVar(&source, "source", "", "with a sources list: the source to act on (required when there are several)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {key, checkpoint (null when none), age_seconds}")
	return cmd
}

// showOutput is checkpoint show --json.
type showOutput struct {
	Key        string                 `json:"key"`
	Checkpoint *checkpoint.Checkpoint `json:"checkpoint"`
	// AgeSeconds is the time since the checkpoint was written, in seconds.
	AgeSeconds *float64 `json:"age_seconds"`
	// MirrorTopic and Mirror: the copy in checkpoint.mirror-topic (null
	// when none); MirrorError why it could not be read.
	MirrorTopic string                 `json:"mirror_topic,omitempty"`
	Mirror      *checkpoint.Checkpoint `json:"mirror"`
	MirrorError string                 `json:"mirror_error,omitempty"`
	// Wins: redis, mirror or none (where the next run resumes).
	Wins string `json:"wins"`
}

func showJSON(st pipeline.Stored, now time.Time) showOutput {
	cp := st.Redis
	o := showOutput{Key: st.Key, Checkpoint: cp, MirrorTopic: st.MirrorTopic, Mirror: st.Mirror, Wins: st.Wins()}
	if st.MirrorErr != nil {
		o.MirrorError = st.MirrorErr.Error()
	}
	if cp != nil {
		age := now.Sub(cp.UpdatedAt).Round(time.Millisecond).Seconds()
		o.AgeSeconds = &age
	}
	return o
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func checkpointSetCommand() *cobra.Command {
	var (
		path         string
		source       string
		force        bool
		fromDebezium string
		dbzConnector string
	)
	cmd := &cobra.Command{
		Use:   "set <file>:<pos> | gtid:<set> | --from-debezium <offset-file | topic:name>",
		Short: "Store a new checkpoint position, checked against the server",
		Long: `set stores a new checkpoint: the next run resumes there. The position is
checked against the source first: a <file>:<pos> must name a binlog the
server still has, within its size, at the start of an event outside a
transaction (e.g. a record's binlog_txn_end header, or the end_log_pos of a
transaction's COMMIT/Xid event); a gtid:<set> must parse for the server's
flavor and needs source.position-mode: gtid. latest and earliest are
accepted too. The current partition count of each topic is stored with it
(this confirms a partition count change).

It prints the old and the new checkpoint. It refuses (exit 1) while a
publisher seems to be running, unless --force:
  - an instance holds the source's lease (the lease key of checkpoint.key
    in Redis: the publishing instance holds it under ha.enabled, the
    default; a killed instance's lease expires within ha.lease-ttl);
  - a replica with source.server-id is registered on the server (a
    publisher without leases registers as source.server-id; a killed one's
    registration goes away within seconds).
There is no lock: a publisher started after these checks overwrites the
checkpoint at its next write.

--from-debezium takes the position from where a stopped Debezium MySQL
connector stopped (docs/migrate-from-debezium.md): its offset file
(offset.storage.file.filename) or topic:<offsets topic> (read on
kafka.brokers); --connector names the connector when several are stored.
It prints the offset and what the takeover publishes again (at most the one
transaction Debezium was in).`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.LoadSource(path, config.ScopeOps, source)
			if err != nil {
				return err
			}
			if (len(args) == 1) == (fromDebezium != "") {
				return errors.New("checkpoint set: give a position (<file>:<pos> or gtid:<set>) or --from-debezium, one of them")
			}
			var st binlog.Start
			if fromDebezium != "" {
				offs, err := debezium.Read(cmd.Context(), fromDebezium, cfg.Kafka)
				if err != nil {
					return err
				}
				o, err := debezium.Pick(offs, dbzConnector)
				if err != nil {
					return err
				}
				var again string
				if st, again, err = debezium.Takeover(o, cmp.Or(cfg.Source.PositionMode, binlog.ModeFile)); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "debezium connector %s (topic.prefix %s): %s:%d, gtids %q, event %d, row %d\npublished again: %s\n",
					o.Connector, o.Server, o.File, o.Pos, o.GTIDs, o.Event, o.Row, again)
				args = []string{fromDebezium}
			} else if st, err = binlog.ParseStart(args[0]); err != nil {
				return err
			}
			if st.Kind == binlog.StartUnset {
				return errors.New("checkpoint set: give a position: <file>:<pos> or gtid:<set>")
			}
			if st.Kind == binlog.StartGTID && cfg.Source.PositionMode != binlog.ModeGTID {
				return fmt.Errorf("checkpoint set %s: a GTID position needs source.position-mode: gtid (file mode resumes by file:pos); give <file>:<pos>", args[0])
			}
			log, err := logging.New(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			return checkpointSet(ctx, cfg, st, force, cmd.OutOrStdout(), log)
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file")
	cmd.Flags().StringVar(&source, "source", "", "with a sources list: the source to act on (required when there are several)")
	cmd.Flags().StringVar(&fromDebezium, "from-debezium", "", "take the position from a stopped Debezium connector's offsets: its offset file, or topic:<offsets topic>")
	cmd.Flags().StringVar(&dbzConnector, "connector", "", "with --from-debezium: the connector's name (or topic.prefix) when the offsets hold several")
	cmd.Flags().BoolVar(&force, "force", false, "write even though a publisher seems to be running (an instance holds the source's lease, or a replica with source.server-id is registered); it overwrites the checkpoint at its next write")
	return cmd
}

func checkpointSet(ctx context.Context, cfg config.Config, st binlog.Start, force bool, out io.Writer, log *zap.Logger) error {
	res, err := pipeline.SetCheckpoint(ctx, cfg, st, force, log)
	for _, w := range res.Warnings {
		fmt.Fprintln(out, "warning: "+w)
	}
	var refused *pipeline.RefusedError
	if errors.As(err, &refused) {
		return failed(out, "%v", refused.Err)
	}
	if err != nil {
		return err
	}
	now := time.Now()
	fmt.Fprintf(out, "checkpoint %s (%s)\n", res.Key, cfg.Checkpoint.Where())
	switch {
	case res.Corrupt:
		fmt.Fprintln(out, "old: (corrupt value, overwritten)")
	case res.Old == nil:
		fmt.Fprintln(out, "old: (none)")
	default:
		fmt.Fprintln(out, "old:")
		status.WriteCheckpoint(out, "  ", res.Old, now)
	}
	fmt.Fprintln(out, "new:")
	status.WriteCheckpoint(out, "  ", res.New, now)
	fmt.Fprintln(out, "the next run resumes from the new position; a publisher running now would overwrite it at its next write")
	return nil
}

func checkpointResetCommand() *cobra.Command {
	var (
		path   string
		source string
		yes    bool
		force  bool
	)
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Print, then delete the stored checkpoint (needs --yes)",
		Long: `reset prints the stored checkpoint, then deletes the key when --yes is given
(without it, exit status 2 and nothing is deleted). The next run then needs
a start option; if the topic holds records of cdc-outbox it refuses to start
from the configured start unless given --start or --recover-checkpoint.
It refuses (exit 1) while an instance holds the source's lease (the
publishing instance under ha.enabled, the default; a killed instance's
lease expires within ha.lease-ttl), unless --force: checked in the same
atomic step as the delete. A publisher without leases writes the key
again at its next write: stop it first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadSource(path, config.ScopeCheckpoint, source)
			if err != nil {
				return err
			}
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			out := cmd.OutOrStdout()
			st, err := pipeline.LoadStored(ctx, cfg, zap.NewNop())
			if err != nil {
				return err
			}
			switch {
			case st.RedisCorrupt != nil:
				fmt.Fprintf(out, "checkpoint %s (%s): %v\n", st.Key, cfg.Checkpoint.Where(), st.RedisCorrupt)
			case st.Redis == nil && st.Mirror == nil:
				fmt.Fprintf(out, "no checkpoint under Redis key %s (%s) and no copy in the mirror: nothing to reset\n", st.Key, cfg.Checkpoint.Where())
				return nil
			case st.Redis == nil:
				fmt.Fprintf(out, "no checkpoint under Redis key %s (%s); its copy in %s:\n", st.Key, cfg.Checkpoint.Where(), st.MirrorTopic)
				status.WriteCheckpoint(out, "  ", st.Mirror, time.Now())
			default:
				fmt.Fprintf(out, "checkpoint %s (%s)\n", st.Key, cfg.Checkpoint.Where())
				status.WriteCheckpoint(out, "  ", st.Redis, time.Now())
			}
			if !yes {
				fmt.Fprintln(out, "not deleted: add --yes to delete it")
				return exitError{code: 2}
			}
			if _, err := pipeline.DeleteStored(ctx, cfg, force, zap.NewNop()); err != nil {
				return failed(out, "%v", err)
			}
			fmt.Fprintf(out, "deleted %s (and its copy in the mirror); the next run needs --start (or --recover-checkpoint when the topic holds records); a running publisher writes it again at its next write\n", st.Key)
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file (the checkpoint section is used)")
	cmd.Flags().StringVar(&source, "source", "", "with a sources list: the source to act on (required when there are several)")
	cmd.Flags().BoolVar(&yes, "yes", false, "really delete the key")
	cmd.Flags().BoolVar(&force, "force", false, "delete even though an instance holds the source's lease (it writes the key again at its next write)")
	return cmd
}
