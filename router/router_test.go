package router

import (
	"bytes"
	"errors"
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
		r := New(Config{Topic: c.topic})
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
	r := New(Config{Topic: "im.{event_type}"})
	m, err := r.Route(&binlog.Event{ID: 7, EventType: "bad type/x", ConversationID: 3}, binlog.Position{})
	if !errors.Is(err, ErrTopic) {
		t.Fatalf("want ErrTopic, got %v", err)
	}
	// The record comes back too, for a dead-letter policy.
	var te *TopicError
	if !errors.As(err, &te) || te.Topic != "im.bad type/x" || te.EventType != "bad type/x" {
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
	r := New(Config{Topic: "im.events"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Route(&ev, end); err != nil {
			b.Fatal(err)
		}
	}
}
