//go:build integration

package integration

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// topicCase is a row routed to a topic no record may go to, between two
// good rows, each committed alone.
type topicCase struct {
	insert func(i int)      // commits row i: 0 good, 1 poison, 2 good
	ids    func() [3]string // the rows' event ids, once inserted
	topic  string           // where the good rows go
	bad    string           // the poison row's routed topic (dlq_topic)
	says   []string         // in the poison error and dlq_error: why and the fix
	never  string           // not in them ("" for no check)
	reason string           // the poison reason; "" for invalid_topic
}

// topicPoison runs c under kafka.on-poison policy and checks what
// docs/poison.md ("Topics no record may go to") promises: under fail the
// publisher stops with exit 1 before the poison row, the error naming its
// event id, the reason and the fix, and only the row before it is
// published; under dead-letter the poison row is on the dead-letter topic
// (invalid_topic, its routed name in dlq_topic) and the row after it is
// published too.
func topicPoison(t *testing.T, e *env, policy string, c topicCase) {
	t.Helper()
	reason := cmp.Or(c.reason, "invalid_topic")
	dlq := ""
	if policy == sink.PolicyDeadLetter {
		dlq = e.deadLetterPolicy()
	}
	p := e.start()
	for i := range 3 {
		c.insert(i)
	}
	ids := c.ids()
	published := func(n int, timeout time.Duration) []string {
		var got []string
		for _, r := range pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, c.topic), n, timeout) {
			got = append(got, r.EventID)
		}
		return got
	}
	if policy == sink.PolicyFail {
		if code := p.waitExit(t, 90*time.Second); code != 1 {
			t.Fatalf("exit code %d, want 1 (poison, fail policy)", code)
		}
		for _, want := range append([]string{fmt.Sprintf("poison record (%s): event %s for topic %s,", reason, ids[1], c.bad),
			"kafka.on-poison: dead-letter"}, c.says...) {
			if !logHas(p.log, want) {
				t.Errorf("the poison error does not say %q", want)
			}
		}
		if line := logLine(p.log, "poison record ("+reason+")"); c.never != "" && strings.Contains(line, c.never) {
			t.Errorf("the poison error says %q: %s", c.never, line)
		}
		// The publisher has exited: what is there is all there is.
		if got := published(2, 5*time.Second); fmt.Sprint(got) != fmt.Sprint([]string{ids[0]}) {
			t.Fatalf("published %v, want only the row before the poison one, %s", got, ids[0])
		}
		return
	}
	if got := published(2, time.Minute); fmt.Sprint(got) != fmt.Sprint([]string{ids[0], ids[2]}) {
		t.Fatalf("published %v, want the rows around the poison one, %s and %s", got, ids[0], ids[2])
	}
	dead := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, dlq), 1, 30*time.Second)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	h := dead[0].Headers
	if h["event_id"] != ids[1] || h["dlq_reason"] != reason || h["dlq_topic"] != c.bad {
		t.Fatalf("dead letter headers %v, want event %s, %s, dlq_topic %s", h, ids[1], reason, c.bad)
	}
	for _, want := range c.says {
		if !strings.Contains(h["dlq_error"], want) {
			t.Errorf("dlq_error %q does not say %q", h["dlq_error"], want)
		}
	}
	if c.never != "" && strings.Contains(h["dlq_error"], c.never) {
		t.Errorf("dlq_error %q says %q", h["dlq_error"], c.never)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}

// imTopicCase routes e's im rows by router.topic {event_type}: the good
// rows' event_type is e.topic, the poison row's bad (the column widened
// for the test's topic name).
func imTopicCase(t *testing.T, e *env, bad string) topicCase {
	e.exec(fmt.Sprintf("ALTER TABLE `%s` MODIFY event_type VARCHAR(255) NOT NULL", e.outbox))
	t.Setenv("CDC_OUTBOX_ROUTER_TOPIC", "{event_type}")
	types := [3]string{e.topic, bad, e.topic}
	return topicCase{
		insert: func(i int) { e.insertRaw([]string{row("'"+types[i]+"'", "1", i+1, `'{}'`)}) },
		ids: func() [3]string {
			m := e.eventIDs()
			return [3]string{m["1/1"], m["1/2"], m["1/3"]}
		},
		topic: e.topic, bad: bad,
	}
}

// Issue 29 item 3: an event_type naming a Kafka-internal topic
// (__consumer_offsets) is a poison record under both policies, not a
// restart loop ending in "[17] Invalid Topic".
func TestPoisonInternalTopic(t *testing.T) {
	for _, policy := range []string{sink.PolicyFail, sink.PolicyDeadLetter} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t)
			c := imTopicCase(t, e, "__consumer_offsets")
			c.says = []string{"a Kafka-internal topic name", "correct the row's event_type"}
			topicPoison(t, e, policy, c)
		})
	}
}

// Issue 29 item 3: an event_type naming the checkpoint mirror topic
// (checkpoint.mirror-topic) is a poison record under both policies; no
// normal record is written into the mirror topic.
func TestPoisonMirrorTopic(t *testing.T) {
	for _, policy := range []string{sink.PolicyFail, sink.PolicyDeadLetter} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t)
			mirror := e.topic + ".cp"
			t.Setenv("CDC_OUTBOX_CHECKPOINT_MIRROR_TOPIC", mirror)
			c := imTopicCase(t, e, mirror)
			c.says = []string{"it is checkpoint.mirror-topic", "or choose another checkpoint.mirror-topic"}
			topicPoison(t, e, policy, c)
			for _, r := range mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, mirror)) {
				if r.Headers["event_id"] != "" {
					t.Fatalf("a normal record in the mirror topic: key %s headers %v", r.Key, r.Headers)
				}
			}
		})
	}
}

// Issue 29 item 3: with the debezium preset, an empty aggregatetype gives
// "outbox.event." (a valid name, no one's topic): a poison record under
// both policies, the error naming the column aggregatetype, not
// event_type; not a restart loop.
func TestMappingEmptyTopicPlaceholder(t *testing.T) {
	for _, policy := range []string{sink.PolicyFail, sink.PolicyDeadLetter} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t)
			agg := "agg_" + e.name
			topic := "outbox.event." + agg
			createTopic(t, topic, partitions)
			table := e.debeziumOutbox("dbz_", "")
			e.sourceExtra = "  mapping: {preset: debezium}\n"
			ids := [3]string{"good-1", "poison-2", "good-3"}
			aggs := [3]string{agg, "", agg}
			topicPoison(t, e, policy, topicCase{
				insert: func(i int) {
					e.exec(fmt.Sprintf("INSERT INTO %s (id, aggregatetype, aggregateid, type, payload) VALUES ('%s', '%s', 'k1', 'OrderCreated', '{}')", table, ids[i], aggs[i]))
				},
				ids:   func() [3]string { return ids },
				topic: topic, bad: "outbox.event.",
				says:  []string{"aggregatetype is empty", "give the row's aggregatetype a value"},
				never: "event_type",
			})
		})
	}
}

// logLine returns the first line of the log at path containing msg, or "".
func logLine(path, msg string) string {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, msg) {
			return l
		}
	}
	return ""
}

// debeziumOutbox creates a Debezium-layout outbox table (id, aggregatetype,
// aggregateid, type, payload, then the columns of extra: ",\n\tcol TYPE"),
// named prefix + e.name, dropped at the test's end, as e's outbox table.
func (e *env) debeziumOutbox(prefix, extra string) string {
	table := prefix + e.name
	e.exec("CREATE TABLE " + table + ` (
		id CHAR(36) NOT NULL PRIMARY KEY,
		aggregatetype VARCHAR(255) NOT NULL,
		aggregateid VARCHAR(255) NOT NULL,
		type VARCHAR(255) NOT NULL,
		payload JSON` + extra + ")")
	e.t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + table) })
	e.outbox = table
	return table
}

// Issue 29 item 3: a row routed to a topic that does not exist (a new
// event type) is a missing_topic poison record under the default
// kafka.missing-topic: poison, once the producer's retry budget is spent,
// under both policies; not a restart loop every ~30 s.
func TestPoisonMissingTopic(t *testing.T) {
	for _, policy := range []string{sink.PolicyFail, sink.PolicyDeadLetter} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t)
			t.Setenv("CDC_OUTBOX_KAFKA_DELIVERY_TIMEOUT", "2s")
			c := imTopicCase(t, e, e.topic+".new")
			c.reason = "missing_topic"
			c.says = []string{"the topic does not exist", "or set kafka.missing-topic: create"}
			topicPoison(t, e, policy, c)
		})
	}
}

// Issue 29 item 3: under kafka.missing-topic: create the publisher creates
// a missing topic with kafka.topic-creation's partitions and publishes to
// it; a creation the broker refuses (a replication factor above the
// cluster's one broker) stops it (exit 1) with the broker's reason.
func TestCreateMissingTopic(t *testing.T) {
	e := newEnv(t)
	t.Setenv("CDC_OUTBOX_KAFKA_MISSING_TOPIC", "create")
	t.Setenv("CDC_OUTBOX_KAFKA_TOPIC_CREATION_PARTITIONS", "2")
	t.Setenv("CDC_OUTBOX_KAFKA_TOPIC_CREATION_CONFIGS", "retention.ms:3600000")
	t.Setenv("CDC_OUTBOX_ROUTER_TOPIC", e.topic+".{event_type}")
	p := e.start()
	e.insertRaw([]string{row("'new'", "1", 1, `'{}'`)})
	created := e.topic + ".new"
	for deadline := time.Now().Add(time.Minute); ; {
		ids, err := sink.Partitions(context.Background(), sink.Config{Brokers: brokers}, created)
		if err == nil && len(ids) != 2 {
			t.Fatalf("created topic %s: partitions %v, want 2", created, ids)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not created: %v", created, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, created), 1, time.Minute); len(recs) != 1 {
		t.Fatalf("%d records in the created topic %s, want 1", len(recs), created)
	}
	if !logHas(p.log, "created a missing topic") {
		t.Error("the creation is not logged")
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	t.Setenv("CDC_OUTBOX_KAFKA_TOPIC_CREATION_REPLICATION_FACTOR", "3")
	e.insertRaw([]string{row("'other'", "1", 2, `'{}'`)})
	// check asks the brokers whether run could create it (validate only).
	if out, code := e.cli(nil, "check"); code != 1 || !strings.Contains(out, "run could not create it (kafka.missing-topic: create)") || !strings.Contains(out, "Invalid Replication Factor") {
		t.Fatalf("check with a creation the broker refuses: exit %d, want 1 naming the refusal:\n%s", code, out)
	}
	if ids, err := sink.Partitions(context.Background(), sink.Config{Brokers: brokers}, e.topic+".other"); err == nil {
		t.Fatalf("check created %s.other (%v)", e.topic, ids)
	}
	p = e.launch()
	if code := p.waitExit(t, time.Minute); code != 1 {
		t.Fatalf("exit code %d, want 1 (creation refused)", code)
	}
	for _, want := range []string{"topic " + e.topic + ".other does not exist and the broker refuses to create it", "Invalid Replication Factor", "change kafka.topic-creation"} {
		if !logHas(p.log, want) {
			t.Errorf("the error does not say %q", want)
		}
	}
}

// Issue 30 item 9: under kafka.missing-topic: create a missing router.topic
// no longer stops run at start ("or set kafka.allow-auto-topic-creation");
// the first record creates it with kafka.topic-creation's partitions, as
// for a routed topic, and a restart resumes on it.
func TestCreateMissingRouterTopic(t *testing.T) {
	e := newTables(t) // router.topic not created
	t.Setenv("CDC_OUTBOX_KAFKA_MISSING_TOPIC", "create")
	t.Setenv("CDC_OUTBOX_KAFKA_TOPIC_CREATION_PARTITIONS", "2")
	p := e.start()
	e.insertRaw([]string{row("'x'", "1", 1, `'{}'`)})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		ids, err := sink.Partitions(context.Background(), sink.Config{Brokers: brokers}, e.topic)
		if err == nil && len(ids) != 2 {
			t.Fatalf("created topic %s: partitions %v, want 2", e.topic, ids)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not created: %v", e.topic, err)
		}
	}
	if recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 1, time.Minute); len(recs) != 1 {
		t.Fatalf("%d records in the created topic %s, want 1", len(recs), e.topic)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	e.insertRaw([]string{row("'x'", "1", 2, `'{}'`)})
	p = e.start()
	if recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2, time.Minute); len(recs) != 2 {
		t.Fatalf("%d records after the restart, want 2", len(recs))
	}
}
