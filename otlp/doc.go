// Package otlp exports run's metrics with the OpenTelemetry Protocol
// (OTLP, https://opentelemetry.io/docs/specs/otlp/) to a collector or any
// OTLP receiver, beside the Prometheus endpoint (metrics-addr), not
// instead of it: the metrics section's otlp keys (Config).
//
// It does not define the metrics twice: a periodic reader of the
// OpenTelemetry SDK pulls the Prometheus registry run serves at /metrics
// through the Prometheus bridge (go.opentelemetry.io/contrib/bridges/prometheus)
// and pushes the result every metrics.otlp.interval, over OTLP/gRPC or
// OTLP/HTTP (protobuf). The names are the Prometheus ones
// (cdc_outbox_records_produced_total, ...), the labels become attributes;
// counters become cumulative monotonic sums, gauges gauges, histograms
// histograms (native ones exponential histograms). The resource names the
// process: service.name (metrics.otlp.service-name, default cdc-outbox),
// service.version (the binary's version), service.instance.id
// (metrics.otlp.service-instance-id, default the host name) and
// metrics.otlp.resource-attributes.
//
// The exports are counted in cdc_outbox_otlp_exports_total{result} (ok,
// error); a failed export is logged (by the error handler run installs)
// and the next interval sends the cumulative values again, so a collector
// that was down misses points, not counts.
package otlp
