package ha

import (
	"testing"

	"github.com/cdc-outbox/cdc-outbox/pipeline"
)

// run's start options go to the source they name only; without a name
// (one source configured) to every source.
func TestPublisherOptions(t *testing.T) {
	o := pipeline.Options{ExplicitStart: true, Backfill: true, AcceptPartitionChange: true, Version: "v1",
		BackfillProgress: func(int64, int64, string) {}}
	for _, c := range []struct {
		start, name string
		want        bool
	}{{"", "default", true}, {"", "shard1", true}, {"shard2", "shard2", true}, {"shard2", "shard1", false}} {
		got := PublisherOptions(o, c.start, c.name)
		if got.ExplicitStart != c.want || got.Backfill != c.want || got.AcceptPartitionChange != c.want || (got.BackfillProgress != nil) != c.want {
			t.Errorf("PublisherOptions(start source %q, %q) = %+v, want the start options %v", c.start, c.name, got, c.want)
		}
		if got.Version != "v1" {
			t.Errorf("PublisherOptions dropped Version")
		}
	}
}
