package binlog

import (
	"encoding/json"
	"testing"
)

// A position without an event time has no event_time in JSON (/status's
// binlog_end showed "0001-01-01T00:00:00Z": omitempty does not omit a
// zero time.Time).
func TestPositionJSONOmitsZeroTime(t *testing.T) {
	b, err := json.Marshal(Position{File: "f", Pos: 4})
	if err != nil || string(b) != `{"file":"f","pos":4}` {
		t.Fatalf("%s, %v", b, err)
	}
}
