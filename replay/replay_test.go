package replay

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"golang.org/x/sync/errgroup"
)

func TestParsePoint(t *testing.T) {
	cases := []struct {
		in      string
		want    Point
		wantErr string
	}{
		{in: "2026-11-29T10:00:00Z", want: Point{time: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}},
		{in: "2026-11-29T11:00:00+01:00", want: Point{time: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}},
		{in: "2026-11-29T10:00:00.750Z", want: Point{time: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}}, // truncated to the second
		{in: " mariadb-bin.000005:1234 ", want: Point{start: binlog.Start{Kind: binlog.StartFilePos, File: "mariadb-bin.000005", Pos: 1234}}},
		{in: "gtid:0-1-42", want: Point{start: binlog.Start{Kind: binlog.StartGTID, GTIDSet: "0-1-42"}}},
		{in: "", wantErr: "required"},
		{in: "2026-11-29 10:00:00", wantErr: "RFC 3339 with a zone"},
		{in: "2026-11-29T10:00:00", wantErr: "RFC 3339 with a zone"},
		{in: "2026-11-29", wantErr: "RFC 3339 with a zone"},
		{in: "latest", wantErr: "want <file>:<pos>, gtid:<set> or an RFC 3339 time"},
		{in: "earliest", wantErr: "want <file>:<pos>, gtid:<set> or an RFC 3339 time"},
		{in: "mariadb-bin.000005", wantErr: "want <file>:<pos>, gtid:<set> or an RFC 3339 time"}, // not run's "latest, earliest": replay refuses those
		{in: "garbage", wantErr: "want <file>:<pos>, gtid:<set> or an RFC 3339 time"},
		{in: "mariadb-bin.000005:2", wantErr: "pos must be an integer >= 4"},
		{in: "gtid:", wantErr: "empty GTID set"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParsePoint("--from", c.in)
			if c.wantErr != "" {
				if err == nil || !errors.Is(err, binlog.ErrStart) || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "--from") {
					t.Fatalf("ParsePoint(%q) = %+v, %v; want ErrStart naming --from and containing %q", c.in, got, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.time.Equal(c.want.time) || got.start != c.want.start {
				t.Fatalf("ParsePoint(%q) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

func TestReplayRouter(t *testing.T) {
	e := &binlog.Event{ID: 42, EventType: "message.created", ConversationID: 7, SeqNo: 3, Payload: []byte(`{}`),
		Pos: binlog.Position{File: "b.000001", Pos: 700, GTID: "0-1-5"}}
	end := binlog.Position{File: "b.000001", Pos: 731}
	id := NewID()
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("replay id %q is not a version 4 UUID", id)
	}
	if id == NewID() {
		t.Fatal("two replay ids are equal")
	}
	live := router.New(router.Config{Topic: "im.{event_type}"}, router.Reserved{})
	want, _ := live.Route(e, end)
	for _, override := range []string{"", "im.replay"} {
		rt := Router{inner: live, topic: override, id: id}
		m, err := rt.Route(e, end)
		if err != nil {
			t.Fatal(err)
		}
		wantTopic := "im.message.created"
		if override != "" {
			wantTopic = override
		}
		if m.Topic != wantTopic || string(m.Key) != "7" || string(m.Value) != "{}" {
			t.Errorf("override %q: record %s key %s value %s", override, m.Topic, m.Key, m.Value)
		}
		if topic, _ := rt.Topic(e); topic != wantTopic {
			t.Errorf("override %q: Topic = %s, want %s", override, topic, wantTopic)
		}
		// All the live headers, in order, then replayed and replay_id.
		if len(m.Headers) != len(want.Headers)+2 {
			t.Fatalf("headers %v", m.Headers)
		}
		for i, h := range want.Headers {
			if m.Headers[i].Key != h.Key || string(m.Headers[i].Value) != string(h.Value) {
				t.Errorf("header %d = %s=%s, want %s=%s", i, m.Headers[i].Key, m.Headers[i].Value, h.Key, h.Value)
			}
		}
		n := len(want.Headers)
		if m.Headers[n].Key != router.HeaderReplayed || string(m.Headers[n].Value) != "true" ||
			m.Headers[n+1].Key != router.HeaderReplayID || string(m.Headers[n+1].Value) != id {
			t.Errorf("replay headers %v", m.Headers[n:])
		}
	}
	// An event type giving an invalid topic is no problem with --topic.
	bad := *e
	bad.EventType = "bad type"
	if _, err := (Router{inner: live, id: id}).Route(&bad, end); !errors.Is(err, router.ErrTopic) {
		t.Errorf("routed invalid topic: %v, want ErrTopic", err)
	}
	if m, err := (Router{inner: live, topic: "im.replay", id: id}).Route(&bad, end); err != nil || m.Topic != "im.replay" {
		t.Errorf("--topic with an invalid event type: %s, %v", m.Topic, err)
	}
}

// A dry run checks every record as the real replay does: a row the real
// replay stops on (here invalid JSON) is reported, with its event id and
// positions, in the summary.
func TestDryRunReportsPoison(t *testing.T) {
	sum := &Summary{PerTopic: map[string]int64{}}
	d := newDiscard(Router{inner: router.New(router.Config{Topic: "im.events"}, router.Reserved{})}, sink.Config{BatchBytes: 1 << 20}, sum)
	in := make(chan binlog.Txn, 2)
	end := binlog.Position{File: "b.000001", Pos: 900}
	in <- binlog.Txn{End: end, Events: []binlog.Event{
		{ID: 1, EventType: "m", Payload: []byte(`{}`), Pos: binlog.Position{File: "b.000001", Pos: 800}},
		{ID: 2, EventType: "m", Payload: []byte(`{not json`), Pos: binlog.Position{File: "b.000001", Pos: 850}},
	}}
	close(in)
	var g errgroup.Group
	g.Go(func() error { return d.Run(context.Background(), in) })
	n := 0
	for a := range d.Acks() {
		n += a.Events
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if n != 2 || len(sum.Poison) != 1 || sum.Poison[0].EventID != 2 || sum.Poison[0].Reason != "invalid_json" || sum.Poison[0].TxnEnd != "b.000001:900" {
		t.Fatalf("acked %d events, poison %+v", n, sum.Poison)
	}
	var b strings.Builder
	sum.Print(&b)
	if !strings.Contains(b.String(), "poison: event 2 (invalid_json), row at b.000001:850, transaction ending at b.000001:900") {
		t.Fatalf("summary:\n%s", b.String())
	}
}

// After a failure, the --from to resume with is one replay accepts: in a
// relay log the events carry the source server's positions, so the GTID
// set is named instead.
func TestResumeFrom(t *testing.T) {
	files := Plan{Files: &FileSource{infos: []binlog.FileInfo{{Name: "relay-bin.000002"}}}}
	server := Plan{}
	for _, c := range []struct {
		plan  Plan
		acked binlog.Position
		want  string
	}{
		{files, binlog.Position{File: "mariadb-bin.000007", Pos: 500, GTIDSet: "0-1-9"}, "gtid:0-1-9"},
		{files, binlog.Position{File: "relay-bin.000002", Pos: 900, GTIDSet: "0-1-9"}, "relay-bin.000002:900"},
		{server, binlog.Position{File: "mariadb-bin.000007", Pos: 500, GTIDSet: "0-1-9"}, "mariadb-bin.000007:500"},
		{server, binlog.Position{GTIDSet: "0-1-9"}, "gtid:0-1-9"},
		{server, binlog.Position{}, ""},
	} {
		if got := c.plan.ResumeFrom(c.acked); got != c.want {
			t.Errorf("ResumeFrom(%+v) = %q, want %q", c.acked, got, c.want)
		}
	}
}
