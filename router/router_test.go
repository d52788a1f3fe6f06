package router

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// Vectors from Kafka's UtilsTest.testMurmur2 (Java), reduced to partitions:
// toPositive(hash) % n.
func TestPartitionMatchesJavaMurmur2(t *testing.T) {
	cases := []struct {
		key  string
		hash int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, c := range cases {
		for _, n := range []int{1, 3, 8, 12, 100} {
			want := int(uint32(c.hash)&0x7fffffff) % n
			if got := Partition([]byte(c.key), n); got != want {
				t.Errorf("Partition(%q, %d) = %d, want %d", c.key, n, got, want)
			}
		}
	}
}

func TestRoute(t *testing.T) {
	ev := binlog.Event{ID: 42, EventType: "message.created", ConversationID: 1001, MessageID: 7, SeqNo: 3,
		SenderID: 5, ReceiverID: 6, Payload: []byte(`{"text":"hi 😀","n":[1,{"a":null}]}`), CreatedAt: "2026-11-29 10:00:00",
		Pos: binlog.Position{File: "mariadb-bin.000001", Pos: 1234, GTID: "0-1-9"}}
	end := binlog.Position{File: "mariadb-bin.000001", Pos: 1300}
	cases := []struct {
		topic, want string
		err         error
	}{
		{"im.events", "im.events", nil},
		{"im.{event_type}", "im.message.created", nil},
		{"{event_type}-v1", "message.created-v1", nil},
	}
	for _, c := range cases {
		r := New(Config{Topic: c.topic}, Reserved{})
		m, err := r.Route(&ev, end)
		if !errors.Is(err, c.err) {
			t.Fatalf("%s: err %v", c.topic, err)
		}
		if m.Topic != c.want {
			t.Errorf("topic %q: got %q want %q", c.topic, m.Topic, c.want)
		}
		if string(m.Key) != "1001" {
			t.Errorf("key %q", m.Key)
		}
		if !bytes.Equal(m.Value, ev.Payload) {
			t.Errorf("value %q", m.Value)
		}
		h := map[string]string{}
		for _, x := range m.Headers {
			h[x.Key] = string(x.Value)
			if cap(x.Value) != len(x.Value) {
				t.Errorf("header %s: cap %d > len %d: an append would overwrite the next value", x.Key, cap(x.Value), len(x.Value))
			}
		}
		if cap(m.Key) != len(m.Key) {
			t.Errorf("key: cap %d > len %d", cap(m.Key), len(m.Key))
		}
		want := map[string]string{HeaderEventID: "42", HeaderEventType: "message.created", HeaderMessageID: "7", HeaderSeqNo: "3",
			HeaderSenderID: "5", HeaderReceiverID: "6", HeaderCreatedAt: "2026-11-29 10:00:00",
			HeaderBinlogPos: "mariadb-bin.000001:1234", HeaderTxnEnd: "mariadb-bin.000001:1300", HeaderGTID: "0-1-9"}
		for k, v := range want {
			if h[k] != v {
				t.Errorf("header %s = %q, want %q", k, h[k], v)
			}
		}
	}
}

func TestRouteRejectsBadTopic(t *testing.T) {
	r := New(Config{Topic: "im.{event_type}"}, Reserved{})
	m, err := r.Route(&binlog.Event{ID: 7, EventType: "bad type/x", ConversationID: 3}, binlog.Position{})
	if !errors.Is(err, ErrTopic) {
		t.Fatalf("want ErrTopic, got %v", err)
	}
	// The record comes back too, for a dead-letter policy.
	var te *TopicError
	if !errors.As(err, &te) || te.Topic != "im.bad type/x" || te.By != "event_type" || !errors.Is(err, ErrTopicName) {
		t.Fatalf("TopicError %+v", te)
	}
	if m.Topic != "im.bad type/x" || string(m.Key) != "3" || len(m.Headers) == 0 {
		t.Fatalf("record %+v", m)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		topic string
		ok    bool
	}{{"im.events", true}, {"im.{event_type}", true}, {"", false}, {"im events", false}, {"..", false}} {
		cfg := Config{Topic: c.topic}
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%q) = %v", c.topic, err)
		}
	}
}

func BenchmarkRoute(b *testing.B) {
	ev := binlog.Event{ID: 1234567, EventType: "message.created", ConversationID: 100001, MessageID: 7654321, SeqNo: 42,
		SenderID: 5001, ReceiverID: 5002, Payload: bytes.Repeat([]byte("x"), 500), CreatedAt: "2026-11-29 10:00:00.123456",
		Pos: binlog.Position{File: "mariadb-bin.000001", Pos: 123456789, GTID: "0-1-99999"}}
	end := binlog.Position{File: "mariadb-bin.000001", Pos: 123999999}
	r := New(Config{Topic: "im.events"}, Reserved{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Route(&ev, end); err != nil {
			b.Fatal(err)
		}
	}
}

// A brace in router.topic that is not the {event_type} placeholder is named
// as such, with the one placeholder there is, not as a bad character.
func TestConfigValidateNamesPlaceholders(t *testing.T) {
	for _, topic := range []string{"im.{event}", "im.{eventtype}", "{EVENT_TYPE}", "im.{event_type", "im.event_type}"} {
		cfg := Config{Topic: topic}
		err := cfg.Validate()
		if err == nil {
			t.Fatalf("Validate(%q) passed", topic)
		}
		if !strings.Contains(err.Error(), "{event_type}") || strings.Contains(err.Error(), "not allowed") {
			t.Errorf("Validate(%q) = %v: want it to name the known placeholder {event_type}", topic, err)
		}
	}
}

// An empty event_type with a template gives a topic name Kafka accepts
// ("im.") but that no one created: it is an invalid topic (poison), not a
// record to send there.
func TestRouteEmptyEventTypeWithTemplate(t *testing.T) {
	for _, tmpl := range []string{"im.{event_type}", "{event_type}-v1", "{event_type}"} {
		r := New(Config{Topic: tmpl}, Reserved{})
		_, err := r.Route(&binlog.Event{ID: 7, EventType: "", ConversationID: 3}, binlog.Position{})
		if !errors.Is(err, ErrTopic) || !strings.Contains(err.Error(), "empty") {
			t.Errorf("%s: want ErrTopic naming the empty event_type, got %v", tmpl, err)
		}
	}
	// A fixed topic does not use event_type: an empty one is fine.
	if _, err := New(Config{Topic: "im.events"}, Reserved{}).Route(&binlog.Event{ID: 7}, binlog.Position{}); err != nil {
		t.Errorf("fixed topic: %v", err)
	}
}

// An unsigned conversation_id at or above 2^63 is keyed by its decimal
// value, not by the signed bit pattern.
func TestRouteUnsignedConversationKey(t *testing.T) {
	big := uint64(1)<<63 + 5
	ev := binlog.Event{ID: 1<<63 + 1, EventType: "x", ConversationID: int64(big), ConversationUnsigned: true}
	m, err := New(Config{Topic: "im.events"}, Reserved{}).Route(&ev, binlog.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Key) != "9223372036854775813" {
		t.Errorf("key %q, want 9223372036854775813", m.Key)
	}
	for _, h := range m.Headers {
		if h.Key == HeaderEventID && string(h.Value) != "9223372036854775809" {
			t.Errorf("event_id %q", h.Value)
		}
	}
}
