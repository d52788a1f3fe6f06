//go:build integration

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
)

// otelCollector returns the OpenTelemetry Collector of scripts/dev-stack.sh
// up-otel (CDC_OTEL_*: the directory of its file exporter's output, its
// OTLP gRPC and HTTP addresses); the test skips without one, and fails
// under CDC_REQUIRE_OTEL (make test-otel: CI must run it).
func otelCollector(t *testing.T) (dir, grpcAddr, httpAddr string) {
	t.Helper()
	dir, grpcAddr, httpAddr = os.Getenv("CDC_OTEL_DIR"), os.Getenv("CDC_OTEL_GRPC_ADDR"), os.Getenv("CDC_OTEL_HTTP_ADDR")
	if dir == "" || grpcAddr == "" || httpAddr == "" {
		if os.Getenv("CDC_REQUIRE_OTEL") != "" {
			t.Fatal("CDC_REQUIRE_OTEL is set but CDC_OTEL_DIR, CDC_OTEL_GRPC_ADDR or CDC_OTEL_HTTP_ADDR is not: start the collector with scripts/dev-stack.sh up-otel")
		}
		t.Skip("no OpenTelemetry Collector (scripts/dev-stack.sh up-otel; make test-otel)")
	}
	return dir, grpcAddr, httpAddr
}

// The collector's file exporter writes each request it receives as one line
// of OTLP JSON (ExportMetricsServiceRequest, protobuf's JSON mapping): the
// part of it the test reads.
type (
	otlpMetricsLine struct {
		ResourceMetrics []struct {
			Resource struct {
				Attributes []otlpAttr `json:"attributes"`
			} `json:"resource"`
			ScopeMetrics []struct {
				Metrics []otlpMetric `json:"metrics"`
			} `json:"scopeMetrics"`
		} `json:"resourceMetrics"`
	}
	otlpMetric struct {
		Name string `json:"name"`
		Sum  *struct {
			DataPoints             []otlpPoint `json:"dataPoints"`
			AggregationTemporality int         `json:"aggregationTemporality"`
			IsMonotonic            bool        `json:"isMonotonic"`
		} `json:"sum"`
		Gauge *struct {
			DataPoints []otlpPoint `json:"dataPoints"`
		} `json:"gauge"`
		Histogram *struct {
			DataPoints []struct {
				Attributes []otlpAttr `json:"attributes"`
				Count      string     `json:"count"`
			} `json:"dataPoints"`
		} `json:"histogram"`
		// A Prometheus histogram with native buckets arrives as an
		// exponential histogram (the bridge converts it).
		ExponentialHistogram *struct {
			DataPoints []struct {
				Attributes []otlpAttr `json:"attributes"`
				Count      string     `json:"count"`
			} `json:"dataPoints"`
		} `json:"exponentialHistogram"`
	}
	otlpAttr struct {
		Key   string `json:"key"`
		Value struct {
			StringValue string `json:"stringValue"`
		} `json:"value"`
	}
	otlpPoint struct {
		Attributes []otlpAttr `json:"attributes"`
		AsDouble   any        `json:"asDouble"` // a number, or "NaN"/"Infinity"
	}
)

func otlpAttrs(as []otlpAttr) map[string]string {
	m := map[string]string{}
	for _, a := range as {
		m[a.Key] = a.Value.StringValue
	}
	return m
}

// otlpExport is one export of one process, as the collector wrote it.
type otlpExport struct {
	resource map[string]string
	metrics  map[string]otlpMetric
}

// otlpExports reads the collector's metrics file: the exports whose
// resource has service.instance.id instance, in the order received. A
// line being written (no newline yet) is left for the next read.
func otlpExports(t *testing.T, path, instance string) []otlpExport {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []otlpExport
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var l otlpMetricsLine
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("%s: a line that is not OTLP JSON: %v", path, err)
		}
		for _, rm := range l.ResourceMetrics {
			res := otlpAttrs(rm.Resource.Attributes)
			if res["service.instance.id"] != instance {
				continue
			}
			x := otlpExport{resource: res, metrics: map[string]otlpMetric{}}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					x.metrics[m.Name] = m
				}
			}
			out = append(out, x)
		}
	}
}

// sumValue is the value of the point of counter name whose attributes
// include want, -1 when the export has none.
func (x otlpExport) sumValue(name string, want map[string]string) float64 {
	m, ok := x.metrics[name]
	if !ok || m.Sum == nil {
		return -1
	}
next:
	for _, p := range m.Sum.DataPoints {
		got := otlpAttrs(p.Attributes)
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		if v, ok := p.AsDouble.(float64); ok {
			return v
		}
	}
	return -1
}

// run exports its metrics with OTLP (metrics.otlp) to a real OpenTelemetry
// Collector, beside /metrics, over gRPC and over HTTP with an export every
// second: the collector receives cdc_outbox_records_produced_total equal
// to the rows written, as a cumulative monotonic sum with the Prometheus
// labels as attributes, from a resource naming the process (service.name,
// service.version, service.instance.id, the configured attributes), and
// cdc_outbox_otlp_exports_total{result="ok"} counts the exports. With an
// interval of an hour, nothing is exported until SIGTERM, which exports
// once.
func TestOTLPMetrics(t *testing.T) {
	dir, grpcAddr, httpAddr := otelCollector(t)
	file := filepath.Join(dir, "metrics.jsonl")
	config := func(e *env, protocol, addr, interval string) string {
		return fmt.Sprintf(`metrics:
  otlp:
    endpoint: %s
    protocol: %s
    interval: %s
    timeout: 1s
    headers: {x-cdc-outbox-test: %s}
    service-instance-id: %s
    resource-attributes: {deployment.environment.name: integration}
`, addr, protocol, interval, e.name, e.name)
	}
	for _, c := range []struct{ protocol, addr string }{{"grpc", grpcAddr}, {"http", httpAddr}} {
		t.Run(c.protocol, func(t *testing.T) {
			e := newEnv(t)
			e.extra = config(e, c.protocol, c.addr, "1s")
			p := e.start()
			defer p.stop(t, 30*time.Second)
			plan := workload.Generate(41, 0, 10, 200, 1, 10, 100)
			if err := produce(e.writer(), plan); err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{"source": "default", "topic": e.topic, "table": mysqlDB + "." + e.outbox}
			const produced = "cdc_outbox_records_produced_total"
			var last otlpExport
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
				xs := otlpExports(t, file, e.name)
				if len(xs) > 0 {
					last = xs[len(xs)-1]
					if last.sumValue(produced, labels) == float64(plan.Total) {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("the collector never received %s%v = %d from service.instance.id %s (%d exports; last: %v)", produced, labels, plan.Total, e.name, len(xs), last.sumValue(produced, labels))
				}
			}
			m := last.metrics[produced]
			if !m.Sum.IsMonotonic || m.Sum.AggregationTemporality != 2 {
				t.Errorf("%s: monotonic %v, temporality %d; want a cumulative (2) monotonic sum", produced, m.Sum.IsMonotonic, m.Sum.AggregationTemporality)
			}
			for k, want := range map[string]string{"service.name": "cdc-outbox", "service.instance.id": e.name, "deployment.environment.name": "integration"} {
				if got := last.resource[k]; got != want {
					t.Errorf("resource %s = %q, want %q (resource %v)", k, got, want, last.resource)
				}
			}
			if last.resource["service.version"] == "" {
				t.Errorf("resource without service.version: %v", last.resource)
			}
			// The latency objective's histogram (issue 35): a point for the
			// source with every transaction published so far counted.
			const latency = "cdc_outbox_commit_to_ack_seconds"
			var counted int64
			if h := last.metrics[latency].ExponentialHistogram; h != nil {
				for _, dp := range h.DataPoints {
					if otlpAttrs(dp.Attributes)["source"] == "default" {
						counted, _ = strconv.ParseInt(dp.Count, 10, 64)
					}
				}
			}
			if counted < 1 {
				m := last.metrics[latency]
				t.Errorf("the export has no %s{source=\"default\"} observations (exponential histogram %+v, histogram %+v)", latency, m.ExponentialHistogram, m.Histogram)
			}
			for _, name := range []string{"cdc_outbox_build_info", "cdc_outbox_source_connected", "cdc_outbox_produce_seconds"} {
				if _, ok := last.metrics[name]; !ok {
					t.Errorf("the export lacks %s", name)
				}
			}
			// Counted by the export after it; the exports go on every second.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				xs := otlpExports(t, file, e.name)
				if xs[len(xs)-1].sumValue("cdc_outbox_otlp_exports_total", map[string]string{"result": "ok"}) >= 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("cdc_outbox_otlp_exports_total{result=\"ok\"} never reached 1 in %d exports", len(xs))
				}
			}
		})
	}
	t.Run("final", func(t *testing.T) {
		e := newEnv(t)
		e.extra = config(e, "http", httpAddr, "1h")
		p := e.start()
		if n := len(otlpExports(t, file, e.name)); n != 0 {
			t.Fatalf("%d exports before the first interval (1h) ended", n)
		}
		if code := p.stop(t, 30*time.Second); code != 0 {
			t.Fatalf("publisher exit %d after SIGTERM, want 0", code)
		}
		// The collector's file exporter flushes every 100 ms.
		var xs []otlpExport
		for deadline := time.Now().Add(10 * time.Second); len(xs) == 0; time.Sleep(100 * time.Millisecond) {
			if xs = otlpExports(t, file, e.name); time.Now().After(deadline) {
				t.Fatal("no export at SIGTERM")
			}
		}
		if len(xs) != 1 {
			t.Fatalf("%d exports, want the final one", len(xs))
		}
		if _, ok := xs[0].metrics["cdc_outbox_build_info"]; !ok {
			t.Fatalf("the final export lacks cdc_outbox_build_info")
		}
	})
}
