package consumer

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
)

func TestFetchFatal(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"login refused", fmt.Errorf("failed to dial: %w", &sink.SecurityError{Setting: "kafka.sasl", Err: kafka.SASLAuthenticationFailed}), true},
		{"topic authorization failed", kafka.TopicAuthorizationFailed, true},
		{"offset out of range (past the end: wait)", fmt.Errorf("fetch t/0: %w", kafka.OffsetOutOfRange), false},
		{"storage error", kafka.KafkaStorageError, false},
		{"not leader", fmt.Errorf("read: %w", kafka.NotLeaderForPartition), false},
		{"broker unreachable", fmt.Errorf("failed to dial: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), false},
	} {
		if got := fetchFatal(c.err); got != c.want {
			t.Errorf("%s: fetchFatal(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// fetchable leaves out the partitions whose queue is full (paused until
// the handler drains it) or whose retry time has not come, and rotates
// the rest by round.
func TestFetchable(t *testing.T) {
	now := time.Unix(1000, 0)
	mk := func(id int, queued int64, retryAt time.Time) *partition {
		p := &partition{topic: "t", id: id, retryAt: retryAt}
		p.queued.Store(queued)
		return p
	}
	ids := func(ps []*partition) []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.id)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		ps    []*partition
		round int
		want  []int
	}{
		{"all under capacity, round 0", []*partition{mk(0, 0, time.Time{}), mk(1, 99, time.Time{}), mk(2, 5, time.Time{})}, 0, []int{0, 1, 2}},
		{"rotated by round", []*partition{mk(0, 0, time.Time{}), mk(1, 0, time.Time{}), mk(2, 0, time.Time{})}, 4, []int{1, 2, 0}},
		{"full queue paused", []*partition{mk(0, 100, time.Time{}), mk(1, 250, time.Time{}), mk(2, 0, time.Time{})}, 0, []int{2}},
		{"retry time not come", []*partition{mk(0, 0, now.Add(time.Millisecond)), mk(1, 0, now)}, 0, []int{1}},
		{"all paused", []*partition{mk(0, 100, time.Time{}), mk(1, 0, now.Add(time.Second))}, 0, nil},
	} {
		if got := ids(fetchable(c.ps, 100, now, c.round)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// byLeader groups by leader and sets apart the partitions without one
// (offline, or missing from the metadata).
func TestByLeader(t *testing.T) {
	ps := []*partition{{topic: "a", id: 0}, {topic: "a", id: 1}, {topic: "a", id: 2}, {topic: "b", id: 0}, {topic: "b", id: 1}}
	groups, none := byLeader(ps, map[string]map[int32]int32{"a": {0: 1, 1: 2, 2: -1}, "b": {0: 1}})
	name := func(ps []*partition) []string {
		var out []string
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s/%d", p.topic, p.id))
		}
		return out
	}
	if got := name(groups[1]); !slices.Equal(got, []string{"a/0", "b/0"}) {
		t.Errorf("leader 1: %v", got)
	}
	if got := name(groups[2]); !slices.Equal(got, []string{"a/1"}) {
		t.Errorf("leader 2: %v", got)
	}
	if len(groups) != 2 {
		t.Errorf("groups %v", groups)
	}
	if got := name(none); !slices.Equal(got, []string{"a/2", "b/1"}) {
		t.Errorf("without a leader: %v", got)
	}
}

// A Fetch for n partitions may hold what n one-partition requests could,
// at most the Java consumer's 50 MiB.
func TestRequestMaxBytes(t *testing.T) {
	for _, c := range []struct{ n, per, want int }{
		{1, 1 << 20, 1 << 20},
		{6, 1 << 20, 6 << 20},
		{100, 1 << 20, 50 << 20},
		{2, 64 << 20, 64 << 20}, // one partition's limit above the cap
	} {
		if got := requestMaxBytes(c.n, c.per); got != c.want {
			t.Errorf("requestMaxBytes(%d, %d) = %d, want %d", c.n, c.per, got, c.want)
		}
	}
}
