package otlp

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "headers")
	if err := os.WriteFile(good, []byte("# the collector's key\nX-Api-Key: s3cret\n\nAuthorization: Bearer t0k3n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("X-Api-Key s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string // a line of the error; "" when accepted
	}{
		{"defaults", func(*Config) {}, ""},
		{"on", func(c *Config) { c.Endpoint = "collector:4317" }, ""},
		{"endpoint with a scheme", func(c *Config) { c.Endpoint = "http://collector:4318/v1/metrics" }, `metrics.otlp.endpoint: "http://collector:4318/v1/metrics": want host:port`},
		{"endpoint without a host", func(c *Config) { c.Endpoint = ":4317" }, `metrics.otlp.endpoint: ":4317": want host:port`},
		{"protocol", func(c *Config) { c.Protocol = "grpcs" }, `metrics.otlp.protocol: "grpcs": want grpc or http`},
		{"interval", func(c *Config) { c.Interval = 500 * time.Millisecond }, "metrics.otlp.interval: 500ms: want at least 1s"},
		{"timeout above interval", func(c *Config) { c.Interval, c.Timeout = 5*time.Second, 6*time.Second }, "metrics.otlp.timeout: 6s: want at most metrics.otlp.interval (5s)"},
		{"headers and their file", func(c *Config) { c.Headers, c.HeadersFile = map[string]string{"a": "b"}, good }, "metrics.otlp.headers: set either metrics.otlp.headers or metrics.otlp.headers-file, not both"},
		{"header name", func(c *Config) { c.Headers = map[string]string{"a b": "c"} }, `metrics.otlp.headers: "a b": not a header name`},
		{"headers file", func(c *Config) { c.HeadersFile = good }, ""},
		{"headers file line", func(c *Config) { c.HeadersFile = bad }, "metrics.otlp.headers-file: " + bad + " line 1: want one header a line, Name: value"},
		{"headers file missing", func(c *Config) { c.HeadersFile = filepath.Join(dir, "none") }, "metrics.otlp.headers-file: stat "},
		{"tls off with a ca", func(c *Config) { c.TLS.CAFile = good }, "metrics.otlp.tls.enabled: false, but other metrics.otlp.tls settings are set"},
		{"service name", func(c *Config) { c.ServiceName = "" }, "metrics.otlp.service-name: required"},
		{"service.name attribute", func(c *Config) { c.ResourceAttributes = map[string]string{"service.name": "x"} }, "metrics.otlp.resource-attributes: service.name: set by metrics.otlp.service-name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.edit(&cfg)
			err := cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Fatalf("the error shows a header value: %v", err)
			}
		})
	}
	h, err := readHeaders(good)
	if err != nil || len(h) != 2 || h["X-Api-Key"] != "s3cret" || h["Authorization"] != "Bearer t0k3n" {
		t.Fatalf("readHeaders: %v %v", h, err)
	}
	cfg := DefaultConfig()
	cfg.Headers = map[string]string{"X-Api-Key": "s3cret"}
	if r := cfg.Redacted(); r.Headers["X-Api-Key"] != "***" || cfg.Headers["X-Api-Key"] != "s3cret" {
		t.Fatalf("Redacted: %v (original %v)", r.Headers, cfg.Headers)
	}
}

// Over OTLP/HTTP the exporter POSTs protobuf to /v1/metrics with the
// configured headers (from headers-file here), and counts the export; the
// final export happens at Shutdown.
func TestExportHTTP(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	headers := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(headers, []byte("X-Api-Key: s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Endpoint, cfg.Protocol, cfg.Interval, cfg.HeadersFile = strings.TrimPrefix(srv.URL, "http://"), ProtocolHTTP, time.Hour, headers
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "cdc_outbox_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Add(3)
	exp, err := Start(context.Background(), cfg, Options{Gatherer: reg, Registerer: reg, Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1 (the final export)", len(got))
	}
	r := got[0]
	if r.Method != http.MethodPost || r.URL.Path != "/v1/metrics" || r.Header.Get("Content-Type") != "application/x-protobuf" || r.Header.Get("X-Api-Key") != "s3cret" {
		t.Fatalf("request %s %s, Content-Type %q, X-Api-Key %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("X-Api-Key"))
	}
	if n := exports(t, reg, "ok"); n != 1 {
		t.Fatalf("exports ok %v, want 1", n)
	}
}

// An unreachable receiver fails the export: counted as an error, and
// Shutdown returns it (run logs it); Start itself does not dial.
func TestExportUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, proto := range []string{ProtocolGRPC, ProtocolHTTP} {
		t.Run(proto, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Endpoint, cfg.Protocol, cfg.Interval, cfg.Timeout = addr, proto, time.Hour, 300*time.Millisecond
			reg := prometheus.NewRegistry()
			exp, err := Start(context.Background(), cfg, Options{Gatherer: reg, Registerer: reg, Version: "1.2.3"})
			if err != nil {
				t.Fatalf("Start dialled: %v", err)
			}
			if err := exp.Shutdown(context.Background()); err == nil {
				t.Fatal("Shutdown: no error from the final export to a closed port")
			}
			if n := exports(t, reg, "error"); n != 1 {
				t.Fatalf("exports error %v, want 1", n)
			}
		})
	}
}

// exports is cdc_outbox_otlp_exports_total{result} of reg, -1 when absent.
func exports(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "cdc_outbox_otlp_exports_total" && m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
