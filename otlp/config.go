package otlp

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/secure"
)

// Prefix is the configuration section of Config, as the errors name it.
const Prefix = "metrics.otlp"

// The protocols of metrics.otlp.protocol.
const (
	// ProtocolGRPC is OTLP/gRPC (the collector's port 4317 by convention).
	ProtocolGRPC = "grpc"
	// ProtocolHTTP is OTLP/HTTP with protobuf bodies, POST to
	// /v1/metrics (the collector's port 4318 by convention).
	ProtocolHTTP = "http"
)

// Config is the metrics.otlp section: where and how run pushes its
// metrics with OTLP. Off while Endpoint is empty (the default).
type Config struct {
	// Endpoint is the OTLP receiver, host:port (a collector's 4317 for
	// gRPC, 4318 for HTTP); empty: no OTLP export.
	Endpoint string `yaml:"endpoint" env:"ENDPOINT" doc:"The OTLP receiver (an OpenTelemetry Collector), host:port (by convention 4317 for grpc, 4318 for http); empty: no OTLP export, /metrics only." rule:"host:port or empty"`
	// Protocol is grpc (OTLP/gRPC) or http (OTLP/HTTP protobuf, POST
	// /v1/metrics).
	Protocol string `yaml:"protocol" env:"PROTOCOL" doc:"grpc (OTLP/gRPC) or http (OTLP/HTTP with protobuf bodies, POST to /v1/metrics)." rule:"grpc or http"`
	// Interval is the time between two exports (each sends every
	// metric's cumulative value).
	Interval time.Duration `yaml:"interval" env:"INTERVAL" doc:"Time between two exports; each sends every metric's cumulative value, so a missed export loses points, not counts." rule:"at least 1s"`
	// Timeout bounds one export (retries included).
	Timeout time.Duration `yaml:"timeout" env:"TIMEOUT" doc:"Bound on one export, its retries included." rule:"at least 100ms; at most interval"`
	// Headers are sent with every export (an API key, an
	// Authorization header); a secret: its values are masked when the
	// configuration is printed.
	Headers map[string]string `yaml:"headers" env:"HEADERS" secret:"headers-file" doc:"Headers sent with every export (an API key, Authorization); a secret, masked when the configuration is printed." rule:"not with headers-file"`
	// HeadersFile is a file of headers, one "Name: value" a line (a
	// mounted Kubernetes Secret), read at start.
	HeadersFile string `yaml:"headers-file" env:"HEADERS_FILE" doc:"A file of headers, one Name: value a line (blank lines and # comments skipped), read at start: the secret form of headers." rule:"not with headers; a readable file of Name: value lines"`
	// TLS secures the connection to the receiver; off: plaintext.
	TLS secure.TLS `yaml:"tls" envPrefix:"TLS_" doc:"TLS to the OTLP receiver; off: plaintext."`
	// ServiceName is the resource's service.name.
	ServiceName string `yaml:"service-name" env:"SERVICE_NAME" doc:"The resource attribute service.name of every exported metric." rule:"required"`
	// ServiceInstanceID is the resource's service.instance.id; empty:
	// the host name (a pod's name in Kubernetes).
	ServiceInstanceID string `yaml:"service-instance-id" env:"SERVICE_INSTANCE_ID" doc:"The resource attribute service.instance.id, unique per process; empty: the host name (a pod's name in Kubernetes)." rule:"-"`
	// ResourceAttributes are more resource attributes
	// (deployment.environment.name, k8s.namespace.name, ...).
	ResourceAttributes map[string]string `yaml:"resource-attributes" env:"RESOURCE_ATTRIBUTES" doc:"More resource attributes of every exported metric (deployment.environment.name, k8s.namespace.name, ...); service.name and service.instance.id have keys of their own." rule:"not service.name, service.instance.id or service.version"`
}

// DefaultConfig returns the defaults: off; gRPC; an export every 30 s,
// each bounded by 10 s; service.name cdc-outbox.
func DefaultConfig() Config {
	return Config{Protocol: ProtocolGRPC, Interval: 30 * time.Second, Timeout: 10 * time.Second, ServiceName: "cdc-outbox"}
}

// Enabled reports whether run exports with OTLP (an endpoint is set).
func (c *Config) Enabled() bool { return c.Endpoint != "" }

// Validate returns every problem, joined, each naming its setting
// (metrics.otlp.KEY). The settings are checked whether or not an endpoint
// is set; headers-file and the TLS files are read.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf(Prefix+".%s: "+format, append([]any{key}, a...)...))
	}
	if c.Endpoint != "" {
		if host, port, err := net.SplitHostPort(c.Endpoint); err != nil || host == "" || port == "" {
			bad("endpoint", "%q: want host:port (e.g. otel-collector:4317; no scheme, no path)", c.Endpoint)
		}
	}
	if c.Protocol != ProtocolGRPC && c.Protocol != ProtocolHTTP {
		bad("protocol", "%q: want grpc or http", c.Protocol)
	}
	if c.Interval < time.Second {
		bad("interval", "%s: want at least 1s", c.Interval)
	}
	switch {
	case c.Timeout < 100*time.Millisecond:
		bad("timeout", "%s: want at least 100ms", c.Timeout)
	case c.Interval >= time.Second && c.Timeout > c.Interval:
		bad("timeout", "%s: want at most metrics.otlp.interval (%s)", c.Timeout, c.Interval)
	}
	if len(c.Headers) > 0 && c.HeadersFile != "" {
		bad("headers", "set either metrics.otlp.headers or metrics.otlp.headers-file, not both")
	}
	for k := range c.Headers {
		if !validHeaderName(k) {
			bad("headers", "%q: not a header name (letters, digits and - _ . only)", k)
		}
	}
	if c.HeadersFile != "" {
		if _, err := readHeaders(c.HeadersFile); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.TLS.Validate(Prefix + ".tls"); err != nil {
		errs = append(errs, err)
	}
	if c.ServiceName == "" {
		bad("service-name", "required (the resource's service.name; default cdc-outbox)")
	}
	for _, k := range []string{"service.name", "service.instance.id", "service.version"} {
		if _, ok := c.ResourceAttributes[k]; ok {
			bad("resource-attributes", "%s: set by metrics.otlp.service-name, metrics.otlp.service-instance-id and the binary's version: remove it here", k)
		}
	}
	return errors.Join(errs...)
}

// Redacted returns a copy safe to print: the header values masked.
func (c Config) Redacted() Config {
	if len(c.Headers) > 0 {
		h := maps.Clone(c.Headers)
		for k := range h {
			h[k] = "***"
		}
		c.Headers = h
	}
	return c
}

// headers returns the headers to send: Headers, or those of HeadersFile.
func (c *Config) headers() (map[string]string, error) {
	if c.HeadersFile == "" {
		return c.Headers, nil
	}
	return readHeaders(c.HeadersFile)
}

// readHeaders reads a headers file: one "Name: value" a line, blank
// lines and lines starting with # skipped. The errors name the setting
// and the line number, never a value.
func readHeaders(path string) (map[string]string, error) {
	const setting = Prefix + ".headers-file"
	if _, _, err := secure.ReadSecret(path, setting); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	defer f.Close()
	h := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !validHeaderName(name) || value == "" {
			return nil, fmt.Errorf("%s: %s line %d: %w", setting, path, n, ErrHeadersFile)
		}
		h[name] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	return h, nil
}

// validHeaderName reports whether s is a header name (an HTTP token
// restricted to letters, digits, '-', '_' and '.'; gRPC metadata keys
// are lower-cased by the exporter).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
