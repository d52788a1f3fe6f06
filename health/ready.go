package health

import (
	"fmt"
	"sync"
	"time"
)

// State is the publisher's phase, as /readyz reports it.
type State int

// States. The zero value is Starting.
const (
	// Starting: connecting, checking the server, resolving the start
	// position, or restarting the pipeline after a retryable error.
	Starting State = iota
	// Streaming: the pipeline is reading the binlog and publishing.
	Streaming
	// Standby: a healthy replica waiting for the lease of another one
	// (high availability, once it exists; nothing sets it yet).
	Standby
	// Stopping: SIGINT/SIGTERM received, flushing and writing the
	// checkpoint.
	Stopping
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
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// MarshalText makes a State a JSON string.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Ready decides readiness from the state: Streaming and Standby are ready,
// Starting and Stopping are not. A standby is ready because it is what it
// should be: with two replicas of which one streams and one waits, a
// rolling update or a node drain (PodDisruptionBudget) must be able to
// count the waiting one as available.
func Ready(s State) bool { return s == Streaming || s == Standby }

// Readiness is the body of /readyz.
type Readiness struct {
	Ready bool  `json:"ready"`
	State State `json:"state"`
	// Reason says why the state is what it is, e.g. "restarting in 4s
	// after: dial tcp 127.0.0.1:9092: connection refused"; may be empty
	// when ready.
	Reason string `json:"reason,omitempty"`
	// Since is when the state was entered.
	Since time.Time `json:"since"`
}

// Phase holds the current State and its reason. Safe for concurrent use;
// NewPhase starts it at Starting.
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
// does: a new reason for the same state keeps it.
func (p *Phase) Set(s State, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s != p.state {
		p.since = time.Now()
	}
	p.state, p.reason = s, reason
}

// Readiness returns the current state as /readyz reports it.
func (p *Phase) Readiness() Readiness {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Readiness{Ready: Ready(p.state), State: p.state, Reason: p.reason, Since: p.since.UTC()}
}
