package health

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is a source's phase (and the instance's, the worst of its
// sources'), as /readyz reports it. The table of docs/operations.md
// ("Health model") is the one of TestReadinessOf.
type State int

// States. The zero value is Starting.
const (
	// Starting: connecting, checking the server, resolving the start
	// position (the first attempt, or a new lease term).
	Starting State = iota
	// Streaming: the pipeline is reading the binlog and publishing.
	Streaming
	// Standby: a healthy standby (package ha): Redis answers, and another
	// instance holds the source's lease.
	Standby
	// Stopping: SIGINT/SIGTERM received, flushing and writing the
	// checkpoint.
	Stopping
	// Degraded: the source should publish here but does not: its pipeline
	// is restarting after a retryable error (the database, Kafka or Redis
	// unreachable, a missing topic), or, as a standby, Redis has not
	// answered its acquisitions for longer than ha.lease-ttl.
	Degraded
	// Failed: the source stopped for good on this instance (a fatal error;
	// the other sources go on): only a restart with a fixed configuration
	// or server helps.
	Failed
)

// String returns the state's name as /readyz shows it.
func (s State) String() string {
	switch s {
	case Starting:
		return "starting"
	case Streaming:
		return "streaming"
	case Standby:
		return "standby"
	case Stopping:
		return "stopping"
	case Degraded:
		return "degraded"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// States lists every State, for the per-source state metric.
var States = []State{Starting, Streaming, Standby, Stopping, Degraded, Failed}

// MarshalText makes a State a JSON string.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Ready decides readiness from the state: Streaming and Standby are ready,
// the others are not. A standby is ready because it is what it should be:
// with two replicas of which one streams and one waits, a rolling update
// or a node drain (PodDisruptionBudget) must be able to count the waiting
// one as available.
func Ready(s State) bool { return s == Streaming || s == Standby }

// severity orders the states for the instance's: the worst source's.
func severity(s State) int {
	switch s {
	case Standby:
		return 0
	case Streaming:
		return 1
	case Starting:
		return 2
	case Degraded:
		return 3
	case Stopping:
		return 4
	case Failed:
		return 5
	}
	return 6
}

// Readiness is the body of /readyz.
type Readiness struct {
	Ready bool  `json:"ready"`
	State State `json:"state"`
	// Reason says why the state is what it is, e.g. "restarting in 4s
	// after: dial tcp 127.0.0.1:9092: connection refused"; may be empty
	// when ready. For the instance: the worst source's, prefixed with
	// its name when there are several.
	Reason string `json:"reason,omitempty"`
	// Since is when the state was entered.
	Since time.Time `json:"since"`
	// Sources: each source's own readiness (the instance's only).
	Sources map[string]Readiness `json:"sources,omitempty"`
}

// ReadinessOf is the instance's readiness from its sources': ready when
// every source is (Streaming or Standby); the state is the worst
// source's (Failed, Stopping, Degraded, Starting, Streaming, Standby: an
// instance that streams one source and stands by for another is
// Streaming), with its reason and since. No source: Starting.
func ReadinessOf(sources map[string]Readiness) Readiness {
	out := Readiness{Ready: len(sources) > 0, State: Starting, Reason: "no source configured yet", Sources: sources}
	worst := ""
	for name, r := range sources {
		out.Ready = out.Ready && Ready(r.State)
		if worst == "" || severity(r.State) > severity(out.State) || (severity(r.State) == severity(out.State) && name < worst) {
			worst = name
			out.State, out.Reason, out.Since = r.State, r.Reason, r.Since
		}
	}
	if len(sources) > 1 && out.Reason != "" {
		out.Reason = "source " + worst + ": " + out.Reason
	}
	return out
}

// Phase holds one source's current State and its reason. Safe for
// concurrent use; NewPhase starts it at Starting.
type Phase struct {
	mu     sync.Mutex
	state  State
	reason string
	since  time.Time
}

// NewPhase returns a Phase in Starting with the reason given.
func NewPhase(reason string) *Phase {
	return &Phase{state: Starting, reason: reason, since: time.Now()}
}

// Set moves to state s with reason. Since changes only when the state
// does: a new reason for the same state keeps it. Failed is final: a
// source that stopped for good stays failed.
func (p *Phase) Set(s State, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == Failed {
		return
	}
	if s != p.state {
		p.since = time.Now()
	}
	p.state, p.reason = s, reason
}

// State returns the current state.
func (p *Phase) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Readiness returns the current state as /readyz reports it.
func (p *Phase) Readiness() Readiness {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Readiness{Ready: Ready(p.state), State: p.state, Reason: p.reason, Since: p.since.UTC()}
}

// Sources is the instance's health: one Phase per source, the instance's
// readiness the worst of theirs (ReadinessOf). It implements
// ReadinessReporter (/readyz) and prometheus.Collector:
//
//	cdc_outbox_source_state{source,state}   1 for the source's current state, 0 for the others
//	cdc_outbox_ready                        1 while /readyz answers 200
//
// Safe for concurrent use.
type Sources struct {
	mu     sync.Mutex
	phases map[string]*Phase
	state  *prometheus.Desc
	ready  *prometheus.Desc
}

// NewSources returns the health of the named sources, each Starting.
func NewSources(names ...string) *Sources {
	s := &Sources{phases: map[string]*Phase{},
		state: prometheus.NewDesc("cdc_outbox_source_state", "1 for the source's current state on this instance (starting, streaming, standby, stopping, degraded, failed; docs/operations.md, Health model), 0 for the others.", []string{"source", "state"}, nil),
		ready: prometheus.NewDesc("cdc_outbox_ready", "1 while /readyz answers 200 (every source streaming or a healthy standby), 0 otherwise.", nil, nil)}
	for _, n := range names {
		s.phases[n] = NewPhase("connecting to the source")
	}
	return s
}

// Source returns the named source's Phase (added, Starting, when new).
func (s *Sources) Source(name string) *Phase {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.phases[name]
	if !ok {
		p = NewPhase("connecting to the source")
		s.phases[name] = p
	}
	return p
}

// Readiness implements ReadinessReporter: ReadinessOf the sources.
func (s *Sources) Readiness() Readiness {
	s.mu.Lock()
	rs := make(map[string]Readiness, len(s.phases))
	for n, p := range s.phases {
		rs[n] = p.Readiness()
	}
	s.mu.Unlock()
	return ReadinessOf(rs)
}

// Describe implements prometheus.Collector.
func (s *Sources) Describe(ch chan<- *prometheus.Desc) { ch <- s.state; ch <- s.ready }

// Collect implements prometheus.Collector.
func (s *Sources) Collect(ch chan<- prometheus.Metric) {
	r := s.Readiness()
	for name, sr := range r.Sources {
		for _, st := range States {
			v := 0.0
			if st == sr.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(s.state, prometheus.GaugeValue, v, name, st.String())
		}
	}
	v := 0.0
	if r.Ready {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(s.ready, prometheus.GaugeValue, v)
}
