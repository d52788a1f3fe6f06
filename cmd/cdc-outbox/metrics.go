package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cdc-outbox/cdc-outbox/health"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/otlp"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"
)

// metrics are run's Prometheus metrics, served at /metrics on metrics-addr;
// the metric set and its semantics live in package health (health.Metrics
// lists them). The Writer reports to it as its sink.Observer.
type metrics struct{ *health.Metrics }

func newMetrics() *metrics {
	return &metrics{health.NewMetrics(health.BuildInfo{Version: version, Commit: commit, Date: date})}
}

// startOTLP starts the OTLP export of m's registry (metrics.otlp, package
// otlp) when metrics.otlp.endpoint is set; stop exports the final values
// (within metrics.otlp.timeout) and ends it. The OpenTelemetry SDK's
// errors (a failed export) go to log: run owns the process's
// OpenTelemetry error handler.
func startOTLP(ctx context.Context, cfg otlp.Config, m *metrics, log *zap.Logger) (stop func(), err error) {
	if !cfg.Enabled() {
		return func() {}, nil
	}
	log = log.Named("otlp")
	// Sampled: with a short interval a collector that is down would log
	// every export; the counter has them all.
	warn := logging.NewLimiter(time.Minute, 3)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		if ok, suppressed := warn.Allow(time.Now()); ok {
			log.Warn("metrics.otlp: export failed; the next one sends the cumulative values again (cdc_outbox_otlp_exports_total{result=\"error\"})",
				zap.String("endpoint", cfg.Endpoint), zap.Error(err), zap.Int("suppressed", suppressed))
		}
	}))
	exp, err := otlp.Start(ctx, cfg, otlp.Options{Gatherer: m.Registry(), Registerer: m.Registry(), Version: version})
	if err != nil {
		return nil, err
	}
	log.Info("exporting metrics with OTLP", zap.String("endpoint", cfg.Endpoint), zap.String("protocol", cfg.Protocol),
		zap.Duration("interval", cfg.Interval), zap.Bool("tls", cfg.TLS.Enabled))
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Timeout)
		defer cancel()
		if err := exp.Shutdown(sctx); err != nil {
			log.Warn(fmt.Sprintf("metrics.otlp: the final export to %s failed", cfg.Endpoint), zap.Error(err))
		}
	}, nil
}
