package sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/createtopics"
	"go.uber.org/zap"
)

// What a record for a topic that does not exist is (Config.MissingTopic).
const (
	// MissingTopicPoison (the default): a poison record, ReasonMissingTopic,
	// handled by Config.OnPoison.
	MissingTopicPoison = "poison"
	// MissingTopicCreate: the publisher creates the topic as
	// Config.TopicCreation says, and stops (ErrTopicCreation) when the
	// broker refuses.
	MissingTopicCreate = "create"
)

// TopicCreation is how the publisher creates a missing topic under
// kafka.missing-topic: create (Kafka's CreateTopics, like Kafka Connect's
// topic.creation.default.*).
type TopicCreation struct {
	// Partitions of a created topic; -1 (the default) or 0: the broker's
	// num.partitions.
	Partitions int `yaml:"partitions" env:"PARTITIONS" doc:"Partitions of a created topic; -1 or 0: the broker's num.partitions." rule:"-1 or more"`
	// ReplicationFactor of a created topic; -1 (the default) or 0: the
	// broker's default.replication.factor.
	ReplicationFactor int `yaml:"replication-factor" env:"REPLICATION_FACTOR" doc:"Replication factor of a created topic; -1 or 0: the broker's default.replication.factor." rule:"-1 to 32767"`
	// Configs are topic configurations (retention.ms, min.insync.replicas,
	// ...), as kafka-topics.sh --config takes them.
	Configs map[string]string `yaml:"configs" env:"CONFIGS" doc:"Topic configurations of a created topic (retention.ms, min.insync.replicas, ...), as kafka-topics.sh --config takes them." rule:"no empty name"`
}

// ErrTopicCreation matches every *TopicCreationError.
var ErrTopicCreation = errors.New("sink: topic creation refused")

// TopicCreationError is a missing topic the broker refused to create under
// kafka.missing-topic: create (a policy, an authorization, a replication
// factor larger than the cluster): fatal, the broker's reason and the
// fix named.
type TopicCreationError struct {
	Topic string
	Err   error // the broker's error code and message
}

func (e *TopicCreationError) Error() string {
	return fmt.Sprintf("%v: topic %s does not exist and the broker refuses to create it: %v: create it by hand (kafka-topics.sh --create --topic %s), "+
		"grant this user CREATE on it, or change kafka.topic-creation", ErrTopicCreation, e.Topic, e.Err, e.Topic)
}

// Is reports whether target is ErrTopicCreation.
func (e *TopicCreationError) Is(target error) bool { return target == ErrTopicCreation }

// Unwrap returns the broker's error.
func (e *TopicCreationError) Unwrap() error { return e.Err }

// ErrMissingTopic reports a routed topic that does not exist
// (ReasonMissingTopic).
var ErrMissingTopic = errors.New("sink: the topic does not exist")

// topicGate tells whether a record's topic exists before the Writer puts
// the record in a round, so that a missing topic is decided at the
// record's place in the stream (a poison record, or a topic created)
// instead of failing whole rounds again and again. Each topic is looked
// up once per Writer (a topic deleted later fails the produce, and the
// restarted pipeline looks again). Used by the Writer's goroutine only.
type topicGate struct {
	cfg     Config
	log     *zap.Logger
	cl      *cluster // opened at the first lookup
	known   map[string]bool
	missing map[string]time.Time // when each topic was last found missing (poison)
}

// missingRecheck is how long a topic found missing stays missing for the
// next records without a lookup; then one lookup (no retries) decides.
const missingRecheck = 10 * time.Second

func newTopicGate(cfg Config, log *zap.Logger) *topicGate {
	return &topicGate{cfg: cfg, log: log, known: map[string]bool{}, missing: map[string]time.Time{}}
}

// check returns nil, nil when topic exists (or was created); a
// *Poison (ReasonMissingTopic) under kafka.missing-topic: poison when it
// is still missing after the producer's retry budget (kafka.max-attempts
// and kafka.delivery-timeout: a topic just created may be unknown to a
// broker for a moment; a topic found missing is poison without a lookup
// for missingRecheck, then after one lookup); a *TopicCreationError when
// the broker refuses to create it; or the metadata error (retryable: the
// cluster unreachable).
func (g *topicGate) check(ctx context.Context, topic string) (*Poison, error) {
	if g.known[topic] {
		return nil, nil
	}
	if g.cl == nil {
		g.cl = newCluster(g.cfg.Brokers, g.cfg.DialTimeout, g.cfg.AllowAutoTopicCreation, g.log)
		g.cl.sec = NewSecurity(g.cfg)
	}
	at, wasMissing := g.missing[topic]
	if wasMissing && time.Since(at) < missingRecheck {
		return &Poison{Reason: ReasonMissingTopic, Topic: topic, Err: g.explain(topic)}, nil
	}
	began, created := time.Now(), false
	for attempt := 1; ; attempt++ {
		_, err := g.cl.metadata(ctx, topic, true)
		// Found missing before: one lookup decides.
		exhausted := wasMissing || attempt >= g.cfg.MaxAttempts && time.Since(began) >= g.cfg.DeliveryTimeout
		switch {
		case err == nil || errors.Is(err, kafka.LeaderNotAvailable):
			g.known[topic] = true // a leader being elected: the producer waits for it
			delete(g.missing, topic)
			return nil, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !errors.Is(err, kafka.UnknownTopicOrPartition):
			if !retriable(err) || exhausted {
				return nil, err // as the producer's own metadata retries would end
			}
		case g.cfg.MissingTopic == MissingTopicCreate && !created: // "" is poison, the default
			if created, err = g.create(ctx, topic); err != nil && (!retriable(err) || exhausted) {
				return nil, err
			}
		case exhausted && created:
			return nil, fmt.Errorf("sink: topic %s was created but its metadata is not visible after %s: %w", topic, time.Since(began).Round(time.Second), err)
		case exhausted:
			g.missing[topic] = time.Now()
			return &Poison{Reason: ReasonMissingTopic, Topic: topic, Err: g.explain(topic)}, nil
		}
		t := time.NewTimer(min(time.Duration(attempt*attempt)*100*time.Millisecond, time.Second))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// explain explains a missing topic under kafka.missing-topic: poison.
func (g *topicGate) explain(topic string) error {
	auto := ""
	if g.cfg.AllowAutoTopicCreation {
		auto = " (kafka.allow-auto-topic-creation is on, but the broker did not create it: check its auto.create.topics.enable)"
	}
	return fmt.Errorf("%w: topic %s%s: create it (kafka-topics.sh --create --topic %s), or set kafka.missing-topic: %s to have the publisher create missing topics (kafka.topic-creation)",
		ErrMissingTopic, topic, auto, topic, MissingTopicCreate)
}

// create creates topic as kafka.topic-creation says; true when it was
// created (or exists already). A refusal is a *TopicCreationError; a
// retriable error (a controller moving, a timeout) is returned as is.
func (g *topicGate) create(ctx context.Context, topic string) (bool, error) {
	tc := g.cfg.TopicCreation
	err := createTopic(ctx, g.cl, creation(tc, topic), false)
	if err == nil {
		g.log.Info("created a missing topic (kafka.missing-topic: create)", zap.String("topic", topic),
			zap.Int("partitions", tc.Partitions), zap.Int("replication_factor", tc.ReplicationFactor), zap.Any("configs", tc.Configs))
		return true, nil
	}
	if retriable(err) {
		return false, err
	}
	return false, &TopicCreationError{Topic: topic, Err: err}
}

// createTopic sends one CreateTopics request for t (with validateOnly,
// Kafka checks authorization, name and create policy and creates
// nothing); a topic that exists already is no error. The error carries the broker's code (a
// kafka.Error) and message.
func createTopic(ctx context.Context, cl *cluster, t createtopics.RequestTopic, validateOnly bool) error {
	res, err := cl.metaRoundTrip(ctx, &createtopics.Request{TimeoutMs: 10000, ValidateOnly: validateOnly, Topics: []createtopics.RequestTopic{t}})
	if err != nil {
		return err
	}
	for _, r := range res.(*createtopics.Response).Topics {
		if r.ErrorCode != 0 && kafka.Error(r.ErrorCode) != kafka.TopicAlreadyExists {
			return fmt.Errorf("%w: %s", kafka.Error(r.ErrorCode), r.ErrorMessage)
		}
	}
	return nil
}

func (g *topicGate) close() {
	if g.cl != nil {
		g.cl.close()
	}
}

// creation is the CreateTopics entry of topic as kafka.topic-creation
// says (0 partitions or replication factor: the broker's default).
func creation(tc TopicCreation, topic string) createtopics.RequestTopic {
	var configs []createtopics.RequestConfig
	for _, k := range slices.Sorted(maps.Keys(tc.Configs)) {
		configs = append(configs, createtopics.RequestConfig{Name: k, Value: tc.Configs[k]})
	}
	return createtopics.RequestTopic{Name: topic, NumPartitions: int32(cmp.Or(max(tc.Partitions, 0), -1)),
		ReplicationFactor: int16(cmp.Or(max(tc.ReplicationFactor, 0), -1)), Configs: configs}
}

// CanCreateTopic asks the brokers whether the publisher could create topic
// as kafka.topic-creation says (kafka.missing-topic: create): a
// CreateTopics request with validate_only set, which creates nothing. nil
// when it could; otherwise a *TopicCreationError with the broker's reason.
func CanCreateTopic(ctx context.Context, cfg Config, topic string) error {
	cl := newCluster(cfg.Brokers, cfg.dialTimeout(), false, nil)
	cl.sec = NewSecurity(cfg)
	defer cl.close()
	if err := createTopic(ctx, cl, creation(cfg.TopicCreation, topic), true); errors.Is(err, ErrBrokerSilent) {
		return fmt.Errorf("sink: can topic %s be created: %w", topic, err) // not a refusal: no answer
	} else if err != nil {
		return &TopicCreationError{Topic: topic, Err: err}
	}
	return nil
}
