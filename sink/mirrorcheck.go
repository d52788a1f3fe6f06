package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go/protocol/createtopics"
)

// CanCreateMirror asks the brokers whether Mirror.Ensure could create the
// mirror topic now: a CreateTopics request with validate_only set (Kafka
// checks the authorization, the topic name and the create policy, and
// creates nothing). nil when it could; otherwise an error matching
// ErrMirror naming checkpoint.mirror-topic and the fixes, as Ensure's.
// Call it for a topic that does not exist (Partitions).
func CanCreateMirror(ctx context.Context, cfg Config, topic string) error {
	cl := newCluster(cfg.Brokers, cfg.dialTimeout(), false, nil)
	cl.sec = NewSecurity(cfg)
	defer cl.close()
	if err := createMirrorTopic(ctx, cl, topic, true); err != nil {
		return mirrorCreateError(topic, err)
	}
	return nil
}

// createMirrorTopic creates the mirror topic (one partition, the
// cluster's default replication factor, mirrorConfigs), or with
// validateOnly asks whether it could; one that exists already is no error.
func createMirrorTopic(ctx context.Context, cl *cluster, topic string, validateOnly bool) error {
	return createTopic(ctx, cl, createtopics.RequestTopic{Name: topic, NumPartitions: 1, ReplicationFactor: -1, Configs: mirrorConfigs}, validateOnly)
}

// mirrorCreateError is the error of a mirror topic that cannot be created
// (Ensure, CanCreateMirror).
func mirrorCreateError(topic string, err error) error {
	if errors.Is(err, ErrBrokerSilent) { // not a refusal: the broker did not answer (retryable)
		return fmt.Errorf("sink: create checkpoint.mirror-topic %s: %w", topic, err)
	}
	return fmt.Errorf("%w: checkpoint.mirror-topic %s does not exist and cannot be created (%v): create it (kafka-topics.sh --create --topic %s --partitions 1 --config cleanup.policy=compact), grant this user CREATE on it, or set checkpoint.mirror-topic: \"\" to keep checkpoints in Redis only",
		ErrMirror, topic, err, topic)
}
