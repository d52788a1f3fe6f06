package pipeline

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/sink"
)

// The start decision, case by case (docs/operations.md, "Where a run
// starts", is this table in prose).
func TestDecide(t *testing.T) {
	srv := checkpoint.Source{ServerID: 1, ServerUUID: "", Flavor: "mariadb"}
	cp := &checkpoint.Checkpoint{File: "b.000003", Pos: 900, GTIDSet: "0-1-9", ServerID: 1, Flavor: "mariadb"}
	streamed := map[int]map[string]string{0: {"binlog_txn_end": "b.000002:500"}, 1: {"binlog_txn_end": "b.000002:300"}}
	backfilled := map[int]map[string]string{0: {"binlog_txn_end": "b.000002:500", HeaderBackfill: "true"}}
	replayed := map[int]map[string]string{0: {"binlog_txn_end": "b.000002:500", "replayed": "true", "replay_id": "r1"}, 1: {"binlog_txn_end": "b.000002:300", "replayed": "true", "replay_id": "r1"}}
	mixed := map[int]map[string]string{0: {"binlog_txn_end": "b.000002:500", "replayed": "true", "replay_id": "r1"}, 1: {"binlog_txn_end": "b.000002:300"}}
	base := Facts{Key: "k", Server: srv, PositionMode: binlog.ModeFile, Start: "latest", Topic: "im.events"}
	with := func(mod func(*Facts)) Facts { f := base; mod(&f); return f }
	cases := []struct {
		name    string
		f       Facts
		action  Action
		start   string
		wantErr error
		errHas  string
		noteHas string
	}{
		{name: "checkpoint: resume", f: with(func(f *Facts) { f.Checkpoint = cp }), action: Resume, noteHas: "resuming from checkpoint"},
		{name: "checkpoint and --start: start ignored", f: with(func(f *Facts) { f.Checkpoint, f.ExplicitStart = cp, true }), action: Resume, noteHas: "--start is ignored"},
		{name: "checkpoint and --backfill: refused", f: with(func(f *Facts) { f.Checkpoint, f.Backfill, f.BackfillFlag = cp, true, true }), wantErr: ErrBackfill, errHas: "first start"},
		{name: "checkpoint and source.backfill: ignored", f: with(func(f *Facts) { f.Checkpoint, f.Backfill = cp, true }), action: Resume, noteHas: "source.backfill is ignored"},
		{name: "checkpoint of another flavor", f: with(func(f *Facts) { f.Checkpoint, f.Server.Flavor = cp, "mysql" }), wantErr: binlog.ErrStart, errHas: "written for a mariadb server"},
		{name: "checkpoint of another server, file mode", f: with(func(f *Facts) { f.Checkpoint, f.Server.ServerID = cp, 2 }), wantErr: binlog.ErrStart, errHas: "position-mode: gtid"},
		{name: "checkpoint of another server, gtid mode: failover", f: with(func(f *Facts) { f.Checkpoint, f.Server.ServerID, f.PositionMode = cp, 2, binlog.ModeGTID }), action: Resume, noteHas: "failover"},
		{name: "no checkpoint, --start", f: with(func(f *Facts) { f.ExplicitStart, f.Start = true, "earliest" }), action: StartAt, start: "earliest"},
		{name: "no checkpoint, empty topic", f: base, action: StartAt, start: "latest"},
		{name: "no checkpoint, empty topic, recover", f: with(func(f *Facts) { f.Recover = true }), action: StartAt, start: "latest", noteHas: "nothing to recover"},
		{name: "no checkpoint, records in the topic: refused with the position", f: with(func(f *Facts) { f.Heads = streamed }), wantErr: binlog.ErrStart, errHas: "--start b.000002:300"},
		{name: "no checkpoint, a topic filled by replay: refused naming the replay, not a lost checkpoint", f: with(func(f *Facts) { f.Heads = replayed }), wantErr: binlog.ErrStart, errHas: "holds records of cdc-outbox replay (replay_id r1; the least advanced partition ends at b.000002:300): to start publishing where the replay ended, without a gap, restart once with --start b.000002:300"},
		{name: "no checkpoint, replayed and streamed records: a lost checkpoint", f: with(func(f *Facts) { f.Heads = mixed }), wantErr: binlog.ErrStart, errHas: "the checkpoint was lost"},
		{name: "no checkpoint, records, recover", f: with(func(f *Facts) { f.Heads, f.Recover = streamed, true }), action: StartAt, start: "b.000002:300", noteHas: "recovering"},
		{name: "no checkpoint, template topic", f: with(func(f *Facts) { f.Template = true }), action: StartAt, start: "latest", noteHas: "template"},
		{name: "no checkpoint, template topic, recover: refused", f: with(func(f *Facts) { f.Template, f.Recover = true, true }), wantErr: ErrRecover, errHas: "template"},
		{name: "backfill on a first start", f: with(func(f *Facts) { f.Backfill = true }), action: Backfill},
		{name: "backfill, template topic", f: with(func(f *Facts) { f.Backfill, f.Template = true, true }), action: Backfill, noteHas: "template"},
		{name: "backfill, interrupted backfill in the topic", f: with(func(f *Facts) { f.Backfill, f.Heads = true, backfilled }), action: Backfill, noteHas: "interrupted backfill"},
		{name: "backfill, streamed records in the topic: refused", f: with(func(f *Facts) { f.Backfill, f.Heads = true, streamed }), wantErr: ErrBackfill, errHas: "not a first start"},
		{name: "Redis lost the key, the mirror has a copy: resume from it", f: with(func(f *Facts) { f.Mirror, f.MirrorTopic = cp, "m" }), action: Resume, noteHas: "copy in the mirror topic"},
		{name: "mirror copy and records in the topic: the copy wins", f: with(func(f *Facts) { f.Mirror, f.Heads = cp, streamed }), action: Resume, noteHas: "copy in the mirror topic"},
		{name: "mirror copy of another server, file mode: refused", f: with(func(f *Facts) { f.Mirror, f.Server.ServerID = cp, 2 }), wantErr: binlog.ErrStart, errHas: "position-mode: gtid"},
		{name: "mirror copy and --backfill: refused", f: with(func(f *Facts) { f.Mirror, f.Backfill, f.BackfillFlag = cp, true, true }), wantErr: ErrBackfill},
		{name: "backfill and --start: the start wins", f: with(func(f *Facts) { f.Backfill, f.ExplicitStart, f.Start = true, true, "b.000001:4" }), action: StartAt, start: "b.000001:4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Decide(c.f)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.errHas) || !IsFatal(err) {
					t.Fatalf("Decide = %v, want fatal %v containing %q", err, c.wantErr, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != c.action || (c.action == StartAt && d.Start != c.start) {
				t.Fatalf("Decide = %+v, want action %d start %q", d, c.action, c.start)
			}
			if d.FromMirror != (c.f.Checkpoint == nil && c.f.Mirror != nil) {
				t.Fatalf("FromMirror = %v", d.FromMirror)
			}
			if c.action == Resume && d.At != cp.Position() {
				t.Fatalf("resume at %v, want %v", d.At, cp.Position())
			}
			if c.noteHas != "" {
				found := false
				for _, n := range d.Notes {
					found = found || strings.Contains(n.Msg, c.noteHas)
				}
				if !found {
					t.Fatalf("notes %+v, want one containing %q", d.Notes, c.noteHas)
				}
			}
		})
	}
}

func TestNeedsHeads(t *testing.T) {
	for _, c := range []struct {
		f    Facts
		want bool
	}{
		{Facts{}, true},
		{Facts{Checkpoint: &checkpoint.Checkpoint{}}, false},
		{Facts{Template: true}, false},
		{Facts{ExplicitStart: true}, false},
		{Facts{Backfill: true}, true},
		{Facts{Mirror: &checkpoint.Checkpoint{}}, false},
	} {
		if got := NeedsHeads(c.f); got != c.want {
			t.Errorf("NeedsHeads(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
}

// The start decision reads the headers of the topic the tables publish to:
// router.topic for the single im table, the mappings' one fixed topic,
// else none (a template, a topic column, several topics).
func TestStartTopic(t *testing.T) {
	dbz := mapping.Config{Preset: mapping.PresetDebezium}
	cases := []struct {
		name     string
		src      binlog.Config
		topic    string
		template bool
	}{
		{"im table", binlog.Config{Schema: "im", Table: "im_event_outbox"}, "im.events", false},
		{"im table, router.topic a template", binlog.Config{Schema: "im", Table: "x"}, "im.{event_type}", true},
		{"debezium: a template over aggregatetype", binlog.Config{Schema: "s", Table: "outbox", Mapping: dbz}, "", true},
		{"debezium with a fixed topic", binlog.Config{Schema: "s", Table: "outbox", Mapping: mapping.Config{Preset: mapping.PresetDebezium, Topic: "orders"}}, "orders", false},
		{"im preset with a header: router.topic", binlog.Config{Schema: "im", Table: "t", Mapping: mapping.Config{Headers: map[string]string{"status": "status"}}}, "im.events", false},
		{"sharded im tables, one topic", binlog.Config{Schema: "im", Tables: []binlog.TableConfig{{Pattern: `im\.t_[0-9]+`}, {Table: "t_00", Mapping: mapping.Config{Headers: map[string]string{"status": "status"}}}}}, "im.events", false},
		{"two fixed topics", binlog.Config{Schema: "im", Tables: []binlog.TableConfig{{Table: "a", Mapping: mapping.Config{Topic: "ta"}}, {Table: "b", Mapping: mapping.Config{Topic: "tb"}}}}, "ta,tb", true},
		{"a topic column", binlog.Config{Schema: "s", Table: "o", Mapping: mapping.Config{Preset: mapping.PresetGeneric, TopicColumn: "topic"}}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt := "im.events"
			if c.template && c.src.Table == "x" {
				rt = "im.{event_type}"
			}
			ts, err := binlog.NewTableSet(c.src, rt)
			if err != nil {
				t.Fatal(err)
			}
			topic, tmpl := StartTopic(ts)
			if tmpl != c.template || c.topic != "" && topic != c.topic {
				t.Fatalf("StartTopic = %q, %v; want %q, %v", topic, tmpl, c.topic, c.template)
			}
		})
	}
}

// The exactly-once rule: the later of the checkpoint (or its mirror copy)
// and the end of the last committed transaction (read_committed).
func TestDecideExactlyOnce(t *testing.T) {
	srv := checkpoint.Source{ServerID: 1, Flavor: "mariadb"}
	cp := &checkpoint.Checkpoint{File: "b.000003", Pos: 900, ServerID: 1, Flavor: "mariadb"}
	later := map[int]map[string]string{0: {"binlog_txn_end": "b.000003:1500"}, 1: {"binlog_txn_end": "b.000003:1200"}, 2: {}}
	earlier := map[int]map[string]string{0: {"binlog_txn_end": "b.000002:100"}}
	partial := map[int]map[string]string{0: {"binlog_txn_end": "b.000003:1500", sink.HeaderTxnPartial: "true"}, 1: {"binlog_txn_end": "b.000003:1200"}}
	allPartial := map[int]map[string]string{0: {"binlog_txn_end": "b.000003:1500", sink.HeaderTxnPartial: "true"}}
	backfilled := map[int]map[string]string{0: {"binlog_txn_end": "b.000009:4", HeaderBackfill: "true"}}
	// A Kafka transaction of several rounds (kafka.transaction-interval):
	// partition 0's newest record is of a binlog transaction that a round
	// cut (marked partial by its round) and that the next round of the
	// same Kafka transaction completed on partition 1; partition 2's is of
	// an earlier binlog transaction of it. The transaction committed whole:
	// the unmarked ones give the end.
	spanning := map[int]map[string]string{0: {"binlog_txn_end": "b.000003:1800", sink.HeaderTxnPartial: "true"},
		1: {"binlog_txn_end": "b.000003:1800"}, 2: {"binlog_txn_end": "b.000003:1300"}}
	// A crash with a transaction of several rounds open: the new start's
	// InitProducerId aborted it, so the read_committed heads are the last
	// committed transaction's. That one ended inside a binlog transaction
	// (a fragment, or a commit forced at 15 s) that the crashed one was to
	// complete: partition 2's newest record is of it, marked partial, and
	// left out; the resume is before it (its first part published again),
	// never after it.
	crashed := map[int]map[string]string{0: {"binlog_txn_end": "b.000003:1500"}, 1: {"binlog_txn_end": "b.000003:1400"},
		2: {"binlog_txn_end": "b.000003:1700", sink.HeaderTxnPartial: "true"}}
	base := Facts{Key: "k", Server: srv, PositionMode: binlog.ModeFile, Start: "latest", Topic: "im.events", ExactlyOnce: true}
	with := func(mod func(*Facts)) Facts { f := base; mod(&f); return f }
	cases := []struct {
		name    string
		f       Facts
		action  Action
		start   string // StartAt
		at      string // Resume
		wantErr error
		noteHas string
	}{
		{name: "committed later than the checkpoint: after the last committed transaction", f: with(func(f *Facts) { f.Checkpoint, f.Committed = cp, later }),
			action: StartAt, start: "b.000003:1500", noteHas: "later than the checkpoint"},
		{name: "committed before the checkpoint: the checkpoint", f: with(func(f *Facts) { f.Checkpoint, f.Committed = cp, earlier }), action: Resume, at: "b.000003:900"},
		{name: "nothing committed: the checkpoint", f: with(func(f *Facts) { f.Checkpoint = cp }), action: Resume, at: "b.000003:900"},
		{name: "at-least-once ignores the committed records", f: with(func(f *Facts) { f.Checkpoint, f.Committed, f.ExactlyOnce = cp, later, false }), action: Resume, at: "b.000003:900"},
		{name: "Redis lost, mirror copy older: after the last committed transaction", f: with(func(f *Facts) { f.Mirror, f.Committed = cp, later }),
			action: StartAt, start: "b.000003:1500", noteHas: "mirror copy"},
		{name: "checkpoint and mirror lost: after the last committed transaction, no --recover needed", f: with(func(f *Facts) { f.Committed, f.Heads = later, later }),
			action: StartAt, start: "b.000003:1500", noteHas: "no checkpoint"},
		{name: "a partial binlog transaction is not a resume position", f: with(func(f *Facts) { f.Committed = partial }), action: StartAt, start: "b.000003:1200"},
		{name: "only partial records, no checkpoint: refused as at-least-once", f: with(func(f *Facts) { f.Committed, f.Heads = allPartial, allPartial }), wantErr: binlog.ErrStart},
		{name: "a Kafka transaction of several rounds: after its last whole binlog transaction", f: with(func(f *Facts) { f.Checkpoint, f.Committed = cp, spanning }),
			action: StartAt, start: "b.000003:1800", noteHas: "later than the checkpoint"},
		{name: "crash mid-transaction of several rounds: after the last committed one, never after the partial record", f: with(func(f *Facts) { f.Checkpoint, f.Committed = cp, crashed }),
			action: StartAt, start: "b.000003:1500"},
		{name: "crash mid-transaction, checkpoint lost: the same", f: with(func(f *Facts) { f.Committed, f.Heads = crashed, crashed }),
			action: StartAt, start: "b.000003:1500", noteHas: "no checkpoint"},
		{name: "backfill records are not a resume position", f: with(func(f *Facts) { f.Checkpoint, f.Committed = cp, backfilled }), action: Resume, at: "b.000003:900"},
		{name: "checkpoint of another server: the checkpoint rules", f: with(func(f *Facts) { f.Checkpoint, f.Committed, f.Server.ServerID = cp, later, 2 }), wantErr: binlog.ErrStart},
		{name: "no checkpoint, --start: the operator's start", f: with(func(f *Facts) { f.Committed, f.ExplicitStart, f.Start = later, true, "b.000001:4" }),
			action: StartAt, start: "b.000001:4"},
		{name: "--backfill with a checkpoint: refused", f: with(func(f *Facts) { f.Checkpoint, f.Committed, f.Backfill, f.BackfillFlag = cp, later, true, true }), wantErr: ErrBackfill},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Decide(c.f)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("Decide = %+v, %v, want %v", d, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != c.action || c.action == StartAt && d.Start != c.start || c.action == Resume && d.At.FilePos() != c.at {
				t.Fatalf("Decide = %+v, want action %d start %q at %q", d, c.action, c.start, c.at)
			}
			if c.noteHas != "" && !slices.ContainsFunc(d.Notes, func(n Note) bool { return strings.Contains(n.Msg, c.noteHas) }) {
				t.Fatalf("notes %+v, want one containing %q", d.Notes, c.noteHas)
			}
			// The start's Info line names the configured start only when
			// the run starts there (not at the last committed transaction).
			if msg := startedMsg(d, c.f.Start); c.action == StartAt && strings.Contains(msg, "configured start") != (c.start == c.f.Start) {
				t.Fatalf("start line %q for a start at %s (configured %s)", msg, d.Start, c.f.Start)
			}
		})
	}
}

// The server a stored position was read from, against the source now:
// unknown fields (checkpoints of older versions, MariaDB's missing
// server_uuid) match anything.
func TestSameServer(t *testing.T) {
	srv := checkpoint.Source{ServerID: 1, ServerUUID: "u1", Flavor: "mysql"}
	for _, c := range []struct {
		stored checkpoint.Source
		same   bool
	}{
		{srv, true},
		{checkpoint.Source{}, true},
		{checkpoint.Source{ServerID: 1, Flavor: "mysql"}, true},
		{checkpoint.Source{ServerID: 2, ServerUUID: "u1", Flavor: "mysql"}, false},
		{checkpoint.Source{ServerID: 1, ServerUUID: "u2", Flavor: "mysql"}, false},
		{checkpoint.Source{ServerID: 1, Flavor: "mariadb"}, false},
	} {
		if got := sameServer(c.stored, srv); got != c.same {
			t.Errorf("sameServer(%+v) = %v, want %v", c.stored, got, c.same)
		}
	}
	if !sameServer(checkpoint.Source{ServerID: 1, Flavor: "mariadb"}, checkpoint.Source{ServerID: 1, Flavor: "mariadb"}) {
		t.Error("MariaDB without server_uuid")
	}
}
