package consumer_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cdc-outbox/cdc-outbox/consumer"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// A consumer of the publisher's topic: each conversation's messages once,
// in seq_no order, with a duplicate (a publisher resend) dropped and a gap
// reported. The example runs against an in-process Kafka (kfake); in
// production Brokers are your cluster's and the records the publisher's.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "im.events"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	publish(brokers, "im.events", []rec{{7, 1, 101}, {7, 2, 102}, {7, 2, 102}, {7, 3, 103}, {7, 6, 106}})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	c, err := consumer.New(consumer.Config{
		Brokers:   brokers,
		Topics:    []string{"im.events"},
		Group:     "im-push",
		Isolation: consumer.ReadCommitted, // also right for a non-transactional publisher
	}, consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		fmt.Printf("conversation %d seq_no %d event %s: %s\n", r.ConversationID, r.SeqNo, r.EventID, r.Payload)
		if n++; n == 4 {
			cancel() // Run commits what was handled and returns nil
		}
		return nil
	}), consumer.Options{
		OnGap: func(ctx context.Context, g consumer.Gap) error {
			fmt.Printf("gap: conversation %s seq_no %d after %d\n", g.Key, g.Next, g.After)
			return nil // report it (alert, fetch the missing range, ...); returning an error stops Run
		},
	})
	if err != nil {
		panic(err)
	}
	if err := c.Run(ctx); err != nil {
		panic(err)
	}
	// Output:
	// conversation 7 seq_no 1 event 101: {"text":"hello 1"}
	// conversation 7 seq_no 2 event 102: {"text":"hello 2"}
	// conversation 7 seq_no 3 event 103: {"text":"hello 3"}
	// gap: conversation 7 seq_no 6 after 3
	// conversation 7 seq_no 6 event 106: {"text":"hello 6"}
}

type rec struct {
	conv, seq int64
	id        uint64
}

// publish writes records as cdc-outbox does: key conversation_id, headers
// event_id, event_type, seq_no.
func publish(brokers []string, topic string, recs []rec) {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Murmur2Balancer{}}
	defer w.Close()
	var ms []kafka.Message
	for _, r := range recs {
		ms = append(ms, kafka.Message{
			Key:   []byte(strconv.FormatInt(r.conv, 10)),
			Value: []byte(fmt.Sprintf(`{"text":"hello %d"}`, r.seq)),
			Headers: []kafka.Header{
				{Key: consumer.HeaderEventID, Value: []byte(strconv.FormatUint(r.id, 10))},
				{Key: consumer.HeaderEventType, Value: []byte("message.created")},
				{Key: consumer.HeaderSeqNo, Value: []byte(strconv.FormatInt(r.seq, 10))},
			},
		})
	}
	if err := w.WriteMessages(context.Background(), ms...); err != nil {
		panic(err)
	}
}
