package prune

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/snapshot"
	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Options are prune's choices.
type Options struct {
	OlderThan time.Duration // only rows whose created_at (the mapping's timestamp column) is older
	Batch     int           // rows per DELETE
	Sleep     time.Duration // pause between batches
	DryRun    bool
	ServerID  uint32 // replica server_id to read the binlog from the checkpoint
	// Progress, when set, is told the rows deleted so far, of how many,
	// and the last id deleted, after each batch.
	Progress func(deleted, of int64, lastID int64)
}

// ParseAge parses a Go duration with an additional day unit: 7d, 1d12h, 36h.
func ParseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("required, e.g. 7d")
	}
	var d time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, fmt.Errorf("want e.g. 7d, 36h or 90m: %w", err)
		}
		d, s = time.Duration(n)*24*time.Hour, s[i+1:]
	}
	if s != "" {
		rest, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("want e.g. 7d, 36h or 90m: %w", err)
		}
		d += rest
	}
	if d <= 0 {
		return 0, errors.New("want > 0")
	}
	return d, nil
}

// Failed is a failure of prune after its checks (exit 1; other errors are
// usage or connection errors, exit 2).
type Failed struct{ err error }

func (e Failed) Error() string { return e.err.Error() }
func (e Failed) Unwrap() error { return e.err }

type Summary struct {
	key        string
	checkpoint binlog.Position
	snapshot   binlog.Position
	lagRows    int64  // outbox rows inserted between the checkpoint and the snapshot
	bound      uint64 // rows with id < bound are published; MaxUint64: all visible rows
	cutoff     string
	age        string // the age column
	candidates int64  // old enough and published (dry run: would be deleted)
	kept       int64  // old enough but not known published: kept
	deleted    int64
	batches    int
}

func (s *Summary) Print(w io.Writer, dry bool) {
	fmt.Fprintf(w, "checkpoint   %s (%s)\n", s.checkpoint.FilePos(), s.key)
	if s.snapshot.File != "" {
		fmt.Fprintf(w, "snapshot     %s\n", s.snapshot.FilePos())
		fmt.Fprintf(w, "after checkpoint  %d outbox rows inserted between the checkpoint and the snapshot (not published yet: kept)\n", s.lagRows)
		if s.bound == math.MaxUint64 {
			fmt.Fprintln(w, "published    every row of the snapshot (no outbox row inserted between the checkpoint and the snapshot)")
		} else {
			fmt.Fprintf(w, "published    rows of the snapshot with id < %d\n", s.bound)
		}
	}
	if s.cutoff != "" {
		fmt.Fprintf(w, "older than   %s < %s\n", cmp.Or(s.age, "created_at"), s.cutoff)
		fmt.Fprintf(w, "kept         %d old rows not known published\n", s.kept)
	}
	if dry {
		fmt.Fprintf(w, "would delete %d rows\n", s.candidates)
	} else {
		fmt.Fprintf(w, "deleted      %d rows in %d batches\n", s.deleted, s.batches)
	}
}

// columns returns the outbox table's id column and age column (quoted)
// from its mapping: the im table's id and created_at; a mapped table's id
// column, which must be an integer that grows with each insert
// (AUTO_INCREMENT: prune's bound is the smallest id inserted after the
// checkpoint), and its timestamp column, else the preset's time column
// (created_at, generic: create_time). One table only.
func columns(cfg config.Config, ts *binlog.TableSet, srv *binlog.Server) (id, age string, err error) {
	if ts.Legacy() {
		return "`id`", "`created_at`", nil
	}
	if len(cfg.Source.Tables) > 0 {
		return "", "", errors.New("prune reads the one table of source.schema/source.table, not source.tables: prune each table with its own configuration (source.table and its mapping)")
	}
	found, err := srv.CheckTables(ts)
	if err != nil {
		return "", "", err
	}
	if len(found) != 1 {
		return "", "", fmt.Errorf("prune: table %s.%s not found", cfg.Source.Schema, cfg.Source.Table)
	}
	t := found[0]
	m := t.Mapping
	if m.Kinds[m.ID] != mapping.KindInteger {
		return "", "", fmt.Errorf("prune: %s's id column %s is not an integer: prune tells published rows by an id that grows with each insert (AUTO_INCREMENT); delete old rows of this table with your own job", t, m.Name(m.ID))
	}
	r, _ := mapping.Resolve(cfg.Source.Mapping)
	ageName := cmp.Or(r.Timestamp, r.CloudEvents.Time)
	tcols, err := srv.TableColumns(t.Schema, t.Name)
	if err != nil {
		return "", "", err
	}
	ok := ageName != "" && slices.ContainsFunc(tcols, func(c mapping.Column) bool {
		return strings.EqualFold(c.Name, ageName) && mapping.KindOf(c.DataType) == mapping.KindTime
	})
	if !ok {
		return "", "", fmt.Errorf("prune: %s has no DATETIME/TIMESTAMP column %q to tell a row's age (--older-than): set source.mapping.timestamp to the column of the row's creation time", t, ageName)
	}
	return t.IDColumn(), "`" + ageName + "`", nil
}

func Run(ctx context.Context, cfg config.Config, o Options, log *zap.Logger) (*Summary, error) {
	store := checkpoint.NewStore(cfg.Checkpoint)
	defer store.Close()
	cp, err := store.Load(ctx)
	if err != nil {
		if errors.Is(err, checkpoint.ErrCorrupt) {
			return nil, Failed{err}
		}
		return nil, err
	}
	sum := &Summary{key: store.Key()}
	if cp == nil {
		return sum, Failed{fmt.Errorf("no checkpoint under Redis key %s: nothing is known published, nothing deleted", store.Key())}
	}
	sum.checkpoint = cp.Position()
	if cp.File == "" {
		return sum, Failed{fmt.Errorf("the checkpoint has no binlog file:pos (gtid %s): prune needs one", cp.GTIDSet)}
	}
	srv, err := binlog.Connect(ctx, cfg.Source, log.Named("source"))
	if err != nil {
		return sum, err
	}
	defer srv.Close()
	if (cp.ServerID != 0 && cp.ServerID != srv.ServerID()) || (cp.Flavor != "" && cp.Flavor != srv.Flavor()) {
		return sum, Failed{fmt.Errorf("the checkpoint was written for server_id %d (%s), the source is server_id %d (%s): its position says nothing about this server's rows",
			cp.ServerID, cp.Flavor, srv.ServerID(), srv.Flavor())}
	}
	cols, err := srv.Columns()
	if err != nil {
		return sum, Failed{err}
	}
	ts, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic)
	if err != nil {
		return sum, Failed{err}
	}
	idCol, ageCol, err := columns(cfg, ts, srv)
	if err != nil {
		return sum, Failed{err}
	}
	sum.age = strings.Trim(ageCol, "`")
	snap, err := snapshot.Open(ctx, cfg.Source, "")
	if err != nil {
		return sum, err
	}
	defer snap.Close()
	sum.snapshot = snap.Pos()

	// B: the smallest id inserted between the checkpoint and the snapshot.
	sum.bound = math.MaxUint64
	if binlog.ComparePos(snap.Pos(), sum.checkpoint) > 0 {
		if err := srv.Available(sum.checkpoint); err != nil {
			return sum, Failed{err}
		}
		src := cfg.Source
		src.ServerID = o.ServerID
		src.PositionMode = binlog.ModeFile
		from := sum.checkpoint
		from.GTIDSet = "" // read by file:pos; the set is not needed
		reader := binlog.NewReader(src, srv.Flavor(), cols, from, log)
		reader.SetTables(ts)
		if err := reader.StopAt(snap.Pos()); err != nil {
			return sum, Failed{err}
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var g errgroup.Group
		g.Go(func() error { return reader.Run(rctx) })
		for txn := range reader.Txns() {
			for i := range txn.Events {
				sum.lagRows++
				sum.bound = min(sum.bound, txn.Events[i].ID)
			}
		}
		if err := g.Wait(); err != nil {
			return sum, Failed{fmt.Errorf("read the binlog from the checkpoint %s to the snapshot %s: %w", sum.checkpoint.FilePos(), snap.Pos().FilePos(), err)}
		}
		if ctx.Err() != nil {
			return sum, ctx.Err()
		}
	}
	r, err := snap.Execute("SELECT DATE_FORMAT(NOW() - INTERVAL ? SECOND, '%Y-%m-%d %H:%i:%s')", int64(o.OlderThan/time.Second))
	if err != nil {
		return sum, fmt.Errorf("prune: read the server's time: %w", err)
	}
	sum.cutoff, _ = r.GetString(0, 0)
	log.Info("prune: published rows are those of the snapshot with id below the bound",
		zap.String("checkpoint", sum.checkpoint.FilePos()), zap.String("snapshot", snap.Pos().FilePos()),
		zap.Int64("rows_after_checkpoint", sum.lagRows), zap.Uint64("bound", sum.bound), zap.String("cutoff", sum.cutoff))

	bound := sum.bound
	if bound == math.MaxUint64 {
		bound = math.MaxInt64 // BIGINT; ids are signed in the schema
	}
	q := fmt.Sprintf("SELECT COUNT(*), COALESCE(SUM(%s < ?), 0) FROM %s WHERE %s < ?", idCol, snap.Table(), ageCol)
	if r, err = snap.Execute(q, bound, sum.cutoff); err != nil {
		return sum, Failed{fmt.Errorf("prune: %s: %w", q, err)}
	}
	old, _ := r.GetInt(0, 0)
	sum.candidates, _ = r.GetInt(0, 1)
	sum.kept = old - sum.candidates
	if o.DryRun || sum.candidates == 0 {
		return sum, nil
	}

	del, err := binlog.Dial(ctx, cfg.Source, cfg.Source.Schema)
	if err != nil {
		return sum, fmt.Errorf("prune: connect to %s: %w", cfg.Source.Addr, err)
	}
	defer del.Close()
	sel := fmt.Sprintf("SELECT %s FROM %s WHERE %s > ? AND %s < ? AND %s < ? ORDER BY %s LIMIT %d", idCol, snap.Table(), idCol, idCol, ageCol, idCol, o.Batch)
	var after int64
	for ctx.Err() == nil {
		r, err := snap.Execute(sel, after, bound, sum.cutoff)
		if err != nil {
			return sum, Failed{fmt.Errorf("prune: select a batch: %w", err)}
		}
		n := r.RowNumber()
		if n == 0 {
			break
		}
		ids := make([]string, n)
		for i := range ids {
			id, _ := r.GetInt(i, 0)
			ids[i] = strconv.FormatInt(id, 10)
			after = id
		}
		// Exactly the ids seen in the snapshot: committed at or before the
		// checkpoint, hence published.
		res, err := del.Execute(fmt.Sprintf("DELETE FROM %s WHERE %s IN (%s)", snap.Table(), idCol, strings.Join(ids, ",")))
		if err != nil {
			var me *mysql.MyError
			if errors.As(err, &me) && (me.Code == 1142 || me.Code == 1227) { // table or specific access denied
				err = fmt.Errorf("%w: %q cannot DELETE from %s: GRANT DELETE ON %s TO a prune user (the publisher's user stays read-only; docs/operations.md)",
					err, cfg.Source.User, snap.Table(), snap.Table())
			}
			return sum, Failed{fmt.Errorf("prune: delete a batch after id %s: %w", ids[0], err)}
		}
		sum.deleted += int64(res.AffectedRows)
		sum.batches++
		if o.Progress != nil {
			o.Progress(sum.deleted, sum.candidates, after)
		}
		if sum.batches%100 == 0 {
			log.Info("prune progress", zap.Int64("deleted", sum.deleted), zap.Int64("of", sum.candidates), zap.Int64("last_id", after))
		}
		if n < o.Batch {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(o.Sleep):
		}
	}
	return sum, nil
}
