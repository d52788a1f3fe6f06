package config

import (
	"errors"
	"fmt"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
)

// ReservedTopics returns the topics the publisher writes itself, which no
// outbox row may be routed to: kafka.dead-letter-topic and
// checkpoint.mirror-topic. Every router of a source is built with them
// (router.New).
func (c Config) ReservedTopics() router.Reserved {
	return reserved(c.Kafka, c.Checkpoint)
}

func reserved(k sink.Config, cp checkpoint.Config) router.Reserved {
	return router.Reserved{DeadLetter: k.DeadLetterTopic, Mirror: cp.MirrorTopic}
}

// topicErrors checks the configured topics of one source together (each
// section checks its own names alone: router.topic, dead-letter-topic,
// mirror-topic): a mapping's topic (a name, or a template whose literal
// parts already make the name invalid or Kafka-internal), and that no
// configured topic of records is a reserved one (the dead-letter or the
// mirror topic), nor the dead-letter topic the mirror topic. Each error
// names its key.
func topicErrors(src binlog.Config, rt router.Config, k sink.Config, cp checkpoint.Config) []error {
	var errs []error
	res := reserved(k, cp)
	if key := res.Key(rt.Topic); key != "" {
		errs = append(errs, fmt.Errorf("router.topic: %q: is also %s: records there would pass for the publisher's own; give them different names", rt.Topic, key))
	}
	if k.DeadLetterTopic != "" && k.DeadLetterTopic == cp.MirrorTopic {
		errs = append(errs, fmt.Errorf("kafka.dead-letter-topic: %q: is also checkpoint.mirror-topic: give them different names", k.DeadLetterTopic))
	}
	if err := router.ValidTopic(cp.MirrorTopic); cp.MirrorTopic != "" && errors.Is(err, router.ErrInternalTopic) {
		errs = append(errs, fmt.Errorf("checkpoint.mirror-topic: %q: %v: choose another name", cp.MirrorTopic, err))
	}
	mapped := func(key string, m mapping.Config) {
		if m.Topic == "" {
			return // the preset's topic, or router.topic
		}
		t, err := mapping.ParseTemplate(m.Topic)
		if err != nil {
			return // reported by the mapping's Validate
		}
		if err := router.ValidTopic(t.Probe()); err != nil {
			errs = append(errs, fmt.Errorf("%s.topic: %q: %v", key, m.Topic, err))
		} else if name, fixed := t.Fixed(); fixed && res.Key(name) != "" {
			errs = append(errs, fmt.Errorf("%s.topic: %q: is also %s: records there would pass for the publisher's own; give them different names", key, m.Topic, res.Key(name)))
		}
	}
	mapped("source.mapping", src.Mapping)
	for i, t := range src.Tables {
		mapped(fmt.Sprintf("source.tables[%d].mapping", i), t.Mapping)
	}
	return errs
}
