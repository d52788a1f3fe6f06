package otlp

import (
	"context"
	"fmt"
	"os"

	otelprom "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	"google.golang.org/grpc/credentials"

	"github.com/cdc-outbox/cdc-outbox/health"
	"github.com/prometheus/client_golang/prometheus"
)

// Options are what Start needs besides the configuration.
type Options struct {
	// Gatherer is the registry whose metrics are exported (run's
	// /metrics registry).
	Gatherer prometheus.Gatherer
	// Registerer receives cdc_outbox_otlp_exports_total; nil: not
	// registered.
	Registerer prometheus.Registerer
	// Version is the resource's service.version (the binary's version).
	Version string
}

// Exporter pushes the metrics of a Prometheus registry with OTLP every
// interval until Shutdown.
type Exporter struct {
	provider *sdkmetric.MeterProvider
}

// Start begins exporting opts.Gatherer's metrics as cfg says: a first
// export after cfg.Interval, then one every cfg.Interval, from a
// goroutine of the OpenTelemetry SDK's periodic reader that Shutdown
// stops. Nothing is dialled here (the gRPC connection is made at the
// first export), so an unreachable receiver is not an error of Start: it
// fails the exports, which the SDK's error handler (otel.SetErrorHandler)
// reports and cdc_outbox_otlp_exports_total{result="error"} counts. The
// errors of Start name the setting: the headers file or the TLS files
// unreadable.
func Start(ctx context.Context, cfg Config, opts Options) (*Exporter, error) {
	headers, err := cfg.headers()
	if err != nil {
		return nil, err
	}
	tlsCfg, err := cfg.TLS.Client(Prefix + ".tls")
	if err != nil {
		return nil, err
	}
	var exp sdkmetric.Exporter
	switch cfg.Protocol {
	case ProtocolHTTP:
		o := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(cfg.Endpoint), otlpmetrichttp.WithTimeout(cfg.Timeout), otlpmetrichttp.WithHeaders(headers)}
		if tlsCfg == nil {
			o = append(o, otlpmetrichttp.WithInsecure())
		} else {
			o = append(o, otlpmetrichttp.WithTLSClientConfig(tlsCfg))
		}
		exp, err = otlpmetrichttp.New(ctx, o...)
	default:
		o := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(cfg.Endpoint), otlpmetricgrpc.WithTimeout(cfg.Timeout), otlpmetricgrpc.WithHeaders(headers)}
		if tlsCfg == nil {
			o = append(o, otlpmetricgrpc.WithInsecure())
		} else {
			o = append(o, otlpmetricgrpc.WithTLSCredentials(credentials.NewTLS(tlsCfg)))
		}
		exp, err = otlpmetricgrpc.New(ctx, o...)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s exporter to %s: %w", Prefix, cfg.Protocol, cfg.Endpoint, err)
	}
	exports := prometheus.NewCounterVec(prometheus.CounterOpts{Name: health.Prefix + "otlp_exports_total",
		Help: "OTLP exports of the metrics (metrics.otlp), by result: ok, or error (the receiver unreachable or refusing; logged, and the next export sends the cumulative values again)."}, []string{"result"})
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(exports); err != nil {
			return nil, fmt.Errorf("%s: %w", Prefix, err)
		}
	}
	reader := sdkmetric.NewPeriodicReader(counted{Exporter: exp, ok: exports.WithLabelValues("ok"), failed: exports.WithLabelValues("error")},
		sdkmetric.WithInterval(cfg.Interval), sdkmetric.WithTimeout(cfg.Timeout),
		sdkmetric.WithProducer(otelprom.NewMetricProducer(otelprom.WithGatherer(opts.Gatherer))))
	return &Exporter{provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(Resource(cfg, opts.Version)))}, nil
}

// Resource is the resource of the exported metrics: service.name,
// service.version, service.instance.id (the host name when not
// configured) and cfg.ResourceAttributes (OpenTelemetry semantic
// conventions, "Service" resource attributes).
func Resource(cfg Config, version string) *resource.Resource {
	id := cfg.ServiceInstanceID
	if id == "" {
		id, _ = os.Hostname() // "" when unknown: the attribute is then empty
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName), attribute.String("service.version", version),
		attribute.String("service.instance.id", id)}
	for k, v := range cfg.ResourceAttributes {
		attrs = append(attrs, attribute.String(k, v))
	}
	return resource.NewSchemaless(attrs...)
}

// Shutdown exports once more (the registry as it is then) and stops,
// within ctx; the error is the final export's.
func (e *Exporter) Shutdown(ctx context.Context) error {
	return e.provider.Shutdown(ctx)
}

// counted counts the exports of the OTLP exporter it wraps by result.
type counted struct {
	sdkmetric.Exporter
	ok, failed prometheus.Counter
}

func (c counted) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := c.Exporter.Export(ctx, rm)
	if err != nil {
		c.failed.Inc()
	} else {
		c.ok.Inc()
	}
	return err
}
