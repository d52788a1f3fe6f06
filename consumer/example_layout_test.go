package consumer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cdc-outbox/cdc-outbox/consumer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go" // kafka.Message, in OnInvalid
)

// A consumer of a Debezium-layout topic (cdc-outbox's debezium preset, or
// Debezium's own outbox event router) written by a transactional
// producer: each event once, in offset order, the aborted transaction's
// record never handed over. Here the brokers are an in-process Kafka
// (debeziumTopic); in production, your cluster's.
func Example_debezium() {
	brokers, stop := debeziumTopic()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	handled := 0
	c, err := consumer.New(consumer.Config{
		Brokers:   brokers,
		Topics:    []string{"outbox.event.order"},
		Group:     "billing",
		Isolation: consumer.ReadCommitted, // the publisher runs kafka.delivery: exactly-once
		// The debezium preset; its records carry the event type when the
		// mapping publishes it (headers: {type: type}).
		Layout: consumer.Layout{Preset: "debezium", EventType: "type"},
		// Managed Kafka: the publisher's kafka.tls and kafka.sasl.
		// TLS:  consumer.TLS{Enabled: true, CAFile: "/etc/kafka/ca.pem"},
		// SASL: consumer.SASL{Mechanism: "SCRAM-SHA-512", Username: "billing", PasswordFile: "/run/secrets/kafka"},
	}, consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		fmt.Printf("%s %s, key %s\n", r.EventType, r.EventID, r.Key)
		if handled++; handled == 3 {
			cancel() // Run commits what was handled and returns nil
		}
		return nil // an error is retried (HandlerAttempts), then ends Run
	}), consumer.Options{
		// Records that do not fit the layout (another producer's).
		OnInvalid: func(ctx context.Context, m kafka.Message, err error) error {
			fmt.Println("skipped:", err) // e.g. write m to a dead-letter topic
			return nil
		},
		Metrics: consumer.NewMetrics(prometheus.NewRegistry()), // your registry
		// Store: consumer.NewRedisStore(rdb, "billing:seen:", 24*time.Hour),
	})
	if err != nil {
		panic(err)
	}
	if err := c.Run(ctx); err != nil {
		panic(err)
	}
	// Output:
	// OrderCreated 4d1c0b8e-0001, key order-17
	// OrderPaid 4d1c0b8e-0003, key order-17
	// OrderShipped 4d1c0b8e-0004, key order-17
}
