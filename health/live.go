package health

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Ticker is one loop's liveness: the loop calls Tick each time round. It
// is stale when its last tick is older than its period. Safe for
// concurrent use; the zero value is not usable (take one from
// Registry.Ticker).
type Ticker struct {
	name   string
	period time.Duration
	// last is the Unix time in nanoseconds of the last Tick; 0 while paused.
	last atomic.Int64
}

// Tick records that the loop turned now.
func (t *Ticker) Tick() { t.last.Store(time.Now().UnixNano()) }

// Pause exempts the loop from the check until its next Tick: for a loop
// that is waiting on purpose (the supervisor's backoff, a pipeline that
// ended and restarts).
func (t *Ticker) Pause() { t.last.Store(0) }

// Name is the name the Ticker was registered under.
func (t *Ticker) Name() string { return t.name }

// Registry holds the named Tickers of a process. Safe for concurrent use.
type Registry struct {
	mu      sync.Mutex
	tickers map[string]*Ticker
}

// NewRegistry returns an empty Registry: healthy until a Ticker is taken.
func NewRegistry() *Registry { return &Registry{tickers: map[string]*Ticker{}} }

// Ticker returns the Ticker called name, registering it with the allowed
// period (> 0) between two ticks; it starts ticked now. Taking an
// existing name again returns the same Ticker with the new period and
// ticks it (a pipeline that restarts takes its loops' Tickers again).
func (r *Registry) Ticker(name string, period time.Duration) *Ticker {
	if period <= 0 {
		panic(fmt.Sprintf("health: ticker %q: period %v, want > 0", name, period))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tickers[name]
	if !ok {
		t = &Ticker{name: name}
		r.tickers[name] = t
	}
	t.period = period
	t.Tick()
	return t
}

// Remove unregisters the Ticker called name (a loop that ended for good).
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tickers, name)
}

// TickerState is one Ticker's state at a moment, as /healthz shows it.
type TickerState struct {
	Name string `json:"name"`
	// Last is the last tick; zero while paused.
	Last time.Time `json:"last"`
	// Period is the allowed time between two ticks.
	Period time.Duration `json:"-"`
	// AgeSeconds is the time since Last at the moment of the check; 0 while
	// paused. PeriodSeconds is Period in seconds.
	AgeSeconds    float64 `json:"age_seconds"`
	PeriodSeconds float64 `json:"period_seconds"`
	Paused        bool    `json:"paused,omitempty"`
	Stale         bool    `json:"stale"`
}

// Liveness is the body of /healthz: Alive is false when any Ticker is
// stale; Tickers are sorted by name.
type Liveness struct {
	Alive   bool          `json:"alive"`
	Tickers []TickerState `json:"tickers"`
}

// Reason names the stale Tickers, e.g. "binlog-reader last ticked 45s ago
// (allowed 30s)"; empty when alive.
func (l Liveness) Reason() string {
	var parts []string
	for _, t := range l.Tickers {
		if t.Stale {
			parts = append(parts, fmt.Sprintf("%s last ticked %s ago (allowed %s)", t.Name,
				time.Duration(t.AgeSeconds*float64(time.Second)).Round(time.Millisecond), t.Period))
		}
	}
	return strings.Join(parts, "; ")
}

// Stale decides whether a ticker whose last tick was at last (zero:
// paused) with the allowed period is stale at now. A tick exactly one
// period ago is not stale.
func Stale(last time.Time, period time.Duration, now time.Time) bool {
	if last.IsZero() {
		return false
	}
	return now.Sub(last) > period
}

// Check returns every Ticker's state at now.
func (r *Registry) Check(now time.Time) Liveness {
	r.mu.Lock()
	states := make([]TickerState, 0, len(r.tickers))
	for _, t := range r.tickers {
		st := TickerState{Name: t.name, Period: t.period, PeriodSeconds: t.period.Seconds()}
		if ns := t.last.Load(); ns == 0 {
			st.Paused = true
		} else {
			st.Last = time.Unix(0, ns).UTC()
			st.AgeSeconds = max(now.Sub(st.Last), 0).Seconds()
			st.Stale = Stale(st.Last, t.period, now)
		}
		states = append(states, st)
	}
	r.mu.Unlock()
	slices.SortFunc(states, func(a, b TickerState) int { return strings.Compare(a.Name, b.Name) })
	l := Liveness{Alive: true, Tickers: states}
	for _, st := range states {
		if st.Stale {
			l.Alive = false
		}
	}
	return l
}
