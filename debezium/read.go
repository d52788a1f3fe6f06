package debezium

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// TopicPrefix marks an offsets topic in Read's argument ("topic:connect-offsets").
const TopicPrefix = "topic:"

// Read returns the offsets stored at from: "topic:<name>", a distributed
// Connect worker's offsets topic (offset.storage.topic) read from the
// start to its end on the brokers of kafka (the newest record of each key
// wins; a tombstone deletes), or else the path of an offset file
// (offset.storage.file.filename, ParseFile).
func Read(ctx context.Context, from string, kafka sink.Config) ([]Offset, error) {
	topic, ok := strings.CutPrefix(from, TopicPrefix)
	if !ok {
		b, err := os.ReadFile(from)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrOffset, err)
		}
		return ParseFile(b)
	}
	if topic == "" {
		return nil, fmt.Errorf("%w: %q: name the offsets topic, e.g. topic:connect-offsets", ErrOffset, from)
	}
	recs, err := verify.NewConsumer(kafka, topic).Poll(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %v", ErrOffset, topic, err)
	}
	var keys []string
	last := map[string]Offset{}
	for _, r := range recs {
		o, ok, err := ParseRecord([]byte(r.Key), r.Value)
		if err != nil {
			continue // another connector's offset (a Postgres one, ...) shares the topic
		}
		if _, seen := last[r.Key]; !seen {
			keys = append(keys, r.Key)
		}
		if ok {
			last[r.Key] = o
		} else {
			last[r.Key] = Offset{}
		}
	}
	var out []Offset
	for _, k := range keys {
		if o := last[k]; o.File != "" {
			out = append(out, o)
		}
	}
	return out, nil
}
