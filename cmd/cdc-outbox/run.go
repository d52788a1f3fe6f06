package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	_ "net/http/pprof" // --pprof
	"os"
	"time"

	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/gcpace"
	"github.com/cdc-outbox/cdc-outbox/ha"
	"github.com/cdc-outbox/cdc-outbox/health"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/internal/progress"
	"github.com/cdc-outbox/cdc-outbox/pipeline"
	"github.com/cdc-outbox/cdc-outbox/procs"
	"github.com/cdc-outbox/cdc-outbox/status"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

func runCommand() *cobra.Command {
	var (
		path      string
		source    string
		start     string
		logFormat string
		logLevel  string
		pprofAddr string
		recoverCP bool
		accept    bool
		backfill  bool
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Stream the outbox table's INSERTs from the binlog to Kafka",
		Long: `run streams committed INSERTs of the outbox table to Kafka and checkpoints the
binlog position in Redis once Kafka acknowledged everything before it.

Configuration: defaults, then the YAML file (--config), then CDC_OUTBOX_*
environment variables (e.g. CDC_OUTBOX_SOURCE_PASSWORD), then flags.

Start: with a stored checkpoint, run resumes from it. Without one, a start
option is required: latest (the current end of the binlog), earliest (the
oldest binlog the server has), <file>:<pos>, or gtid:<set>.

Without a checkpoint but with records of cdc-outbox in the (fixed) topic,
run refuses to start and names the position to resume from; with
--recover-checkpoint (or checkpoint.recover: true) it resumes from there.

The partition count of each topic is stored with the checkpoint; run refuses
to start when it changed (the key → partition mapping changed) unless
--accept-partition-change is given.

SIGINT/SIGTERM stop reading, flush what was read, write the checkpoint and
exit 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path)
			if err != nil {
				return err
			}
			explicit := cmd.Flags().Changed("start")
			startSource, err := cfg.ApplyRun(config.RunFlags{Source: source, Start: start, StartSet: explicit,
				Recover: recoverCP, Backfill: backfill, AcceptPartitionChange: accept})
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("log-format") {
				cfg.Log.Format = logFormat
			}
			if cmd.Flags().Changed("log-level") {
				cfg.Log.Level = logLevel
			}
			if err := cfg.Check(config.ScopeRun); err != nil {
				return err
			}
			log, err := logging.New(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			m := newMetrics()
			g, gctx := errgroup.WithContext(ctx)
			var servers []*http.Server
			defer func() {
				for _, s := range servers {
					s.Close()
				}
				_ = g.Wait()
			}()
			if pprofAddr != "" {
				srv, err := serve(g, pprofAddr, http.DefaultServeMux, log.Named("pprof"))
				if err != nil {
					log.Error("--pprof", zap.Error(err))
					return exitError{code: 2}
				}
				servers = append(servers, srv)
			}
			if gov := procs.New(log); gov != nil && cfg.AdaptiveProcs {
				// Stopped when run returns (deferred before g.Wait), not
				// only by a signal: run also ends when its sources do.
				govCtx, stopGov := context.WithCancel(gctx)
				defer stopGov()
				g.Go(func() error { return gov.Run(govCtx) })
			}
			if ballast := gcpace.New(cfg.GCHeadroom); ballast != nil {
				ballastCtx, release := context.WithCancel(gctx)
				defer release()
				g.Go(func() error { return ballast.Run(ballastCtx) })
			}
			var names []string
			for _, p := range cfg.Pipelines() {
				names = append(names, p.Name)
			}
			phase, live := health.NewSources(names...), health.NewRegistry()
			m.Registry().MustRegister(phase)
			ticker := live.Ticker("publisher", pipeline.LivenessPeriod(cfg))
			if cfg.MetricsAddr != "" {
				mux, err := health.NewMux(health.Endpoints{Live: live, Ready: phase, Metrics: m.Handler(),
					Status: func(ctx context.Context) (any, error) {
						sts, err := status.ReadSources(ctx, cfg, "", log)
						return status.Served(sts, err, func(name string) health.Readiness { return phase.Source(name).Readiness() })
					}})
				if err != nil {
					return err
				}
				srv, err := serve(g, cfg.MetricsAddr, mux, log.Named("http"))
				if err != nil {
					log.Error("metrics-addr: cannot serve /metrics, /healthz, /readyz and /status: set metrics-addr to a free host:port, or \"\" to serve nothing", zap.String("metrics_addr", cfg.MetricsAddr), zap.Error(err))
					return exitError{code: 2}
				}
				servers = append(servers, srv)
				log.Info("serving metrics and health", zap.String("addr", srv.Addr), zap.Strings("paths", []string{"/metrics", "/healthz", "/readyz", "/status"}))
			}
			stopOTLP, err := startOTLP(gctx, cfg.Metrics.OTLP, m, log)
			if err != nil {
				log.Error("cannot export the metrics with OTLP", zap.Error(err))
				return exitError{code: 2}
			}
			defer stopOTLP()
			if cfg.Audit.Enabled {
				auditCtx, stopAudits := context.WithCancel(gctx)
				defer stopAudits()
				startAudits(auditCtx, g, cfg.Audit, cfg.Pipelines(), m, log)
			}
			// The phase (/readyz) is the worst of the sources' (health.ReadinessOf);
			// the liveness ticks with every publisher's loop.
			opts := pipeline.Options{ExplicitStart: explicit, AcceptPartitionChange: accept, Backfill: backfill, Version: version, Live: ticker}
			if (backfill || cfg.Backfills()) && progress.IsTerminal(os.Stderr) {
				// A bar on a terminal; elsewhere the log's progress lines say it.
				bar := progress.New(progress.Config{Out: os.Stderr, Desc: "backfill", Unit: "rows"})
				g.Go(func() error { return bar.Run(gctx) })
				defer bar.Finish()
				opts.BackfillProgress = func(acked, total int64, at string) {
					bar.SetTotal(total)
					bar.Update(acked, acked, at)
				}
			}
			hopts := ha.Options{Publisher: opts, StartSource: startSource, Registerer: m.Registry(), Health: phase,
				Observer: func(name string) pipeline.Observers { return pipeline.ObserversOf(m.Source(name)) },
				Forget:   func(name string) { m.Source(name).Forget() }}
			if err := ha.Run(gctx, cfg, hopts, log); err != nil {
				log.Error("stopped", zap.Error(err))
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file")
	f.StringVar(&source, "source", "", "with a sources list: the source --start, --recover-checkpoint, --backfill and --accept-partition-change apply to (the others start as configured)")
	f.StringVar(&start, "start", "", "start position when no checkpoint exists: latest, earliest, <file>:<pos> or gtid:<set>")
	f.StringVar(&logFormat, "log-format", "", "json or console")
	f.StringVar(&logLevel, "log-level", "", "debug, info, warn or error")
	f.StringVar(&pprofAddr, "pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060) for profiling")
	f.BoolVar(&recoverCP, "recover-checkpoint", false, "when the checkpoint is missing but the topic holds records of cdc-outbox, resume from the position their binlog_txn_end headers give (same as checkpoint.recover: true)")
	f.BoolVar(&accept, "accept-partition-change", false, "start even though a topic's partition count differs from the one stored with the checkpoint, and store the new count")
	f.BoolVar(&backfill, "backfill", false, "first start only (no checkpoint): publish the outbox rows the polling dispatcher had not sent (source.backfill-where) from a consistent snapshot, then stream the binlog from the snapshot's position")
	cmd.MarkFlagsMutuallyExclusive("start", "recover-checkpoint")
	cmd.MarkFlagsMutuallyExclusive("backfill", "start", "recover-checkpoint")
	return cmd
}

// serve listens on addr and serves h in g until the returned server is
// closed; a server that fails after listening is logged.
func serve(g *errgroup.Group, addr string, h http.Handler, log *zap.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: h, ReadHeaderTimeout: 5 * time.Second}
	g.Go(func() error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("http server", zap.Error(err))
		}
		return nil
	})
	return srv, nil
}
