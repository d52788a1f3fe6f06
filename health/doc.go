// Package health is what run serves on metrics-addr for the orchestrator
// and the monitoring: liveness, readiness, the status document and the
// Prometheus metrics, on one *http.ServeMux.
//
// Routes (Endpoints.Mount; GET and HEAD):
//
//	/healthz  200 while every registered Ticker ticked within its period
//	          (the process is alive and its loops turn); 503 naming the
//	          stale ones. Kubernetes livenessProbe, the image's HEALTHCHECK.
//	/readyz   200 while the State is Streaming (or Standby, see Ready);
//	          503 with the state and its reason otherwise (starting,
//	          stopping, a pipeline restarting after a retryable error).
//	          Kubernetes readinessProbe.
//	/status   the JSON value the caller's StatusFunc returns (run: the
//	          document of "cdc-outbox status --json"); 503 with
//	          {"error": ...} when it fails.
//	/metrics  the Prometheus text format of a Metrics registry.
//
// Bodies of /healthz and /readyz are JSON (Liveness and Readiness below)
// so that an operator's curl says why; the probes read only the status code.
//
// Liveness is a Registry of named Tickers: each loop that must keep
// turning (the binlog reader, the sink, the committer, the supervisor)
// takes one with its allowed period and calls Tick each time round; a loop
// that legitimately waits (backoff between pipeline restarts) calls Pause,
// and is checked again from its next Tick. The decision is the pure
// function Stale.
//
// Metrics is the process's one registry: the publisher's counters,
// gauges and histograms (cdc_outbox_*, listed on Metrics), plus the Go
// runtime and process collectors. Gauges that depend on the clock
// (seconds behind the source, checkpoint age) are computed at scrape time
// from facts the caller reports (commit times, caught up, connected), so
// they keep moving while nothing happens: a stalled publisher's lag grows
// instead of freezing at its last value.
//
// Probe is the client side of /healthz for an image without a shell: see
// cmd/cdc-outbox-probe.
//
// Nothing here is global: the caller builds one Registry, one State, one
// Metrics and mounts them; tests build their own.
package health
