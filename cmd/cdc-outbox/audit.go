package main

import (
	"context"

	"github.com/cdc-outbox/cdc-outbox/audit"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// auditSource is what the audit of source p reads.
func auditSource(p config.Named) audit.Source {
	c := p.Config
	return audit.Source{Name: p.Name, Source: c.Source, Topic: c.Router.Topic, Kafka: c.Kafka, Checkpoint: c.Checkpoint}
}

// startAudits runs the audit of each of sources in g until ctx ends (the
// caller cancels it when it returns). An audit that stops with an error
// logs it and leaves the others, and the publisher, running.
func startAudits(ctx context.Context, g *errgroup.Group, cfg audit.Config, sources []config.Named, m *metrics, log *zap.Logger) {
	for _, p := range sources {
		a := audit.New(cfg, auditSource(p), m.Audit(p.Name), log.With(zap.String("source", p.Name)))
		g.Go(func() error {
			if err := a.Run(ctx); err != nil {
				log.Error("the audit stopped (publishing goes on)", zap.String("source", p.Name), zap.Error(err))
			}
			return nil
		})
	}
}

func auditCommand() *cobra.Command {
	var (
		path, source, addr string
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Audit continuously, behind the checkpoint, that the topics hold what the outbox table committed",
		Long: `audit is the continuous audit of run's audit.enabled, as a process of its own
(one process: its cursor in Redis is not fenced). It walks the outbox ids the
checkpoint has passed (audit.lag behind it), reads their records back from
Kafka, and counts missing events, duplicates beyond the replay window, events
reordered within a key, keys split across partitions and payloads that
differ from the row (docs/verify-and-audit.md). It serves /metrics on
--metrics-addr; it logs each problem found with the event ids and the fix;
status shows the findings. The audit: section configures it (its enabled
setting is not needed here). SIGINT/SIGTERM stop it; it resumes where it was.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadFor(path, config.ScopeOps)
			if err != nil {
				return err
			}
			sources, err := cfg.Selected(source)
			if err != nil {
				return err
			}
			log, err := logging.New(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			m := newMetrics()
			var g errgroup.Group
			if addr != "" {
				srv, err := serve(&g, addr, m.Handler(), log.Named("http"))
				if err != nil {
					log.Error("--metrics-addr: cannot serve /metrics: give a free host:port, or \"\"", zap.String("addr", addr), zap.Error(err))
					return exitError{code: 2}
				}
				defer func() { srv.Close(); _ = g.Wait() }()
				log.Info("serving metrics", zap.String("addr", srv.Addr))
			}
			var audits errgroup.Group
			startAudits(ctx, &audits, cfg.Audit, sources, m, log)
			_ = audits.Wait()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file (source, router, kafka, checkpoint and audit sections are used)")
	f.StringVar(&source, "source", "", "with a sources list: the source to audit (default: every one)")
	f.StringVar(&addr, "metrics-addr", "127.0.0.1:9109", "serve /metrics here (\"\" for none)")
	return cmd
}
