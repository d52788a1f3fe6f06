package main

import (
	"fmt"

	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/deadletter"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/spf13/cobra"
)

func deadLetterCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead-letter",
		Short: "Work with the dead-letter topic (kafka.on-poison: dead-letter)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(republishCommand())
	return cmd
}

func republishCommand() *cobra.Command {
	var (
		source string
		path   string
		ids    []string
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "republish",
		Short: "Re-publish dead-lettered events to their topics once the cause is fixed",
		Long: `republish reads the dead-letter topic (kafka.dead-letter-topic) from the
beginning up to its current end and selects its records: all of them, or
those of the given --event-id. For each event, in event id order, it reads
the row again from the outbox table by id (with the source user), routes it
with the router configuration, checks that it is no longer poison (valid
JSON, within kafka.batch-bytes, a valid topic, accepted by the broker) and
publishes it to its topic with the usual key and headers plus
republished_from=dead-letter.

It prints what it did per event and a summary. Exit status: 0 when every
selected event was published (or would be, with --dry-run); 1 when any is
still poison, missing from the outbox table or from the dead-letter topic,
or failed to publish; 2 on usage or connection errors.

A republished event arrives late: after events of its conversation that were
committed after it, so per-conversation order is broken for that event.
Consumers must dedupe by the event_id header and handle it out of order (an
idempotent consumer keyed by seq_no skips it unless it applies late events).
Republishing the same event twice publishes it twice.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadSource(path, config.ScopeOps, source)
			if err != nil {
				return err
			}
			want, err := deadletter.ParseEventIDs(ids)
			if err != nil {
				return err
			}
			log, err := logging.New(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			sum, err := deadletter.Republish(ctx, cfg, deadletter.Options{IDs: want, DryRun: dryRun, Out: cmd.OutOrStdout()}, log)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), sum.String())
			if !sum.OK() {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file (source, router and kafka sections are used)")
	f.StringVar(&source, "source", "", "with a sources list: the source to act on (required when there are several)")
	f.StringSliceVar(&ids, "event-id", nil, "event id (outbox id) to re-publish; repeatable or comma-separated; default: every event in the dead-letter topic")
	f.BoolVar(&dryRun, "dry-run", false, "check and report, publish nothing")
	return cmd
}
