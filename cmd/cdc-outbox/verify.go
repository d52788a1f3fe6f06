package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/internal/progress"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

func verifyCommand() *cobra.Command {
	var (
		source       string
		path         string
		topics       []string
		table        string
		sinceID      uint64
		untilID      uint64
		wait         time.Duration
		progressEvry time.Duration
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Compare the published topics with the outbox table: missing, duplicated, reordered, split",
		Long: `verify reads the target topics from the beginning and compares them with the
outbox table's rows of an id range (default: every row in the table at start).

It reports events missing from the topics, duplicates (and how far back the
furthest replay went), events reordered within a conversation, and
conversations split across partitions. Exit status: 0 when nothing is
missing, reordered or split; 1 otherwise; 2 on usage or connection errors.

The table's mapping (source.mapping, or its entry of source.tables; see
docs/mapping.md) gives the id column, the key and the ordering column (its
header). With several tables (source.tables), each is checked in turn (a
report per table; exit 1 if any fails), the topics read once; as records
name no table, two tables publishing to one topic must not share an event
id (verify checks, and refuses naming the id); --table checks one. A string
id column (a UUID) has no range: every row is checked.

Topics: the mapping's fixed topic (router.topic with the im preset); for a
template ({event_type}, {aggregatetype}) or a topic column the topics of the
rows in the range; or --topic (repeatable).
Run it once the publisher has caught up, or give --wait to re-check for
missing events until they arrive. Memory: one bit per event id in the range (a map entry per string id).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadSource(path, config.ScopeOps, source)
			if err != nil {
				return err
			}
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			rep := progress.New(progress.Config{Out: cmd.ErrOrStderr(), Desc: "verify", Unit: "records", Interval: progressEvry})
			var g errgroup.Group
			g.Go(func() error { return rep.Run(ctx) })
			reps, err := verify.Run(ctx, verify.Source{Source: cfg.Source, Topic: cfg.Router.Topic, Kafka: cfg.Kafka}, verify.Options{Topics: topics, Table: table, SinceID: sinceID, UntilID: untilID, Wait: wait,
				Log: cmd.ErrOrStderr(), Progress: func(n int64, at string) { rep.Update(n, n, at) }})
			rep.Finish()
			_ = g.Wait()
			if err != nil {
				return err
			}
			var failed []string
			for i := range reps {
				r := &reps[i]
				if len(reps) > 1 {
					if i > 0 {
						fmt.Fprintln(cmd.OutOrStdout())
					}
					fmt.Fprintf(cmd.OutOrStdout(), "table %s\n", r.Table)
				}
				fmt.Fprint(cmd.OutOrStdout(), r.String())
				if !r.OK() {
					failed = append(failed, r.Table)
				}
			}
			switch {
			case len(failed) > 0 && len(reps) > 1:
				fmt.Fprintf(cmd.OutOrStdout(), "result: FAILED (events lost, reordered or split in %d of %d tables: %s)\n", len(failed), len(reps), strings.Join(failed, ", "))
				return exitError{code: 1}
			case len(failed) > 0:
				fmt.Fprintln(cmd.OutOrStdout(), "result: FAILED (events lost, reordered or split)")
				return exitError{code: 1}
			case len(reps) > 1:
				fmt.Fprintf(cmd.OutOrStdout(), "result: OK (%d tables)\n", len(reps))
			default:
				fmt.Fprintln(cmd.OutOrStdout(), "result: OK")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file (source, router and kafka sections are used)")
	f.StringVar(&source, "source", "", "with a sources list: the source to act on (required when there are several)")
	f.StringSliceVar(&topics, "topic", nil, "topic to read (repeatable); default: from router.topic")
	f.StringVar(&table, "table", "", "outbox table to check (schema.table) when the source reads several (source.tables); default: each in turn")
	f.Uint64Var(&sinceID, "since-id", 0, "first outbox id to check (default: the smallest in the table)")
	f.Uint64Var(&untilID, "until-id", 0, "last outbox id to check (default: the largest in the table at start)")
	f.DurationVar(&wait, "wait", 0, "keep re-reading for up to this long while events are missing")
	f.DurationVar(&progressEvry, "progress", 5*time.Second, "interval of progress lines on stderr")
	return cmd
}
