//go:build integration

package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// The Producer encodes its record batches itself: every compression the
// config offers must be accepted by the real broker and read back the
// same, each record in the partition the router's partitioner gives its
// key, in order, with its headers and a timestamp taken at the write.
// A round spans two topics and all partitions.
func TestProducerRoundTrip(t *testing.T) {
	const parts, keys, perRound = 6, 40, 400
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topics := []string{"it.prod." + codec + "." + runID, "it.prod2." + codec + "." + runID}
			for _, tp := range topics {
				createTopic(t, tp, parts)
			}
			cfg := sink.DefaultConfig()
			cfg.Brokers, cfg.Compression = brokers, codec
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			p := sink.NewProducer(cfg, router.Balancer(), zap.NewNop())
			defer p.Close()
			before := time.Now().Add(-time.Millisecond)
			seq := map[string]int{}
			for round := range 2 {
				msgs := make([]kafka.Message, perRound)
				for i := range msgs {
					key := strconv.Itoa(i % keys)
					topic := topics[(i%keys)%2]
					seq[topic+"/"+key]++
					msgs[i] = kafka.Message{Topic: topic, Key: []byte(key),
						Value:   fmt.Appendf(nil, `{"round":%d,"i":%d,"pad":"%0*d"}`, round, i, i*3, 0),
						Headers: []kafka.Header{{Key: "seq", Value: []byte(strconv.Itoa(seq[topic+"/"+key]))}, {Key: "empty", Value: []byte{}}}}
				}
				if err := p.WriteMessages(context.Background(), msgs...); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			after := time.Now().Add(time.Millisecond)

			got := map[string]int{}
			total := 0
			for _, topic := range topics {
				for part := range parts {
					conn, err := kafka.DialLeader(context.Background(), "tcp", brokers[0], topic, part)
					if err != nil {
						t.Fatal(err)
					}
					last, err := conn.ReadLastOffset()
					if err != nil {
						t.Fatal(err)
					}
					if last == 0 {
						conn.Close()
						continue
					}
					_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
					if _, err := conn.Seek(0, kafka.SeekAbsolute); err != nil {
						t.Fatal(err)
					}
					batch := conn.ReadBatch(1, 16<<20)
					for n := int64(0); n < last; n++ {
						m, err := batch.ReadMessage()
						if err != nil {
							t.Fatalf("%s/%d offset %d of %d: %v", topic, part, n, last, err)
						}
						total++
						if want := router.Partition(m.Key, parts); want != part {
							t.Fatalf("key %s in partition %d, want %d", m.Key, part, want)
						}
						k := topic + "/" + string(m.Key)
						got[k]++
						if len(m.Headers) != 2 || m.Headers[0].Key != "seq" || string(m.Headers[0].Value) != strconv.Itoa(got[k]) || m.Headers[1].Key != "empty" {
							t.Fatalf("%s offset %d: headers %q, want seq %d then empty (per-key order)", k, m.Offset, m.Headers, got[k])
						}
						if m.Time.Before(before) || m.Time.After(after) {
							t.Fatalf("%s offset %d: timestamp %v not within the write (%v – %v)", k, m.Offset, m.Time, before, after)
						}
					}
					batch.Close()
					conn.Close()
				}
			}
			if total != 2*perRound {
				t.Fatalf("read %d records, want %d", total, 2*perRound)
			}
			for k, n := range seq {
				if got[k] != n {
					t.Fatalf("%s: read %d records, want %d", k, got[k], n)
				}
			}
		})
	}
}
