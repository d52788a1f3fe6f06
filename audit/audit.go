package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"
)

// Observer receives the audit's counts (health.AuditSource implements
// it); every method must be cheap and must not block.
type Observer interface {
	// Count adds n to table's result r.
	Count(table string, r Result, n int)
	// Read adds records read from Kafka and rows read from the table.
	Read(records, rows int)
	// Progress reports table's cursor (the largest id audited) and how
	// many ids the checkpoint has passed beyond it.
	Progress(table string, audited, behind uint64)
	// Running reports that Run began (true) or returned (false): an
	// audit that stopped for good is then visible, not only logged.
	Running(bool)
	// Interrupted counts a session that failed and is retried after a
	// backoff (the database, Kafka or Redis unreachable).
	Interrupted()
}

// Source is what the audit reads of one source: its database and outbox
// tables, its Kafka cluster and its checkpoint (router.topic is the
// mappings' default topic).
type Source struct {
	Name       string
	Source     binlog.Config
	Topic      string
	Kafka      sink.Config
	Checkpoint checkpoint.Config
}

// Auditor is the continuous audit of one source (see the package doc).
type Auditor struct {
	cfg Config
	src Source
	obs Observer
	log *zap.Logger
	now func() time.Time
}

// New returns the audit of src; obs may be nil.
func New(cfg Config, src Source, obs Observer, log *zap.Logger) *Auditor {
	if obs == nil {
		obs = nopObserver{}
	}
	return &Auditor{cfg: cfg, src: src, obs: obs, log: log.Named("audit"), now: time.Now}
}

type nopObserver struct{}

func (nopObserver) Count(string, Result, int)       {}
func (nopObserver) Read(int, int)                   {}
func (nopObserver) Progress(string, uint64, uint64) {}
func (nopObserver) Running(bool)                    {}
func (nopObserver) Interrupted()                    {}

// Run audits until ctx is cancelled (then it returns nil). A failure (the
// database, Kafka or Redis unreachable) is logged and retried after a
// backoff of Interval to a minute: the audit never stops the publisher.
// Only a state it cannot parse (ErrState) or a source without an
// integer-id table (ErrNoTable) ends it with an error.
//
// It reports Running(true) when it begins and Running(false) when it
// returns, and each retried failure as Interrupted.
func (a *Auditor) Run(ctx context.Context) error {
	a.obs.Running(true)
	defer a.obs.Running(false)
	wait := a.cfg.Interval
	for {
		err := a.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrState) || errors.Is(err, ErrNoTable) {
			return err
		}
		a.obs.Interrupted()
		a.log.Warn("audit interrupted; retrying", zap.Error(err), zap.Duration("in", wait))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// mark is the largest id of each table read at one moment, and the binlog
// end read just after: once the checkpoint passed end, every row read
// then was acknowledged.
type mark struct {
	at    time.Time
	maxID map[string]uint64
	end   binlog.Position
}

// ref is a record's place, for the resume offset.
type ref struct {
	offset int64
	id     uint64
}

// run is one session's working state (rebuilt after a failure from the
// stored state).
type run struct {
	*Auditor
	conn      *binlog.Conn
	flavor    string
	store     *checkpoint.Store
	targets   []verify.Target
	st        *State
	consumers map[string]*verify.Consumer
	readTo    map[string]map[int]int64 // from the stored state: below, records are re-read
	win       window
	hashes    map[uint64]uint64
	seed      maphash.Seed
	keys      map[string]keyState
	refs      map[string]map[int][]ref
	marks     []mark
	round     int
	ordered   bool
	found     map[Result][]string // event ids found this round, by result
	minCursor uint64              // the smallest cursor (settle)
	suspect   map[uint64]bool     // the suspects' ids (settle)
}

func (a *Auditor) session(ctx context.Context) error {
	srv, err := binlog.Connect(ctx, a.src.Source, a.log)
	if err != nil {
		return err
	}
	ts, err := binlog.NewTableSet(a.src.Source, a.src.Topic)
	if err != nil {
		srv.Close()
		return err
	}
	tables, err := ts.Check(srv)
	flavor := srv.Flavor()
	srv.Close()
	if err != nil {
		return err
	}
	r := &run{Auditor: a, flavor: flavor, consumers: map[string]*verify.Consumer{}, hashes: map[uint64]uint64{},
		seed: maphash.MakeSeed(), keys: map[string]keyState{}, refs: map[string]map[int][]ref{}}
	for _, t := range tables {
		tg := verify.NewTarget(t)
		if !tg.IntID {
			a.log.Warn("not audited: the audit needs an integer id column (verify checks string ids)", zap.String("table", tg.Table))
			continue
		}
		r.targets = append(r.targets, tg)
		r.ordered = r.ordered || tg.Order != ""
	}
	if len(r.targets) == 0 {
		return fmt.Errorf("%w among %d tables of source %s", ErrNoTable, len(tables), a.src.Name)
	}
	if r.conn, err = binlog.Dial(ctx, a.src.Source, a.src.Source.Schema); err != nil {
		return err
	}
	defer r.conn.Close()
	r.store = checkpoint.NewStore(a.src.Checkpoint)
	defer r.store.Close()
	if err := r.start(ctx); err != nil {
		return err
	}
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		if err := r.step(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// start loads the stored state, or begins at the present: the topics'
// ends read first, then the tables' largest ids (every record before
// those ends is of a row at or below them).
func (r *run) start(ctx context.Context) error {
	b, err := r.store.LoadAudit(ctx)
	if err != nil {
		return err
	}
	key := checkpoint.AuditKey(r.src.Checkpoint.Key)
	if b != nil {
		if r.st, err = ParseState(key, b); err != nil {
			return err
		}
	} else {
		r.st = newState()
	}
	r.readTo = r.st.ReadTo
	r.st.ReadTo = map[string]map[int]int64{}
	fresh := false
	for _, tg := range r.targets {
		if _, ok := r.st.Cursors[tg.Table]; !ok {
			fresh = true
		}
	}
	if fresh {
		if err := r.begin(ctx); err != nil {
			return err
		}
	}
	for t, offs := range r.st.Resume {
		c := r.consumer(t)
		for p, o := range offs {
			c.Seek(p, o)
		}
	}
	r.settle()
	r.win.base = r.floor()
	r.progress()
	return r.save(ctx)
}

// begin places a first audit: at audit.from-id with the topics read from
// their beginning, or at the present: the topics' ends read first, then
// the tables' largest ids (every record before those ends is of a row
// at or below them).
func (r *run) begin(ctx context.Context) error {
	if r.cfg.FromID == 0 {
		// Topics of the present rows: a template's topics over the table.
		for _, tg := range r.targets {
			topics, err := tg.Topics(r.conn, 0, math.MaxInt64)
			if err != nil && !errors.Is(err, verify.ErrNoTopics) {
				return err
			}
			for _, t := range topics {
				if _, ok := r.st.Resume[t]; ok {
					continue
				}
				c := r.consumer(t)
				if err := c.SeekEnd(ctx); err != nil {
					return fmt.Errorf("audit: read the end of topic %s: %w", t, err)
				}
				r.st.Resume[t] = c.Offsets()
			}
		}
	}
	now := r.now()
	for _, tg := range r.targets {
		if _, ok := r.st.Cursors[tg.Table]; ok {
			continue
		}
		at := r.cfg.FromID - 1
		if r.cfg.FromID == 0 {
			hi, err := r.maxID(tg)
			if err != nil {
				return err
			}
			at = hi
		}
		r.st.Cursors[tg.Table], r.st.CursorTimes[tg.Table] = at, now
		r.log.Info("audit begins", zap.String("table", tg.Table), zap.Uint64("after_id", at))
	}
	return nil
}

func (r *run) consumer(topic string) *verify.Consumer {
	c := r.consumers[topic]
	if c == nil {
		c = verify.NewConsumer(r.src.Kafka, topic)
		if r.src.Kafka.Delivery == sink.DeliveryExactlyOnce {
			c.SetReadCommitted()
		}
		r.consumers[topic] = c
	}
	return c
}

func (r *run) maxID(tg verify.Target) (uint64, error) {
	res, err := r.conn.Execute(fmt.Sprintf("SELECT COALESCE(MAX(%s),0) FROM %s", tg.IDColumn, tg.Quoted))
	if err != nil {
		return 0, fmt.Errorf("audit: read the largest id of %s: %w", tg.Table, err)
	}
	v, _ := res.GetUint(0, 0)
	return v, nil
}

// audited reports whether id's range was audited (at or below every
// cursor, and not a suspect awaiting confirmation).
func (r *run) audited(id uint64) bool {
	return id <= r.minCursor && !r.suspect[id]
}

// settle recomputes minCursor and the suspect set after the cursors or
// suspects changed.
func (r *run) settle() {
	r.minCursor = uint64(1<<64 - 1)
	for _, c := range r.st.Cursors {
		r.minCursor = min(r.minCursor, c)
	}
	r.suspect = make(map[uint64]bool, len(r.st.Suspects))
	for _, s := range r.st.Suspects {
		r.suspect[s.ID] = true
	}
}

// floor is the largest id below which nothing needs remembering: the
// smallest cursor, or below the smallest suspect.
func (r *run) floor() uint64 {
	f := uint64(1<<64 - 1)
	for _, c := range r.st.Cursors {
		f = min(f, c)
	}
	for _, s := range r.st.Suspects {
		f = min(f, s.ID-1)
	}
	return f
}

// step is one round: read the new records, note a mark, audit the ranges
// the checkpoint has passed (by Lag), save the state.
func (r *run) step(ctx context.Context) error {
	r.round++
	r.found = map[Result][]string{}
	m := mark{maxID: map[string]uint64{}}
	for _, tg := range r.targets {
		hi, err := r.maxID(tg)
		if err != nil {
			return err
		}
		m.maxID[tg.Table] = hi
		// New topics (a template's) of the rows beyond the cursor.
		if hi > r.st.Cursors[tg.Table] {
			topics, err := tg.Topics(r.conn, r.st.Cursors[tg.Table]+1, hi)
			if err != nil && !errors.Is(err, verify.ErrNoTopics) {
				return err
			}
			for _, t := range topics {
				r.consumer(t)
			}
		}
	}
	end, err := binlog.LatestOn(r.conn.Execute, r.flavor)
	if err != nil {
		return err
	}
	m.at, m.end = r.now(), end
	if err := r.read(ctx); err != nil {
		return err
	}
	r.marks = append(r.marks, m)
	cp, err := r.store.Load(ctx)
	if err != nil {
		return err
	}
	if cp != nil {
		if err := r.audit(ctx, cp.Position()); err != nil {
			return err
		}
	}
	r.forgetKeys()
	r.report()
	// Saved even when ctx was cancelled meanwhile (a stop): what this
	// round counted is not counted again (the store's timeout bounds it).
	return r.save(context.WithoutCancel(ctx))
}

// read reads every topic's new records.
func (r *run) read(ctx context.Context) error {
	topics := make([]string, 0, len(r.consumers))
	for t := range r.consumers {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	n := 0
	for _, t := range topics {
		readTo, armed := r.readTo[t], r.st.Armed[t]
		err := r.consumers[t].Each(ctx, func(rec verify.Record) error {
			n++
			r.record(t, rec, readTo, armed)
			return nil
		})
		if err != nil {
			return fmt.Errorf("audit: read topic %s: %w", t, err)
		}
	}
	r.obs.Read(n, 0)
	return nil
}

// table is the table a record counts under: the one table, or the first
// (records name no table).
func (r *run) table() string { return r.targets[0].Table }

func (r *run) record(topic string, rec verify.Record, readTo, armed map[int]int64) {
	id, err := strconv.ParseUint(rec.EventID, 10, 64)
	f := recordFacts{HasID: err == nil && rec.EventID != "", Audited: r.audited(id), Seen: r.win.has(id)}
	if to, ok := readTo[rec.Partition]; ok && rec.Offset < to {
		f.Reread = true
	}
	if from, ok := armed[rec.Partition]; ok && rec.Offset >= from {
		f.Armed = true
	}
	v := classify(f)
	switch v {
	case ignore:
		return
	case late:
		r.count(r.table(), Late, 1, rec.EventID)
		return
	case replay:
		r.count(r.table(), Duplicate, 1, "")
	case first, rebuild:
		if !r.win.set(id) {
			return
		}
		if Sampled(id, r.cfg.Sample) && rec.Value != nil {
			r.hashes[id] = maphash.Bytes(r.seed, rec.Value)
		}
		refs := r.refs[topic]
		if refs == nil {
			refs = map[int][]ref{}
			r.refs[topic] = refs
		}
		refs[rec.Partition] = append(refs[rec.Partition], ref{rec.Offset, id})
	}
	k := topic + "\x00" + rec.Key
	st, known := r.keys[k]
	seq := rec.SeqNo
	if o := r.targets[0].Order; o != "" && o != "seq_no" {
		seq, _ = strconv.ParseInt(rec.Headers[o], 10, 64)
	}
	next, split, reordered := checkKey(st, known, rec.Partition, seq, v == first || v == rebuild, r.ordered, r.round)
	r.keys[k] = next
	if v == rebuild {
		return
	}
	if split {
		r.count(r.table(), Split, 1, rec.EventID)
		r.detail(Split, fmt.Sprintf("topic %s key %s on partitions %d and %d (event %s, offset %d)", topic, rec.Key, st.Partition, rec.Partition, rec.EventID, rec.Offset))
	}
	if reordered {
		r.count(r.table(), Reordered, 1, rec.EventID)
		r.detail(Reordered, fmt.Sprintf("topic %s key %s: order %d (event %s) after %d, partition %d offset %d", topic, rec.Key, seq, rec.EventID, st.MaxSeq, rec.Partition, rec.Offset))
	}
}

// count counts n of result res for table, remembering the event id of a
// problem for the round's finding.
func (r *run) count(table string, res Result, n int, eventID string) {
	r.obs.Count(table, res, n)
	r.st.add(table, res, n)
	if eventID != "" && len(r.found[res]) < 20 {
		r.found[res] = append(r.found[res], eventID)
	}
}

// details: the first problem of each kind this round, for the log and the finding.
func (r *run) detail(res Result, s string) {
	k := Result("detail:" + string(res))
	if len(r.found[k]) == 0 {
		r.found[k] = []string{s}
	}
}

// audit audits, for each table, the ids up to the newest mark the
// checkpoint has passed at least Lag ago (at most RowsPerSecond ×
// Interval ids a round), confirming the previous rounds' suspects first.
func (r *run) audit(ctx context.Context, cp binlog.Position) error {
	now := r.now()
	idx := -1
	for i, m := range r.marks {
		if now.Sub(m.at) >= r.cfg.Lag && Passed(r.flavor, cp, m.end) {
			idx = i
		}
	}
	if idx < 0 {
		r.progress()
		return nil
	}
	m := r.marks[idx]
	if err := r.confirm(); err != nil {
		return err
	}
	caughtUp := true
	for _, tg := range r.targets {
		lo := r.st.Cursors[tg.Table]
		hi := m.maxID[tg.Table]
		if hi <= lo {
			continue
		}
		end, err := r.auditRange(tg, lo, hi, r.st.CursorTimes[tg.Table], m.at)
		if err != nil {
			return err
		}
		if end < hi {
			caughtUp = false // the round's budget is spent: the rest next round
		}
		hi = end
		r.st.Cursors[tg.Table] = hi
		if hi == m.maxID[tg.Table] {
			r.st.CursorTimes[tg.Table] = m.at
		}
	}
	if caughtUp {
		r.marks = r.marks[idx+1:]
	}
	// From the first audited range on, a duplicate of an audited id is a
	// fault: arm every partition at where it has been read to.
	for t, c := range r.consumers {
		if r.st.Armed[t] == nil {
			r.st.Armed[t] = c.Offsets()
		}
	}
	r.settle()
	r.forget()
	r.progress()
	return nil
}

func (r *run) progress() {
	var newest mark
	if len(r.marks) > 0 {
		newest = r.marks[len(r.marks)-1]
	}
	for _, tg := range r.targets {
		c := r.st.Cursors[tg.Table]
		behind := uint64(0)
		if hi := newest.maxID[tg.Table]; hi > c {
			behind = hi - c
		}
		r.obs.Progress(tg.Table, c, behind)
	}
}

// auditRange reads the sampled rows of ids lo+1 … hi, at most
// RowsPerSecond × Interval of them (the round's budget), and checks each
// was published (its payload equal to the record's); the others are
// suspects. It returns the last id audited: hi, or the last row read when
// the budget ended the read. With one table, the ids of the range without
// a row are counted too, published (NotInTable) or not (Unseen), unless
// the ids are sparse (a range over 4 × the budget: not walked).
func (r *run) auditRange(tg verify.Target, lo, hi uint64, from, to time.Time) (uint64, error) {
	cols := tg.IDColumn
	if tg.Payload != "" {
		cols += ", " + tg.Payload
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s > %d AND %s <= %d", cols, tg.Quoted, tg.IDColumn, lo, tg.IDColumn, hi)
	if cut := sampleCut(r.cfg.Sample); cut < sampleDen {
		q += fmt.Sprintf(" AND %s %% %d < %d", tg.IDColumn, sampleDen, cut)
	}
	q += fmt.Sprintf(" ORDER BY %s LIMIT %d", tg.IDColumn, r.cfg.span())
	counts := map[Result]int{}
	var rows []uint64
	var res mysql.Result
	err := r.conn.ExecuteSelectStreaming(q, &res, func(row []mysql.FieldValue) error {
		id := row[0].AsUint64()
		rows = append(rows, id)
		h, hashed := r.hashes[id]
		equal := true
		if hashed && tg.Payload != "" && row[1].Type != mysql.FieldValueTypeNull {
			equal = maphash.Bytes(r.seed, row[1].AsString()) == h
		} else {
			hashed = false
		}
		verdict, suspect := rowResult(r.win.has(id), hashed, equal)
		if suspect {
			r.st.Suspects = append(r.st.Suspects, Suspect{Table: tg.Table, ID: id, Window: [2]time.Time{from, to}})
			return nil
		}
		counts[verdict]++
		if verdict == Payload && len(r.found[Payload]) < 20 {
			r.found[Payload] = append(r.found[Payload], strconv.FormatUint(id, 10))
		}
		return nil
	}, nil)
	if err != nil {
		return lo, fmt.Errorf("audit: read ids %d … %d of %s: %w", lo+1, hi, tg.Table, err)
	}
	r.obs.Read(0, len(rows))
	if uint64(len(rows)) == r.cfg.span() {
		hi = rows[len(rows)-1]
	}
	if len(r.targets) == 1 && hi-lo <= 4*r.cfg.span() {
		j := 0
		for id := lo + 1; id <= hi; id++ {
			if !Sampled(id, r.cfg.Sample) {
				continue
			}
			if j < len(rows) && rows[j] == id {
				j++
				continue
			}
			if r.win.has(id) {
				counts[NotInTable]++
			} else {
				counts[Unseen]++
			}
		}
	}
	for _, res := range Results {
		if counts[res] > 0 {
			r.count(tg.Table, res, counts[res], "")
		}
	}
	return hi, nil
}

// confirm decides the suspects of earlier rounds: published since, still
// missing with their row present (Missing), or gone (Unseen).
func (r *run) confirm() error {
	if len(r.st.Suspects) == 0 {
		return nil
	}
	byTable := map[string][]Suspect{}
	for _, s := range r.st.Suspects {
		byTable[s.Table] = append(byTable[s.Table], s)
	}
	r.st.Suspects = nil
	for _, tg := range r.targets {
		ss := byTable[tg.Table]
		if len(ss) == 0 {
			continue
		}
		ids := make([]string, len(ss))
		for i, s := range ss {
			ids[i] = strconv.FormatUint(s.ID, 10)
		}
		exists := map[uint64]bool{}
		for chunk := range slices.Chunk(ids, 1000) {
			res, err := r.conn.Execute(fmt.Sprintf("SELECT %s FROM %s WHERE %s IN (%s)", tg.IDColumn, tg.Quoted, tg.IDColumn, strings.Join(chunk, ",")))
			if err != nil {
				r.st.Suspects = append(r.st.Suspects, ss...)
				return fmt.Errorf("audit: confirm suspects of %s: %w", tg.Table, err)
			}
			for i := range res.RowNumber() {
				v, _ := res.GetUint(i, 0)
				exists[v] = true
			}
		}
		var missing []uint64
		var from, to time.Time
		counts := map[Result]int{}
		for _, s := range ss {
			v := confirm(r.win.has(s.ID), exists[s.ID])
			counts[v]++
			if v == Missing {
				missing = append(missing, s.ID)
				if from.IsZero() || s.Window[0].Before(from) {
					from = s.Window[0]
				}
				if s.Window[1].After(to) {
					to = s.Window[1]
				}
			}
		}
		for _, res := range Results {
			r.count(tg.Table, res, counts[res], "")
		}
		if len(missing) > 0 {
			first := missing[:min(len(missing), 20)]
			ev := make([]string, len(first))
			for i, id := range first {
				ev[i] = strconv.FormatUint(id, 10)
			}
			if from.IsZero() {
				from = to
			}
			f := Finding{At: r.now(), Table: tg.Table, Result: Missing, Count: len(missing), EventIDs: ev, Fix: Fix(r.src.Name, first, from, to)}
			r.st.find(f)
			r.log.Error("events missing from Kafka: their rows are in the table, their records are not",
				zap.String("table", tg.Table), zap.Int("count", len(missing)), zap.Strings("event_ids", ev), zap.String("fix", f.Fix))
		}
	}
	return nil
}

// forget drops what no longer needs remembering: ids at or below the
// floor, their hashes and records' places.
func (r *run) forget() {
	fl := r.floor()
	r.win.advance(fl)
	for id := range r.hashes {
		if id <= fl {
			delete(r.hashes, id)
		}
	}
	for _, parts := range r.refs {
		for p, rs := range parts {
			i := 0
			for i < len(rs) && rs[i].id <= fl {
				i++
			}
			parts[p] = rs[i:]
		}
	}
}

// forgetKeys drops keys idle for KeyIdle rounds.
func (r *run) forgetKeys() {
	for k, st := range r.keys {
		if r.round-st.Round > r.cfg.KeyIdle {
			delete(r.keys, k)
		}
	}
}

// report logs the round's problems and keeps them as findings.
func (r *run) report() {
	for _, res := range []Result{Reordered, Split, Late, Payload} {
		ids := r.found[res]
		if len(ids) == 0 {
			continue
		}
		var detail string
		if d := r.found[Result("detail:"+string(res))]; len(d) > 0 {
			detail = d[0]
		}
		f := Finding{At: r.now(), Table: r.table(), Result: res, Count: len(ids), EventIDs: ids, Detail: detail, Fix: fixOf(res)}
		r.st.find(f)
		log := r.log.Warn
		if res == Reordered {
			log = r.log.Error
		}
		log("audit found "+string(res)+" records", zap.String("table", f.Table), zap.Strings("event_ids", ids), zap.String("detail", detail), zap.String("fix", f.Fix))
	}
}

func fixOf(res Result) string {
	switch res {
	case Reordered:
		return "consumers of that key saw an older event after a newer one: find who else writes to the topic (a second producer, a replay with --topic), and have the consumers re-read the key from its source of truth"
	case Split:
		return "a key on two partitions loses its order between them: the partition count changed (see accept-partition-change) or another producer partitions differently"
	case Late:
		return "a duplicate long after the original: a manual replay, or another producer; consumers that deduplicate by event id are unaffected"
	case Payload:
		return "the record's value differs from the row's payload: the row was updated after its insert (the outbox is insert-only), or another producer wrote the record"
	}
	return ""
}

// save writes the state: per partition, resume at the oldest record not
// yet audited (else where it has read to).
func (r *run) save(ctx context.Context) error {
	for t, c := range r.consumers {
		offs := c.Offsets()
		resume := map[int]int64{}
		for p, o := range offs {
			resume[p] = o
			if rs := r.refs[t][p]; len(rs) > 0 {
				resume[p] = min(o, rs[0].offset)
			}
		}
		r.st.Resume[t], r.st.ReadTo[t] = resume, offs
	}
	r.st.UpdatedAt = r.now().UTC()
	b, err := json.Marshal(r.st)
	if err != nil {
		return err
	}
	return r.store.SaveAudit(ctx, b)
}
