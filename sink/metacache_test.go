package sink

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
)

type countingTransport struct {
	calls int
	code  int16
}

func (c *countingTransport) RoundTrip(_ context.Context, _ net.Addr, req protocol.Message) (protocol.Message, error) {
	c.calls++
	if mr, ok := req.(*metadataAPI.Request); ok {
		return &metadataAPI.Response{Topics: []metadataAPI.ResponseTopic{{Name: mr.TopicNames[0], ErrorCode: c.code,
			Partitions: make([]metadataAPI.ResponsePartition, 6)}}}, nil
	}
	return &produceAPI.Response{}, nil
}

func TestMetaCache(t *testing.T) {
	next := &countingTransport{}
	c := newMetaCache(next, 50*time.Millisecond)
	ctx, addr := context.Background(), kafka.TCP("x:1")
	meta := func(topic string) *metadataAPI.Response {
		t.Helper()
		res, err := c.RoundTrip(ctx, addr, &metadataAPI.Request{TopicNames: []string{topic}})
		if err != nil {
			t.Fatal(err)
		}
		return res.(*metadataAPI.Response)
	}
	for range 100 {
		if r := meta("a"); len(r.Topics[0].Partitions) != 6 {
			t.Fatalf("response %+v", r)
		}
	}
	if next.calls != 1 {
		t.Fatalf("100 lookups within the TTL made %d metadata requests, want 1", next.calls)
	}
	meta("b")
	if next.calls != 2 {
		t.Fatalf("another topic: %d requests, want 2", next.calls)
	}
	for deadline := time.Now().Add(5 * time.Second); next.calls == 2 && time.Now().Before(deadline); {
		meta("a") // the entry expires after the TTL
	}
	if next.calls != 3 {
		t.Fatalf("after the TTL: %d requests, want 3", next.calls)
	}
	// Produce requests always pass through.
	for range 3 {
		if _, err := c.RoundTrip(ctx, addr, &produceAPI.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	if next.calls != 6 {
		t.Fatalf("produce: %d requests, want 6", next.calls)
	}
	// An answer with an error for the topic is not kept.
	next.code = int16(kafka.UnknownTopicOrPartition)
	meta("c")
	meta("c")
	if next.calls != 8 {
		t.Fatalf("error answers: %d requests, want 8 (not cached)", next.calls)
	}
}
