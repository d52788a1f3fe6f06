package main

import (
	"github.com/cdc-outbox/cdc-outbox/check"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/spf13/cobra"
)

func checkCommand() *cobra.Command {
	var path, source string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Preflight: check the source, the topics and Redis without starting",
		Long: `check runs the start-up checks without publishing anything, one line per
check with OK or FAIL and, for a failure, the fix:

  source       connection; server settings, privileges and server_id (as run does)
  outbox       the outbox tables and their mappings, checked as run checks them
               at start (missing columns, types, NULLable template columns)
  topic        each topic the rows route to exists (never auto-created), with
               its partition count: router.topic or a mapping's fixed topic; for
               a template or a topic column, the topics of the distinct values
               in the table (the first 1000; a WARN line when there are more)
  dead-letter  the dead-letter topic exists (kafka.on-poison: dead-letter)
  mirror       checkpoint.mirror-topic exists, or the brokers accept its creation
  redis        reachable and persistent (appendonly yes or RDB save points)
  checkpoint   readable; its binlog file is on the server; the partition counts
               stored with it match the topics; without one, a start option is set

With a sources list, every source is checked (each under a "source <name>"
line), or the one --source names.
Exit status: 0 when every check passes; 1 when any fails; 2 on usage or
configuration errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadFor(path, config.ScopeOps)
			if err != nil {
				return err
			}
			// The logger carries go-redis's own messages; the checks'
			// warnings are lines of the report (check.Report).
			log, err := logging.New(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			r := check.NewReport(cmd.OutOrStdout())
			if err := check.RunSources(ctx, cfg, source, r); err != nil {
				return err
			}
			r.Summary()
			if r.Failed() > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file")
	cmd.Flags().StringVar(&source, "source", "", "with a sources list: check this source only (default: every source)")
	return cmd
}
