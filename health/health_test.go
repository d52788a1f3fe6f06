package health

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestStale(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name   string
		last   time.Time
		period time.Duration
		want   bool
	}{
		{"just ticked", now, time.Second, false},
		{"exactly one period ago", now.Add(-time.Second), time.Second, false},
		{"one period and a nanosecond", now.Add(-time.Second - 1), time.Second, true},
		{"paused", time.Time{}, time.Second, false},
		{"future tick (clock step)", now.Add(time.Minute), time.Second, false},
	} {
		if got := Stale(c.last, c.period, now); got != c.want {
			t.Errorf("%s: Stale = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	if l := r.Check(time.Now()); !l.Alive || len(l.Tickers) != 0 {
		t.Fatalf("empty registry: %+v, want alive with no tickers", l)
	}
	reader := r.Ticker("reader", 10*time.Second)
	sup := r.Ticker("supervisor", time.Minute)
	later := time.Now().Add(30 * time.Second)
	l := r.Check(later)
	if l.Alive {
		t.Fatalf("reader 30 s without a tick (allowed 10 s): alive")
	}
	if len(l.Tickers) != 2 || l.Tickers[0].Name != "reader" || !l.Tickers[0].Stale || l.Tickers[1].Stale {
		t.Fatalf("tickers %+v, want reader stale, supervisor not, sorted", l.Tickers)
	}
	if reason := l.Reason(); !strings.Contains(reason, "reader last ticked 30") || !strings.Contains(reason, "allowed 10s") || strings.Contains(reason, "supervisor") {
		t.Errorf("reason %q", reason)
	}
	reader.Pause()
	if l := r.Check(later); !l.Alive || !l.Tickers[0].Paused {
		t.Errorf("paused reader: %+v, want alive", l)
	}
	reader.Tick()
	if l := r.Check(time.Now().Add(11 * time.Second)); l.Alive {
		t.Errorf("reader ticked again and then 11 s silent: alive")
	}
	// Taking the name again (a restarted pipeline) is the same ticker, ticked.
	if again := r.Ticker("reader", 20*time.Second); again != reader {
		t.Errorf("Ticker(reader) again returned another ticker")
	}
	if l := r.Check(time.Now().Add(15 * time.Second)); !l.Alive {
		t.Errorf("new period 20 s, 15 s later: %s", l.Reason())
	}
	r.Remove("reader")
	sup.Tick()
	if l := r.Check(time.Now().Add(time.Hour - time.Second)); len(l.Tickers) != 1 {
		t.Errorf("after Remove: %+v", l.Tickers)
	}
}

func TestPhase(t *testing.T) {
	p := NewPhase("connecting to the source")
	r := p.Readiness()
	if r.Ready || r.State != Starting || r.Reason != "connecting to the source" || r.Since.IsZero() {
		t.Fatalf("new phase: %+v", r)
	}
	since := r.Since
	p.Set(Starting, "checking the server")
	if r := p.Readiness(); r.Since != since || r.Reason != "checking the server" {
		t.Errorf("same state, new reason: %+v, want since kept", r)
	}
	for _, c := range []struct {
		s     State
		ready bool
		name  string
	}{{Starting, false, "starting"}, {Streaming, true, "streaming"}, {Standby, true, "standby"}, {Stopping, false, "stopping"},
		{Degraded, false, "degraded"}, {Failed, false, "failed"}} {
		if Ready(c.s) != c.ready || c.s.String() != c.name {
			t.Errorf("%v: Ready %v name %q", c.s, Ready(c.s), c.s.String())
		}
	}
}

// The instance's readiness from its sources' (the table "Health model"
// of docs/operations.md): ready only when every source streams or stands
// by; the state and reason are the worst source's.
func TestReadinessOf(t *testing.T) {
	at := time.Unix(1000, 0)
	r := func(s State, reason string) Readiness {
		return Readiness{Ready: Ready(s), State: s, Reason: reason, Since: at}
	}
	for _, c := range []struct {
		name    string
		sources map[string]Readiness
		ready   bool
		state   State
		reason  string
	}{
		{"no source", nil, false, Starting, "no source configured yet"},
		{"streaming", map[string]Readiness{"a": r(Streaming, "")}, true, Streaming, ""},
		{"healthy standby", map[string]Readiness{"a": r(Standby, "held by x")}, true, Standby, "held by x"},
		{"streams one, stands by for another", map[string]Readiness{"a": r(Standby, "held by x"), "b": r(Streaming, "")}, true, Streaming, ""},
		{"connecting", map[string]Readiness{"a": r(Starting, "connecting")}, false, Starting, "connecting"},
		{"restarting", map[string]Readiness{"a": r(Degraded, "restarting in 2s after: EOF")}, false, Degraded, "restarting in 2s after: EOF"},
		{"standby without Redis", map[string]Readiness{"a": r(Degraded, "Redis unreachable")}, false, Degraded, "Redis unreachable"},
		{"one source failed", map[string]Readiness{"a": r(Streaming, ""), "b": r(Failed, "stopped: boom")}, false, Failed, "source b: stopped: boom"},
		{"stopping", map[string]Readiness{"a": r(Stopping, "signal received"), "b": r(Degraded, "x")}, false, Stopping, "source a: signal received"},
		{"ties by name", map[string]Readiness{"b": r(Degraded, "b"), "a": r(Degraded, "a")}, false, Degraded, "source a: a"},
	} {
		got := ReadinessOf(c.sources)
		if got.Ready != c.ready || got.State != c.state || got.Reason != c.reason {
			t.Errorf("%s: %+v, want ready %v state %v reason %q", c.name, got, c.ready, c.state, c.reason)
		}
	}
}

// Sources: per-source phases, the instance's readiness, the state
// metric; Failed is final.
func TestSources(t *testing.T) {
	s := NewSources("a", "b")
	s.Source("a").Set(Streaming, "")
	s.Source("b").Set(Standby, "held by x")
	if r := s.Readiness(); !r.Ready || r.State != Streaming || len(r.Sources) != 2 {
		t.Fatalf("readiness %+v", r)
	}
	s.Source("b").Set(Failed, "stopped: boom")
	s.Source("b").Set(Standby, "later")
	if r := s.Readiness(); r.Ready || r.State != Failed {
		t.Fatalf("after a failure: %+v", r)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	n, err := testutil.GatherAndCount(reg, "cdc_outbox_source_state")
	if err != nil || n != 2*len(States) {
		t.Fatalf("cdc_outbox_source_state series: %d %v", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue()
			switch mf.GetName() {
			case "cdc_outbox_ready":
				if v != 0 {
					t.Errorf("cdc_outbox_ready %v, want 0", v)
				}
			case "cdc_outbox_source_state":
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				want := (l["source"] == "a" && l["state"] == "streaming") || (l["source"] == "b" && l["state"] == "failed")
				if (v == 1) != want {
					t.Errorf("cdc_outbox_source_state%v = %v", l, v)
				}
			}
		}
	}
}

func get(t *testing.T, srv *httptest.Server, path string) (int, map[string]any) {
	t.Helper()
	res, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var v map[string]any
	if res.Header.Get("Content-Type") == "application/json" {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v: %s", path, err, b)
		}
	}
	return res.StatusCode, v
}

func TestEndpoints(t *testing.T) {
	reg := NewRegistry()
	phase := NewPhase("connecting")
	m := NewMetrics(BuildInfo{Version: "1.2.3", Commit: "abc", Date: "2026-01-01T00:00:00Z"})
	m.Source("default")
	statusErr := errors.New("redis: connection refused")
	var fail bool
	mux, err := NewMux(Endpoints{Live: reg, Ready: phase, Metrics: m.Handler(),
		Status: func(ctx context.Context) (any, error) {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("status ctx without deadline")
			}
			if fail {
				return nil, statusErr
			}
			return map[string]any{"lag_bytes": 0}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// Ready only once streaming; the reason is in the body.
	code, body := get(t, srv, "/readyz")
	if code != http.StatusServiceUnavailable || body["state"] != "starting" || body["reason"] != "connecting" || body["ready"] != false {
		t.Errorf("/readyz while starting: %d %v", code, body)
	}
	phase.Set(Streaming, "")
	if code, body := get(t, srv, "/readyz"); code != http.StatusOK || body["state"] != "streaming" {
		t.Errorf("/readyz while streaming: %d %v", code, body)
	}
	phase.Set(Starting, "restarting in 2s after: dial tcp: connection refused")
	if code, body := get(t, srv, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body["reason"].(string), "connection refused") {
		t.Errorf("/readyz while restarting: %d %v", code, body)
	}

	// Alive while the tickers tick; a stale one makes it 503 naming it.
	if code, body := get(t, srv, "/healthz"); code != http.StatusOK || body["alive"] != true {
		t.Errorf("/healthz without tickers: %d %v", code, body)
	}
	tk := reg.Ticker("sink", time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body = get(t, srv, "/healthz")
		if code != http.StatusOK || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusServiceUnavailable || body["alive"] != false || !strings.Contains(body["reason"].(string), "sink last ticked") {
		t.Errorf("/healthz with a stale ticker: %d %v", code, body)
	}
	tk.Pause()
	if code, _ := get(t, srv, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with the ticker paused: %d", code)
	}

	if code, body := get(t, srv, "/status"); code != http.StatusOK || body["lag_bytes"] != float64(0) {
		t.Errorf("/status: %d %v", code, body)
	}
	fail = true
	if code, body := get(t, srv, "/status"); code != http.StatusServiceUnavailable || body["error"] != statusErr.Error() {
		t.Errorf("/status failing: %d %v", code, body)
	}

	res, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`cdc_outbox_pipeline_restarts_total{source="default"} 0`, `cdc_outbox_build_info{commit="abc",date="2026-01-01T00:00:00Z"`, "go_goroutines"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	if res, err := srv.Client().Post(srv.URL+"/healthz", "text/plain", nil); err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %v %v, want 405", res.StatusCode, err)
	}
	if _, err := NewMux(Endpoints{Live: reg}); !errors.Is(err, ErrNoChecker) {
		t.Errorf("NewMux without Ready: %v", err)
	}
}

func TestProbe(t *testing.T) {
	reg := NewRegistry()
	mux, err := NewMux(Endpoints{Live: reg, Ready: NewPhase("starting")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	if err := Probe(ctx, srv.Client(), srv.URL+"/healthz"); err != nil {
		t.Errorf("probe of a healthy process: %v", err)
	}
	err = Probe(ctx, srv.Client(), srv.URL+"/readyz")
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "starting") {
		t.Errorf("probe of /readyz while starting: %v", err)
	}
	srv.Close()
	if err := Probe(ctx, http.DefaultClient, srv.URL+"/healthz"); err == nil {
		t.Errorf("probe of a closed server: no error")
	}
}
