package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// LivenessChecker reports the liveness at a moment (*Registry).
type LivenessChecker interface {
	Check(now time.Time) Liveness
}

// ReadinessReporter reports the current readiness (*Phase).
type ReadinessReporter interface {
	Readiness() Readiness
}

// StatusFunc returns the value /status serves as JSON (run: the status
// document of "cdc-outbox status --json"). ctx ends with the request or
// after Endpoints.StatusTimeout.
type StatusFunc func(ctx context.Context) (any, error)

// Endpoints are the handlers Mount puts on a mux. Live and Ready are
// required; Status and Metrics are optional (their routes are left out
// when nil).
type Endpoints struct {
	Live  LivenessChecker
	Ready ReadinessReporter
	// Status serves /status.
	Status StatusFunc
	// StatusTimeout bounds one StatusFunc call; 0 means 10 s.
	StatusTimeout time.Duration
	// Metrics serves /metrics (Metrics.Handler).
	Metrics http.Handler
}

// ErrNoChecker is returned by Mount when Live or Ready is nil.
var ErrNoChecker = errors.New("health: Endpoints.Live and Endpoints.Ready are required")

// Mount registers GET (and HEAD) /healthz, /readyz, /status and /metrics
// on mux. It panics, as http.ServeMux does, if a route is registered
// twice.
func (e Endpoints) Mount(mux *http.ServeMux) error {
	if e.Live == nil || e.Ready == nil {
		return ErrNoChecker
	}
	mux.HandleFunc("GET /healthz", e.healthz)
	mux.HandleFunc("GET /readyz", e.readyz)
	if e.Status != nil {
		mux.HandleFunc("GET /status", e.status)
	}
	if e.Metrics != nil {
		mux.Handle("GET /metrics", e.Metrics)
	}
	return nil
}

// NewMux returns a mux with e mounted.
func NewMux(e Endpoints) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	if err := e.Mount(mux); err != nil {
		return nil, err
	}
	return mux, nil
}

func (e Endpoints) healthz(w http.ResponseWriter, _ *http.Request) {
	l := e.Live.Check(time.Now())
	code := http.StatusOK
	body := struct {
		Liveness
		Reason string `json:"reason,omitempty"`
	}{l, l.Reason()}
	if !l.Alive {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, body)
}

func (e Endpoints) readyz(w http.ResponseWriter, _ *http.Request) {
	r := e.Ready.Readiness()
	code := http.StatusOK
	if !r.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, r)
}

func (e Endpoints) status(w http.ResponseWriter, req *http.Request) {
	timeout := e.StatusTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	v, err := e.Status(ctx)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"error": "health: encoding the response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
