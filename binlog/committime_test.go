package binlog

import (
	"testing"
	"time"
)

// A transaction's commit time: MySQL's immediate_commit_timestamp (µs)
// when the GTID event has one, else the commit event's seconds.
func TestCommitTime(t *testing.T) {
	cases := []struct {
		micros uint64
		header uint32
		want   time.Time
	}{
		{1_700_000_000_123_456, 1_700_000_000, time.Date(2023, 11, 14, 22, 13, 20, 123_456_000, time.UTC)},
		{0, 1_700_000_000, time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC)},
	}
	for _, c := range cases {
		if got := commitTime(c.micros, c.header); !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("commitTime(%d, %d) = %s, want %s", c.micros, c.header, got, c.want)
		}
	}
}
