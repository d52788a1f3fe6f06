package sink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// The gate against kfake: an existing topic passes; a missing one is a
// missing_topic poison record under missing-topic: poison (after the
// retry budget) naming the fix, and is created under missing-topic:
// create (with kafka.topic-creation's partitions and configs); a creation
// the broker refuses is a fatal *TopicCreationError with its reason.
func TestTopicGate(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Brokers, cfg.MaxAttempts, cfg.DeliveryTimeout = c.ListenAddrs(), 2, 0
	gate := func(mode string) *topicGate {
		cfg := cfg
		cfg.MissingTopic = mode
		cfg.TopicCreation = TopicCreation{Partitions: 2, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "3600000"}}
		g := newTopicGate(cfg, zap.NewNop())
		t.Cleanup(g.close)
		return g
	}
	g := gate(MissingTopicPoison)
	g.cfg.DeliveryTimeout = time.Second
	if p, err := g.check(ctx, "t"); p != nil || err != nil {
		t.Fatalf("existing topic: %v %v", p, err)
	}
	began := time.Now()
	p, err := g.check(ctx, "orders")
	if time.Since(began) < time.Second {
		t.Errorf("missing after %s, want the retry budget (kafka.delivery-timeout 1s) spent first", time.Since(began))
	}
	if err != nil || p == nil || p.Reason != ReasonMissingTopic || p.Topic != "orders" || !errors.Is(p.Err, ErrMissingTopic) ||
		!strings.Contains(p.Err.Error(), "kafka.missing-topic: create") {
		t.Fatalf("missing topic: %+v %v, want a missing_topic poison naming kafka.missing-topic: create", p, err)
	}

	// The next record for it: poison at once (no second budget).
	began = time.Now()
	if p, err := g.check(ctx, "orders"); p == nil || err != nil || time.Since(began) > 500*time.Millisecond {
		t.Fatalf("missing again: %v %v after %s, want poison at once", p, err, time.Since(began))
	}

	g = gate(MissingTopicCreate)
	if p, err := g.check(ctx, "orders"); p != nil || err != nil {
		t.Fatalf("create: %v %v", p, err)
	}
	parts, err := Partitions(ctx, cfg, "orders")
	if err != nil || len(parts) != 2 {
		t.Fatalf("created topic: partitions %v %v, want 2", parts, err)
	}

	c.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.CreateTopicsRequest)
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range r.Topics {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode = rt.Topic, 44 // POLICY_VIOLATION
			msg := "topic names must start with im."
			t.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	_, err = gate(MissingTopicCreate).check(ctx, "payments")
	var te *TopicCreationError
	if !errors.As(err, &te) || te.Topic != "payments" || !IsFatal(&WriteError{Err: err}) || !strings.Contains(err.Error(), "topic names must start with im.") {
		t.Fatalf("refused creation: %v, want a fatal *TopicCreationError with the broker's reason", err)
	}
}
