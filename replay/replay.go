package replay

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Point is a parsed --from or --to: a time, or a file:pos or GTID start.
type Point struct {
	start binlog.Start // StartFilePos or StartGTID; StartUnset for a time
	time  time.Time    // set for a time
}

func (p Point) isZero() bool { return p.start.Kind == binlog.StartUnset && p.time.IsZero() }

// ParsePoint parses a replay position: an RFC 3339 time (e.g.
// 2026-11-29T10:00:00Z or 2026-11-29T11:00:00+01:00; fractions of a second
// are dropped, binlog timestamps having a one-second resolution),
// <file>:<pos> or gtid:<set>. Errors wrap binlog.ErrStart.
func ParsePoint(flag, s string) (Point, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Point{}, fmt.Errorf("%w: %s: required: <file>:<pos>, gtid:<set> or an RFC 3339 time", binlog.ErrStart, flag)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Point{time: t.UTC().Truncate(time.Second)}, nil
	}
	if looksLikeDate(s) {
		// Looks like a date: say what a time must look like.
		return Point{}, fmt.Errorf("%w: %s %q: a time must be RFC 3339 with a zone, e.g. 2026-11-29T10:00:00Z", binlog.ErrStart, flag, s)
	}
	st, err := binlog.ParseStart(s)
	if err != nil && strings.Contains(s, ":") {
		return Point{}, fmt.Errorf("%s: %w", flag, err) // a malformed <file>:<pos> or gtid:<set>
	}
	if err != nil || st.Kind != binlog.StartFilePos && st.Kind != binlog.StartGTID {
		return Point{}, fmt.Errorf("%w: %s %q: want <file>:<pos>, gtid:<set> or an RFC 3339 time", binlog.ErrStart, flag, s)
	}
	return Point{start: st}, nil
}

// looksLikeDate reports whether s starts like an RFC 3339 date (YYYY-MM-DD).
func looksLikeDate(s string) bool {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for _, i := range []int{0, 1, 2, 3, 5, 6, 8, 9} {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Router routes like the configured router, then sends the record
// to topic when set, and adds the replay headers.
type Router struct {
	inner *router.Router
	topic string // override; empty: as routed
	id    string // replay_id
}

// Topic is the topic of e's record: --topic when given, else the one
// the configured router and mappings give it (router.Router.EventTopic).
func (r Router) Topic(e *binlog.Event) (string, error) {
	if r.topic != "" {
		return r.topic, nil
	}
	return r.inner.EventTopic(e)
}

func (r Router) Route(e *binlog.Event, end binlog.Position) (kafka.Message, error) {
	m, err := r.inner.Route(e, end)
	if r.topic != "" {
		m.Topic, err = r.topic, nil
	}
	m.Headers = append(m.Headers,
		kafka.Header{Key: router.HeaderReplayed, Value: []byte("true")},
		kafka.Header{Key: router.HeaderReplayID, Value: []byte(r.id)})
	return m, err
}

// NewID returns a random (version 4) UUID.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Options are a replay's range and choices.
type Options struct {
	From, To   Point  // To is zero when --to is not given
	Topic      string // --topic: publish every record there
	DryRun     bool
	Files      string // --binlog-files: read these instead of the server
	SchemaFile string // --schema-file
}

// Plan is a resolved, checked range.
type Plan struct {
	From, To binlog.Position
	Logs     []binlog.LogFile // SHOW BINARY LOGS at start (or the files' sizes), for the progress' ETA
	Flavor   string
	Columns  []string
	GTID     bool        // read by GTID set (--from gtid:<set>)
	Files    *FileSource // --binlog-files; nil: read from the server
}

// resolveRange resolves --from (when given; else plan.From stays) and
// --to (else end) with resolve and checks the range against end. empty:
// no --to and the start is the end (nothing to replay, not an error).
func (plan *Plan) resolveRange(o Options, end binlog.Position, resolve func(flag string, p Point) (binlog.Position, error)) (empty bool, err error) {
	if !o.From.isZero() {
		if plan.From, err = resolve("--from", o.From); err != nil {
			return false, err
		}
	}
	plan.To = end
	if !o.To.isZero() {
		if plan.To, err = resolve("--to", o.To); err != nil {
			return false, err
		}
	}
	if err := binlog.CheckRange(plan.Flavor, plan.From, plan.To, end); err != nil {
		if o.To.isZero() && plan.From.File != "" && binlog.ComparePos(plan.From, end) == 0 {
			return true, nil
		}
		return false, fmt.Errorf("--from %s, --to %s: %w", plan.From.Text(), plan.To.Text(), err)
	}
	return false, nil
}

// planServer connects, checks the server and the replay's server_id like
// run does, resolves --from and --to and checks the range against what the
// server has.
func planServer(ctx context.Context, cfg config.Config, o Options, log *zap.Logger) (Plan, error) {
	var plan Plan
	srv, err := binlog.Connect(ctx, cfg.Source, log.Named("source"))
	if err != nil {
		return plan, err
	}
	defer srv.Close()
	if err := srv.Check(ctx); err != nil {
		return plan, err
	}
	plan.Flavor = srv.Flavor()
	if plan.Columns, err = srv.Columns(); err != nil {
		return plan, err
	}
	end, err := srv.Latest()
	if err != nil {
		return plan, err
	}
	if plan.Logs, err = srv.BinaryLogSizes(); err != nil {
		return plan, err
	}
	resolve := func(flag string, p Point) (binlog.Position, error) {
		if !p.time.IsZero() {
			pos, err := srv.PositionAt(ctx, p.time, plan.Columns, end)
			if err != nil {
				return pos, fmt.Errorf("%s %s: %w", flag, p.time.Format(time.RFC3339), err)
			}
			log.Info("time resolved to a position", zap.String("flag", flag), zap.Time("time", p.time), zap.String("position", pos.FilePos()))
			return pos, nil
		}
		if p.start.Kind == binlog.StartFilePos {
			// On the server, and between two transactions.
			pos := binlog.Position{File: p.start.File, Pos: p.start.Pos}
			if err := srv.CheckPosition(pos); err != nil {
				return pos, fmt.Errorf("%s: %w", flag, err)
			}
			return pos, nil
		}
		pos, err := srv.Resolve(p.start)
		if err != nil {
			return pos, fmt.Errorf("%s: %w", flag, err)
		}
		return pos, nil
	}
	empty, err := plan.resolveRange(o, end, resolve)
	if empty || err != nil {
		return plan, err
	}
	plan.GTID = plan.From.File == ""
	return plan, nil
}

// Summary counts what a replay read (and, unless dry, published:
// every counted event was acknowledged when the replay succeeds).
type Summary struct {
	Txns, Scanned, Events int64
	PerTopic              map[string]int64
	FirstRow, FirstEnd    string          // row and transaction-end positions of the first event
	LastRow, LastEnd      string          // and of the last
	Acked                 binlog.Position // end of the last acknowledged transaction (dry run: read)
	// Poison: the dry run's rows that cannot become records (kafka.on-poison
	// decides what the real replay does with them), in binlog order.
	Poison []PoisonRow
}

// PoisonRow is a row a dry run found poison (sink.Check).
type PoisonRow struct {
	EventID     uint64
	Reason      string // sink.Reason
	Row, TxnEnd string // the row event's position, and its transaction's end
	Err         string
}

func (s *Summary) Print(w io.Writer) {
	defer func() {
		for i, p := range s.Poison {
			if i == 10 {
				fmt.Fprintf(w, "poison: … %d more\n", len(s.Poison)-10)
				break
			}
			fmt.Fprintf(w, "poison: event %d (%s), row at %s, transaction ending at %s: %s\n", p.EventID, p.Reason, p.Row, p.TxnEnd, p.Err)
		}
	}()
	fmt.Fprintf(w, "transactions: %d with outbox rows (%d read)\n", s.Txns, s.Scanned)
	fmt.Fprintf(w, "events: %d\n", s.Events)
	if s.Events > 0 {
		fmt.Fprintf(w, "first: row at %s, transaction ending at %s\n", s.FirstRow, s.FirstEnd)
		fmt.Fprintf(w, "last: row at %s, transaction ending at %s\n", s.LastRow, s.LastEnd)
	}
	topics := make([]string, 0, len(s.PerTopic))
	for t := range s.PerTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		fmt.Fprintf(w, "topic %s: %d\n", t, s.PerTopic[t])
	}
}

// FileSource is replay's source with --binlog-files: a FileReader over
// archived binlog files (no server connection), behind a filter for GTID
// set bounds. It implements Run and Txns like binlog.Reader.
type FileSource struct {
	infos    []binlog.FileInfo
	cfg      binlog.FileConfig
	paths    []string
	flavor   string
	from, to mysql.GTIDSet // GTID set bounds; nil when the range is in file:pos terms
	reader   *binlog.FileReader
	out      chan binlog.Txn
	stopped  bool            // the --to GTID set was reached
	last     binlog.Position // end of the last transaction passed on
	log      *zap.Logger
}

// planFiles lists and inspects the files of --binlog-files, resolves
// --from and --to against them (a <file>:<pos> must be a transaction
// boundary of a given file, a time resolves from the files' timestamps)
// and checks that the files from the start to the end follow each other.
func planFiles(ctx context.Context, cfg config.Config, o Options, log *zap.Logger) (Plan, error) {
	var plan Plan
	paths, err := binlog.BinlogFiles(o.Files)
	if err != nil {
		return plan, fmt.Errorf("--binlog-files: %w", err)
	}
	fs := &FileSource{paths: paths, log: log}
	for _, p := range paths {
		fi, err := binlog.InspectFile(p)
		if err != nil {
			return plan, fmt.Errorf("--binlog-files: %w", err)
		}
		fs.infos = append(fs.infos, fi)
		plan.Logs = append(plan.Logs, binlog.LogFile{Name: fi.Name, Size: fi.Clean})
	}
	first, last := fs.infos[0], fs.infos[len(fs.infos)-1]
	fs.flavor = cfg.Source.Flavor
	if fs.flavor == "" {
		fs.flavor = first.Flavor()
	}
	plan.Flavor = fs.flavor
	schemaFile := o.SchemaFile
	if schemaFile == "" {
		schemaFile = cfg.Source.SchemaFile
	}
	if plan.Columns, err = binlog.SchemaColumns(schemaFile, cfg.Source.Table); err != nil {
		return plan, err
	}
	end := binlog.Position{File: last.Name, Pos: uint32(last.Clean)}
	resolve := func(flag string, p Point) (binlog.Position, error) {
		switch {
		case !p.time.IsZero():
			pos, err := fs.positionAt(ctx, cfg, plan.Columns, p.time, end)
			if err != nil {
				return pos, fmt.Errorf("%s %s: %w", flag, p.time.Format(time.RFC3339), err)
			}
			log.Info("time resolved to a position", zap.String("flag", flag), zap.Time("time", p.time), zap.String("position", pos.FilePos()))
			return pos, nil
		case p.start.Kind == binlog.StartFilePos:
			pos := binlog.Position{File: p.start.File, Pos: p.start.Pos}
			i := fs.index(pos.File)
			if i < 0 {
				return pos, fmt.Errorf("%s: %w: binlog %s is not among the files given (%s … %s)", flag, binlog.ErrPositionUnavailable, pos.FilePos(), first.Name, last.Name)
			}
			if err := binlog.CheckFilePosition(fs.infos[i].Path, pos.Pos); err != nil {
				return pos, fmt.Errorf("%s: %w", flag, err)
			}
			return pos, nil
		}
		if _, err := mysql.ParseGTIDSet(fs.flavor, p.start.GTIDSet); err != nil {
			return binlog.Position{}, fmt.Errorf("%s: %w: gtid:%s is not a %s GTID set: %v", flag, binlog.ErrStart, p.start.GTIDSet, fs.flavor, err)
		}
		return binlog.Position{GTIDSet: p.start.GTIDSet}, nil
	}
	plan.From = binlog.Position{File: first.Name, Pos: 4}
	empty, err := plan.resolveRange(o, end, resolve)
	if empty {
		plan.Files = fs
	}
	if empty || err != nil {
		return plan, err
	}
	fs.cfg = binlog.FileConfig{Schema: cfg.Source.Schema, Table: cfg.Source.Table, Flavor: fs.flavor, Columns: plan.Columns,
		TxnBuffer: cfg.Source.TxnBuffer}
	// The tables and mappings of run (compiled from the files' table maps).
	if ts, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic); err == nil && !ts.Legacy() {
		fs.cfg.Tables = ts
	}
	if plan.From.File != "" {
		fs.cfg.Start = plan.From
	} else if fs.from, err = mysql.ParseGTIDSet(fs.flavor, plan.From.GTIDSet); err != nil {
		return plan, err
	}
	if plan.To.File != "" {
		if !o.To.isZero() {
			fs.cfg.End = plan.To
		}
	} else if fs.to, err = mysql.ParseGTIDSet(fs.flavor, plan.To.GTIDSet); err != nil {
		return plan, err
	}
	// The files read must follow each other: each one closed by a rotate
	// to the next. A file copied while the server was still writing it
	// lacks what came after the copy; reading on into the next file would
	// skip that silently.
	lo, hi := 0, len(fs.infos)-1
	if fs.cfg.Start.File != "" {
		lo = fs.index(fs.cfg.Start.File)
	}
	if fs.cfg.End.File != "" {
		hi = fs.index(fs.cfg.End.File)
	}
	if err := binlog.CheckChain(fs.infos[lo : hi+1]); err != nil {
		return plan, fmt.Errorf("--binlog-files: %w", err)
	}
	plan.Files = fs
	return plan, nil
}

func (fs *FileSource) index(name string) int {
	for i, fi := range fs.infos {
		if fi.Name == name {
			return i
		}
	}
	return -1
}

// positionAt returns the start of the first transaction committed at or
// after t, as Server.PositionAt does on the server: the newest file opened
// before t (format description timestamps), scanned forward; end when no
// transaction is that recent.
func (fs *FileSource) positionAt(ctx context.Context, cfg config.Config, columns []string, t time.Time, end binlog.Position) (binlog.Position, error) {
	i := -1
	for k, fi := range fs.infos {
		if !fi.Opened.IsZero() && fi.Opened.Before(t) {
			i = k
		}
	}
	if i < 0 {
		first := fs.infos[0]
		return binlog.Position{}, fmt.Errorf("%w: %s is before the oldest binlog file given (%s, opened at %s): transactions of that time are not in the files; give a later time, or no --from to start at the first file",
			binlog.ErrPositionUnavailable, t.Format(time.RFC3339), first.Name, first.Opened.Format(time.RFC3339))
	}
	start := binlog.Position{File: fs.infos[i].Name, Pos: 4}
	r, err := binlog.NewFileReader(fs.paths, binlog.FileConfig{Schema: cfg.Source.Schema, Table: cfg.Source.Table, Flavor: fs.flavor, Columns: columns, Start: start}, fs.log)
	if err != nil {
		return start, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g errgroup.Group
	g.Go(func() error { return r.Run(sctx) })
	prev, found := start, false
	for txn := range r.Txns() {
		if found {
			continue // drain
		}
		if !txn.End.Time.Before(t) {
			found = true
			cancel()
			continue
		}
		prev = txn.End
	}
	if err := g.Wait(); err != nil {
		return start, binlog.NoColumnsHint(err)
	}
	if !found {
		return end, nil
	}
	return binlog.Position{File: prev.File, Pos: prev.Pos}, nil
}

// Txns returns the transactions of the range; closed when Run returns.
func (fs *FileSource) Txns() <-chan binlog.Txn { return fs.out }

// start creates the FileReader; call it once before Run.
func (fs *FileSource) start() error {
	r, err := binlog.NewFileReader(fs.paths, fs.cfg, fs.log)
	if err != nil {
		return err
	}
	fs.reader = r
	fs.out = make(chan binlog.Txn, max(fs.cfg.TxnBuffer, 1))
	return nil
}

// Run reads the files, skipping the transactions a --from GTID set
// contains and stopping after the one that completes a --to GTID set.
func (fs *FileSource) Run(ctx context.Context) error {
	defer close(fs.out)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g errgroup.Group
	g.Go(func() error { return fs.reader.Run(rctx) })
	var seen mysql.GTIDSet
	if fs.to != nil {
		if fs.from != nil {
			seen = fs.from.Clone()
		} else {
			seen, _ = mysql.ParseGTIDSet(fs.flavor, "")
		}
	}
	for txn := range fs.reader.Txns() {
		if fs.stopped {
			continue // drain after the --to set was reached
		}
		if fs.from != nil && txn.End.GTID != "" {
			if one, err := mysql.ParseGTIDSet(fs.flavor, txn.End.GTID); err == nil && fs.from.Contain(one) {
				continue
			}
		}
		select {
		case fs.out <- txn:
		case <-ctx.Done():
			cancel()
			continue
		}
		fs.last = txn.End
		if seen != nil && txn.End.GTID != "" && !txn.Partial {
			if err := seen.Update(txn.End.GTID); err == nil && seen.Contain(fs.to) {
				fs.stopped = true
				cancel()
			}
		}
	}
	return binlog.NoColumnsHint(g.Wait())
}

// report prints where reading stopped, and a truncated last file.
func (fs *FileSource) Report(w io.Writer) {
	if fs.reader == nil {
		return
	}
	res := fs.reader.Result()
	switch {
	case fs.stopped:
		fmt.Fprintf(w, "stopped: at the transaction completing the --to GTID set (%s)\n", fs.last.FilePos())
	case res.StopFile != "":
		at := "end of the files"
		if res.AtEnd {
			at = "--to"
		}
		fmt.Fprintf(w, "stopped: %s, %s offset %d\n", at, res.StopFile, res.StopOffset)
	}
	if t := res.Truncated; t != nil {
		fmt.Fprintf(w, "truncated: binlog file %s ends early at offset %d (%v); stopped after the last complete transaction, ending at %s\n",
			t.File, t.Offset, t.Err, res.End.FilePos())
	}
}

// describeFiles names the files of a file replay.
func (fs *FileSource) Describe() string {
	if len(fs.infos) == 1 {
		return fmt.Sprintf("1 binlog file (%s) in %s", fs.infos[0].Name, filepath.Dir(fs.infos[0].Path))
	}
	return fmt.Sprintf("%d binlog files (%s … %s) in %s", len(fs.infos), fs.infos[0].Name, fs.infos[len(fs.infos)-1].Name, filepath.Dir(fs.infos[0].Path))
}
