package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"go.uber.org/zap"
)

// Facts are what the start decision looks at, gathered by the Publisher
// at its first pipeline start (see docs/operations.md, "Where a run
// starts", for the table of cases).
type Facts struct {
	// Checkpoint: the stored checkpoint, nil when there is none.
	Checkpoint *checkpoint.Checkpoint
	// Mirror: the checkpoint's copy in checkpoint.mirror-topic, nil when
	// there is none (or no mirror); MirrorTopic names the topic.
	Mirror      *checkpoint.Checkpoint
	MirrorTopic string
	// Key: the checkpoint's key, for messages.
	Key string
	// Server: the source server now.
	Server checkpoint.Source
	// PositionMode: source.position-mode (binlog.ModeFile or ModeGTID).
	PositionMode string
	// Start: the start option (source.start, or --start).
	Start string
	// ExplicitStart: Start came from --start, the operator's choice for
	// this run, rather than from the configuration file.
	ExplicitStart bool
	// Backfill: source.backfill or --backfill; BackfillFlag: --backfill.
	Backfill, BackfillFlag bool
	// Recover: checkpoint.recover or --recover-checkpoint.
	Recover bool
	// Topic: router.topic; Template: it has {placeholders}.
	Topic    string
	Template bool
	// Heads: for each partition of the fixed topic holding records, the
	// headers of its newest record; nil when not read (NeedsHeads false).
	Heads map[int]map[string]string
	// ExactlyOnce: kafka.delivery exactly-once. Committed: for each
	// partition of the fixed topic, the headers of its newest committed
	// record (read_committed, after sink.SettleTransactions); nil when not
	// read (at-least-once, a template topic).
	ExactlyOnce bool
	Committed   map[int]map[string]string
}

// Action is what the first pipeline start does.
type Action int

// Actions.
const (
	// Resume at Decision.At: the stored checkpoint.
	Resume Action = iota
	// StartAt resolves Decision.Start (a start option: the configured
	// one, or one recovered from the topic's headers), checks it against
	// the server and stores it as the first checkpoint.
	StartAt
	// Backfill publishes a consistent snapshot's rows first, then streams
	// from the snapshot's position.
	Backfill
)

// Note is a message the decision asks to log (a Warn or an Info).
type Note struct {
	Warn   bool
	Msg    string
	Fields []zap.Field
}

// Decision is where the first pipeline start begins.
type Decision struct {
	Action Action
	At     binlog.Position // Resume
	Start  string          // StartAt
	// FromMirror: Resume at the mirror's copy (the Redis key was lost);
	// the position is to be written back to Redis.
	FromMirror bool
	Notes      []Note
}

// StartTopic returns Facts.Topic and Facts.Template for a source's tables
// (binlog.NewTableSet with router.topic): the topic whose newest records'
// binlog_txn_end headers tell whether and how far cdc-outbox published
// without a checkpoint. The single im table: router.topic (a template
// when it has {event_type}). With mappings (every record carries
// binlog_txn_end): the one fixed topic they all publish to; several fixed
// topics, a template over columns or a topic column count as a template
// (the start cannot read every topic the rows may have gone to), named by
// the first mapping's topic or the topics joined.
func StartTopic(ts *binlog.TableSet) (topic string, template bool) {
	if ts.Legacy() {
		t := ts.DefaultTopic()
		return t, strings.Contains(t, "{")
	}
	fixed := ts.FixedTopics()
	if !ts.Variable() && len(fixed) == 1 {
		return fixed[0], false
	}
	if len(fixed) > 0 && !ts.Variable() {
		return strings.Join(fixed, ","), true
	}
	return "the mappings' topic templates or topic columns", true
}

// NeedsHeads reports whether Decide needs Facts.Heads: no checkpoint, a
// fixed topic, and no --start (with --start the operator decided).
func NeedsHeads(f Facts) bool {
	return f.Checkpoint == nil && f.Mirror == nil && !f.Template && !f.ExplicitStart
}

// Decide returns where the first pipeline start begins, or the error that
// refuses to start (wrapping binlog.ErrStart, ErrRecover or ErrBackfill:
// all fatal), naming the position to pass where one is known. It is a
// pure function of f.
func Decide(f Facts) (Decision, error) {
	if d, ok := decideCommitted(f); ok {
		return d, nil
	}
	if cp := f.Checkpoint; cp != nil {
		return decideResume(f, cp)
	}
	if m := f.Mirror; m != nil {
		// Redis lost the key (flushed, evicted, restarted without
		// persistence): the copy is a position every record before which
		// was acknowledged, so resuming there loses nothing.
		d, err := decideResume(f, m)
		d.FromMirror = true
		d.Notes = append([]Note{{Warn: true, Msg: "the checkpoint is missing from Redis: resuming from its copy in the mirror topic (records after it are published again); it is written back to Redis",
			Fields: []zap.Field{zap.String("key", f.Key), zap.String("mirror_topic", f.MirrorTopic), zap.String("file", m.File), zap.Uint32("pos", m.Pos),
				zap.String("gtid_set", m.GTIDSet), zap.Time("copied_at", m.UpdatedAt)}}}, d.Notes...)
		return d, err
	}
	if f.Backfill && !f.ExplicitStart {
		return decideBackfill(f)
	}
	d := Decision{Action: StartAt, Start: f.Start}
	if f.ExplicitStart {
		return d, nil
	}
	if f.Template {
		if f.Recover {
			return d, fmt.Errorf("%w: router.topic %s is a template: the position to resume from is only computed for a fixed topic; "+
				"give --start <file>:<pos> (the smallest binlog_txn_end among the newest records of every partition of every topic)", ErrRecover, f.Topic)
		}
		d.Notes = append(d.Notes, Note{Warn: true, Msg: "no checkpoint, and the topic is a template: cannot tell whether cdc-outbox ran before; starting from the configured start",
			Fields: []zap.Field{zap.String("start", f.Start)}})
		return d, nil
	}
	resume, part := LeastAdvanced(txnEnds(f.Heads))
	if resume == "" {
		if f.Recover {
			d.Notes = append(d.Notes, Note{Msg: "no checkpoint and nothing to recover: the topic holds no records of cdc-outbox; starting from the configured start",
				Fields: []zap.Field{zap.String("topic", f.Topic), zap.String("start", f.Start)}})
		}
		return d, nil
	}
	if f.Recover {
		d.Start = resume
		d.Notes = append(d.Notes, Note{Warn: true, Msg: "no checkpoint: recovering it from the topic (checkpoint.recover / --recover-checkpoint): resuming from the least advanced partition's newest binlog_txn_end; records after it are published again",
			Fields: []zap.Field{zap.String("key", f.Key), zap.String("topic", f.Topic), zap.String("resume", resume), zap.Int("from_partition", part),
				zap.Any("partitions", txnEnds(f.Heads))}})
		return d, nil
	}
	if id, ok := replayedOnly(f.Heads); ok {
		// A topic filled by cdc-outbox replay (its first use, or a new
		// topic filled before the live publisher starts): not a lost
		// checkpoint.
		return d, fmt.Errorf("%w: no checkpoint under Redis key %s, and topic %s holds records of cdc-outbox replay (replay_id %s; the least advanced partition ends at %s): "+
			"to start publishing where the replay ended, without a gap, restart once with --start %s; or with --start latest to skip to now, losing what was committed since the replayed range",
			binlog.ErrStart, f.Key, f.Topic, id, resume, resume)
	}
	return d, fmt.Errorf("%w: no checkpoint under Redis key %s, but topic %s already holds records published by cdc-outbox "+
		"(the least advanced partition ends at %s): the checkpoint was lost (Redis flushed, or no persistence) or the key changed. "+
		"Restart once with --start %s to resume without loss (some records may be published twice), or with --recover-checkpoint to do so automatically, "+
		"or with --start latest to skip to now, losing what was committed since",
		binlog.ErrStart, f.Key, f.Topic, resume, resume)
}

// sameServer reports whether the server a stored position was read from
// (stored; zero fields unknown, as in checkpoints of older versions) is
// the server srv: the same flavor, server_id and (MySQL) server_uuid.
func sameServer(stored, srv checkpoint.Source) bool {
	return (stored.Flavor == "" || stored.Flavor == srv.Flavor) && (stored.ServerID == 0 || stored.ServerID == srv.ServerID) &&
		(stored.ServerUUID == "" || srv.ServerUUID == "" || stored.ServerUUID == srv.ServerUUID)
}

func decideResume(f Facts, cp *checkpoint.Checkpoint) (Decision, error) {
	d := Decision{Action: Resume, At: cp.Position()}
	if f.BackfillFlag {
		return d, backfillError("--backfill is for the first start, but a checkpoint exists under Redis key %s (%s:%d): "+
			"the rows of the snapshot were published then; run without --backfill to resume from the checkpoint", f.Key, cp.File, cp.Pos)
	}
	if f.Backfill {
		d.Notes = append(d.Notes, Note{Msg: "source.backfill is ignored: a checkpoint exists (the backfill ran at the first start)", Fields: []zap.Field{zap.String("key", f.Key)}})
	}
	srv := f.Server
	if cp.Flavor != "" && cp.Flavor != srv.Flavor {
		return d, fmt.Errorf("%w: checkpoint %s was written for a %s server but the source is %s", binlog.ErrStart, f.Key, cp.Flavor, srv.Flavor)
	}
	otherServer := !sameServer(checkpoint.Source{ServerID: cp.ServerID, ServerUUID: cp.ServerUUID, Flavor: cp.Flavor}, srv)
	if otherServer && f.PositionMode == binlog.ModeFile {
		return d, fmt.Errorf("%w: checkpoint %s (%s:%d) was written for the server with server_id %d uuid %q, but the source has server_id %d uuid %q: "+
			"a binlog file:pos of another server is meaningless. After a failover, resume with position-mode: gtid; "+
			"if source.addr is wrong, fix it; to start anew, cdc-outbox checkpoint set <position> (or checkpoint reset --yes for key %s, then --start)",
			binlog.ErrStart, f.Key, cp.File, cp.Pos, cp.ServerID, cp.ServerUUID, srv.ServerID, srv.ServerUUID, f.Key)
	}
	if otherServer {
		d.Notes = append(d.Notes, Note{Warn: true, Msg: "checkpoint was written for another server; resuming by GTID set (failover)",
			Fields: []zap.Field{zap.Uint32("checkpoint_server_id", cp.ServerID), zap.Uint32("source_server_id", srv.ServerID), zap.String("gtid_set", cp.GTIDSet)}})
	}
	if f.ExplicitStart {
		d.Notes = append(d.Notes, Note{Warn: true, Msg: "--start is ignored: a checkpoint exists; to start elsewhere, use cdc-outbox checkpoint set <position> (or checkpoint reset --yes, then --start)",
			Fields: []zap.Field{zap.String("key", f.Key), zap.String("start", f.Start)}})
	}
	d.Notes = append(d.Notes, Note{Msg: "resuming from checkpoint", Fields: []zap.Field{zap.String("key", f.Key), zap.String("file", cp.File),
		zap.Uint32("pos", cp.Pos), zap.String("gtid_set", cp.GTIDSet), zap.Time("updated_at", cp.UpdatedAt)}})
	return d, nil
}

// decideBackfill refuses a backfill when the (fixed) topic shows that a
// publisher already streamed the binlog (the checkpoint was lost, not a
// first start): the backfill would skip what was committed since the last
// checkpoint. A topic whose newest records are all backfill records is an
// interrupted backfill: it runs again (its records are published again,
// with the same event_id).
func decideBackfill(f Facts) (Decision, error) {
	d := Decision{Action: Backfill}
	if f.Template {
		d.Notes = append(d.Notes, Note{Warn: true, Msg: "backfill: the topic is a template: cannot tell whether cdc-outbox ran before; backfilling"})
		return d, nil
	}
	streamed := 0
	for _, part := range slices.Sorted(maps.Keys(f.Heads)) {
		h := f.Heads[part]
		if h[router.HeaderTxnEnd] != "" && h[HeaderBackfill] != "true" {
			streamed++
			d.Notes = append(d.Notes, Note{Warn: true, Msg: "backfill: newest record of a partition was streamed from the binlog",
				Fields: []zap.Field{zap.Int("partition", part), zap.String("binlog_txn_end", h[router.HeaderTxnEnd])}})
		}
	}
	if streamed > 0 {
		return d, backfillError("no checkpoint under Redis key %s, but topic %s holds records streamed by cdc-outbox from the binlog: "+
			"this is not a first start (the checkpoint was lost?), and a backfill would skip what was committed since the last checkpoint. "+
			"Run without --backfill (and source.backfill: false), with --recover-checkpoint", f.Key, f.Topic)
	}
	if len(f.Heads) > 0 {
		d.Notes = append(d.Notes, Note{Warn: true, Msg: "backfill: the topic holds backfill records of an interrupted backfill; backfilling again (its rows are published again, with the same event_id)",
			Fields: []zap.Field{zap.String("topic", f.Topic), zap.Int("partitions_with_records", len(f.Heads))}})
	}
	return d, nil
}

// txnEnds picks each partition's binlog_txn_end header.
// replayedOnly reports whether every partition's newest record that
// carries a binlog_txn_end was published by cdc-outbox replay (header
// replayed), and the replay_id of one of them.
func replayedOnly(heads map[int]map[string]string) (id string, ok bool) {
	for _, h := range heads {
		if h[router.HeaderTxnEnd] == "" {
			continue
		}
		if h[router.HeaderReplayed] != "true" {
			return "", false
		}
		id = h[router.HeaderReplayID]
		ok = true
	}
	return id, ok
}

func txnEnds(heads map[int]map[string]string) map[int]string {
	out := make(map[int]string, len(heads))
	for p, h := range heads {
		if v := h[router.HeaderTxnEnd]; v != "" {
			out[p] = v
		}
	}
	return out
}

// LeastAdvanced returns the smallest file:pos among the partitions' newest
// binlog_txn_end headers (compared as binlog positions: file sequence
// numbers as numbers, so .1000000 follows .999999), and its partition:
// every transaction before it was acknowledged. Unparsable headers are
// ignored; "" and -1 when none.
func LeastAdvanced(heads map[int]string) (string, int) {
	var oldest binlog.Position
	part := -1
	for _, id := range slices.Sorted(maps.Keys(heads)) {
		st, err := binlog.ParseStart(heads[id])
		if err != nil || st.Kind != binlog.StartFilePos {
			continue
		}
		p := binlog.Position{File: st.File, Pos: st.Pos}
		if part < 0 || binlog.ComparePos(p, oldest) < 0 {
			oldest, part = p, id
		}
	}
	if part < 0 {
		return "", -1
	}
	return oldest.FilePos(), part
}

// decideCommitted is the exactly-once rule: the resume position is the
// later of the stored checkpoint (or its mirror copy) and the end of the
// last committed transaction (CommittedEnd of f.Committed). ok is false
// when the rule does not apply (at-least-once, nothing committed, a
// checkpoint of another server, --backfill or an explicit --start on a
// first start, or a checkpoint at or after the committed end): the other
// rules decide.
func decideCommitted(f Facts) (Decision, bool) {
	if !f.ExactlyOnce || f.BackfillFlag {
		return Decision{}, false
	}
	end, part := CommittedEnd(f.Committed)
	if end == "" {
		return Decision{}, false
	}
	st, _ := binlog.ParseStart(end)
	at := binlog.Position{File: st.File, Pos: st.Pos}
	fields := []zap.Field{zap.String("key", f.Key), zap.String("topic", f.Topic), zap.String("resume", end), zap.Int("from_partition", part)}
	base, what := f.Checkpoint, "the checkpoint"
	if base == nil {
		base, what = f.Mirror, "the checkpoint's mirror copy"
	}
	if base != nil {
		if base.ServerID != 0 && base.ServerID != f.Server.ServerID || base.Flavor != "" && base.Flavor != f.Server.Flavor {
			return Decision{}, false // a failover: file positions of two servers do not compare
		}
		if binlog.ComparePos(at, base.Position()) <= 0 {
			return Decision{}, false
		}
		fields = append(fields, zap.String("checkpoint", base.Position().FilePos()))
		return Decision{Action: StartAt, Start: end, Notes: []Note{{Msg: "exactly-once: the last committed transaction is later than " + what +
			" (written at an interval): resuming after it, so nothing committed is published again", Fields: fields}}}, true
	}
	if f.ExplicitStart || f.Backfill {
		return Decision{}, false
	}
	return Decision{Action: StartAt, Start: end, Notes: []Note{{Warn: true, Msg: "exactly-once: no checkpoint (nor mirror copy), but the topic holds committed transactions: resuming after the last one",
		Fields: fields}}}, true
}

// CommittedEnd returns the position after the last committed transaction
// of exactly-once delivery, from the newest committed record of each
// partition (Facts.Committed): the largest binlog_txn_end among them, and
// its partition. Rounds commit in binlog order and a Kafka transaction
// commits whole, so every binlog transaction up to it was committed.
// Records marked sink.HeaderTxnPartial (their binlog transaction spans
// Kafka transactions) and backfill records are left out; so a crash
// between the Kafka transactions of one large binlog transaction resumes
// before it (its first part is published again), never after it. "" and
// -1 when none.
func CommittedEnd(heads map[int]map[string]string) (string, int) {
	var newest binlog.Position
	part := -1
	for _, id := range slices.Sorted(maps.Keys(heads)) {
		h := heads[id]
		if h[sink.HeaderTxnPartial] == "true" || h[HeaderBackfill] == "true" {
			continue
		}
		st, err := binlog.ParseStart(h[router.HeaderTxnEnd])
		if err != nil || st.Kind != binlog.StartFilePos {
			continue
		}
		p := binlog.Position{File: st.File, Pos: st.Pos}
		if part < 0 || binlog.ComparePos(p, newest) > 0 {
			newest, part = p, id
		}
	}
	if part < 0 {
		return "", -1
	}
	return newest.FilePos(), part
}
