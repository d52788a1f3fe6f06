package audit

import (
	"encoding/json"
	"fmt"
	"time"
)

// stateVersion is the version of the stored state.
const stateVersion = 1

// State is what the audit keeps in Redis beside the checkpoint
// (checkpoint.AuditKey), JSON: where it is, and what it found. /status and
// `cdc-outbox status` show it.
type State struct {
	Version int `json:"version"`
	// Cursors: per outbox table ("schema.table"), the largest id audited.
	Cursors map[string]uint64 `json:"cursors"`
	// CursorTimes: per table, when its cursor's range was read (the end of
	// the window its events were committed in).
	CursorTimes map[string]time.Time `json:"cursor_times"`
	// Resume: per topic and partition, the offset a restarted audit reads
	// from (the lowest offset of a record not yet audited); ReadTo where
	// it had read to (records below are read again without being counted);
	// Armed from where a duplicate of an audited id is a fault.
	Resume map[string]map[int]int64 `json:"resume"`
	ReadTo map[string]map[int]int64 `json:"read_to"`
	Armed  map[string]map[int]int64 `json:"armed,omitempty"`
	// Suspects: rows not published when their range was audited, confirmed
	// (or cleared) at the next audited range.
	Suspects []Suspect `json:"suspects,omitempty"`
	// Totals: per table, the counts since the audit began.
	Totals map[string]map[Result]int64 `json:"totals"`
	// Findings: the newest problems found (at most 20), oldest first.
	Findings  []Finding `json:"findings,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Suspect is a row not yet seen published when its range was audited.
type Suspect struct {
	Table string `json:"table"`
	ID    uint64 `json:"id"`
	// Window: the times its range was committed between (for the fix).
	Window [2]time.Time `json:"window"`
}

// Finding is one problem found: what, where, which event ids, and the fix.
type Finding struct {
	At       time.Time `json:"at"`
	Table    string    `json:"table"`
	Result   Result    `json:"result"`
	Count    int       `json:"count"`
	EventIDs []string  `json:"event_ids,omitempty"`
	Detail   string    `json:"detail,omitempty"`
	Fix      string    `json:"fix,omitempty"`
}

const maxFindings = 20

func newState() *State {
	return &State{Version: stateVersion, Cursors: map[string]uint64{}, CursorTimes: map[string]time.Time{},
		Resume: map[string]map[int]int64{}, ReadTo: map[string]map[int]int64{}, Armed: map[string]map[int]int64{},
		Totals: map[string]map[Result]int64{}}
}

// ParseState decodes a stored state (key names the Redis key for the
// error: ErrState).
func ParseState(key string, b []byte) (*State, error) {
	st := newState()
	if err := json.Unmarshal(b, st); err != nil || st.Version != stateVersion {
		return nil, fmt.Errorf("%w: key %s (version %d, %v): delete it (redis-cli DEL %s) to start the audit over from the present", ErrState, key, st.Version, err, key)
	}
	for _, m := range []*map[string]map[int]int64{&st.Resume, &st.ReadTo, &st.Armed} {
		if *m == nil {
			*m = map[string]map[int]int64{}
		}
	}
	if st.Cursors == nil {
		st.Cursors = map[string]uint64{}
	}
	if st.CursorTimes == nil {
		st.CursorTimes = map[string]time.Time{}
	}
	if st.Totals == nil {
		st.Totals = map[string]map[Result]int64{}
	}
	return st, nil
}

func (s *State) add(table string, r Result, n int) {
	if n == 0 {
		return
	}
	t := s.Totals[table]
	if t == nil {
		t = map[Result]int64{}
		s.Totals[table] = t
	}
	t[r] += int64(n)
}

func (s *State) find(f Finding) {
	s.Findings = append(s.Findings, f)
	if len(s.Findings) > maxFindings {
		s.Findings = s.Findings[len(s.Findings)-maxFindings:]
	}
}
