package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

func pruneCommand() *cobra.Command {
	var (
		path     string
		o        pruneOptions
		olderArg string
		serverID uint32
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete outbox rows already published (older than --older-than), in small batches",
		Long: `prune deletes outbox rows that were published (their INSERT lies at or before
the checkpoint) and are older than --older-than (created_at), in batches of
--batch rows with --sleep between batches.

The rule, which never deletes a row that was not published: prune opens a
consistent snapshot (MariaDB: START TRANSACTION WITH CONSISTENT SNAPSHOT,
whose binlog position S is binlog_snapshot_file/position). Every row visible
in it was committed at or before S. It then reads the binlog from the
checkpoint C to S (the publisher's lag; nothing when C is at S) and takes the
smallest outbox id inserted there, B. A row visible in the snapshot with
id < B was therefore committed at or before C: published. prune deletes
exactly those ids (selected in the snapshot, deleted by id) that are also
older than --older-than. Rows committed after the snapshot are never
touched, whatever their id.

It needs DELETE on the outbox table (the publisher's user stays read-only:
run prune as another user, e.g. CDC_OUTBOX_SOURCE_USER=cdc_outbox_prune;
see docs/operations.md), plus the publisher's replication grants to read
the binlog from the checkpoint (as a replica with --server-id, default
source.server-id + 2).

Exit status: 0 done (counts on stdout); 1 failed (no checkpoint, the
checkpoint's binlog purged, a missing privilege, a failed DELETE: what was
deleted before is reported); 2 usage, configuration or connection error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := opsConfig(path)
			if err != nil {
				return err
			}
			if o.olderThan, err = parseAge(olderArg); err != nil {
				return fmt.Errorf("--older-than %q: %w", olderArg, err)
			}
			if o.batch < 1 || o.batch > 100000 {
				return fmt.Errorf("--batch %d: want 1 to 100000", o.batch)
			}
			if o.sleep < 0 {
				return fmt.Errorf("--sleep %s: want >= 0", o.sleep)
			}
			live := cfg.Source.ServerID
			if !cmd.Flags().Changed("server-id") {
				serverID = live + 2
			}
			if serverID == 0 || serverID == live {
				return fmt.Errorf("--server-id %d: want a replica server_id other than the live publisher's source.server-id %d", serverID, live)
			}
			o.serverID = serverID
			log, err := newLogger(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			o.out = cmd.OutOrStdout()
			return prune(ctx, cfg, o, log)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file (source and checkpoint sections are used)")
	f.StringVar(&olderArg, "older-than", "", "only rows whose created_at is older than this: e.g. 7d, 36h, 90m (required)")
	f.IntVar(&o.batch, "batch", 1000, "rows per DELETE")
	f.DurationVar(&o.sleep, "sleep", 100*time.Millisecond, "pause between batches")
	f.BoolVar(&o.dryRun, "dry-run", false, "count what would be deleted; delete nothing")
	f.Uint32Var(&serverID, "server-id", 0, "replica server_id used to read the binlog from the checkpoint (default: source.server-id + 2)")
	_ = cmd.MarkFlagRequired("older-than")
	return cmd
}

type pruneOptions struct {
	olderThan time.Duration
	batch     int
	sleep     time.Duration
	dryRun    bool
	serverID  uint32
	out       io.Writer
}

// parseAge parses a Go duration with an additional day unit: 7d, 1d12h, 36h.
func parseAge(s string) (time.Duration, error) {
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

// pruneFailed is an exit-1 failure of prune (exit 2 for the rest).
type pruneFailed struct{ err error }

func (e pruneFailed) Error() string { return e.err.Error() }
func (e pruneFailed) Unwrap() error { return e.err }

func prune(ctx context.Context, cfg Config, o pruneOptions, log *zap.Logger) error {
	w := o.out
	sum, err := runPrune(ctx, cfg, o, log)
	var pf pruneFailed
	if err != nil && !errors.As(err, &pf) {
		return err // exit 2
	}
	if sum != nil {
		sum.print(w, o.dryRun)
	}
	if err != nil {
		fmt.Fprintf(w, "result: FAILED: %v\n", err)
		return exitError{code: 1}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(w, "result: INTERRUPTED")
		return exitError{code: 1}
	}
	if o.dryRun {
		fmt.Fprintln(w, "result: dry run, nothing deleted")
	} else {
		fmt.Fprintln(w, "result: OK")
	}
	return nil
}

type pruneSummary struct {
	key        string
	checkpoint binlog.Position
	snapshot   binlog.Position
	lagRows    int64  // outbox rows inserted between the checkpoint and the snapshot
	bound      uint64 // rows with id < bound are published; MaxUint64: all visible rows
	cutoff     string
	candidates int64 // old enough and published (dry run: would be deleted)
	kept       int64 // old enough but not known published: kept
	deleted    int64
	batches    int
}

func (s *pruneSummary) print(w io.Writer, dry bool) {
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
		fmt.Fprintf(w, "older than   created_at < %s\n", s.cutoff)
		fmt.Fprintf(w, "kept         %d old rows not known published\n", s.kept)
	}
	if dry {
		fmt.Fprintf(w, "would delete %d rows\n", s.candidates)
	} else {
		fmt.Fprintf(w, "deleted      %d rows in %d batches\n", s.deleted, s.batches)
	}
}

func runPrune(ctx context.Context, cfg Config, o pruneOptions, log *zap.Logger) (*pruneSummary, error) {
	store := checkpoint.NewStore(cfg.Checkpoint)
	defer store.Close()
	cp, err := store.Load(ctx)
	if err != nil {
		if errors.Is(err, checkpoint.ErrCorrupt) {
			return nil, pruneFailed{err}
		}
		return nil, err
	}
	sum := &pruneSummary{key: store.Key()}
	if cp == nil {
		return sum, pruneFailed{fmt.Errorf("no checkpoint under Redis key %s: nothing is known published, nothing deleted", store.Key())}
	}
	sum.checkpoint = cp.Position()
	if cp.File == "" {
		return sum, pruneFailed{fmt.Errorf("the checkpoint has no binlog file:pos (gtid %s): prune needs one", cp.GTIDSet)}
	}
	srv, err := binlog.Connect(ctx, cfg.Source, log.Named("source"))
	if err != nil {
		return sum, err
	}
	defer srv.Close()
	if srv.Flavor() != binlog.FlavorMariaDB {
		return sum, pruneFailed{errors.New("prune is implemented for MariaDB (consistent snapshot with binlog_snapshot_file/position); see docs/operations.md")}
	}
	if (cp.ServerID != 0 && cp.ServerID != srv.ServerID()) || (cp.Flavor != "" && cp.Flavor != srv.Flavor()) {
		return sum, pruneFailed{fmt.Errorf("the checkpoint was written for server_id %d (%s), the source is server_id %d (%s): its position says nothing about this server's rows",
			cp.ServerID, cp.Flavor, srv.ServerID(), srv.Flavor())}
	}
	cols, err := srv.Columns()
	if err != nil {
		return sum, pruneFailed{err}
	}
	snap, err := openSnapshot(ctx, cfg.Source)
	if err != nil {
		return sum, err
	}
	defer snap.close()
	sum.snapshot = snap.pos

	// B: the smallest id inserted between the checkpoint and the snapshot.
	sum.bound = math.MaxUint64
	if binlog.ComparePos(snap.pos, sum.checkpoint) > 0 {
		if err := srv.Available(sum.checkpoint); err != nil {
			return sum, pruneFailed{err}
		}
		src := cfg.Source
		src.ServerID = o.serverID
		src.PositionMode = binlog.ModeFile
		from := sum.checkpoint
		from.GTIDSet = "" // read by file:pos; the set is not needed
		reader := binlog.NewReader(src, srv.Flavor(), cols, from, log)
		if err := reader.StopAt(snap.pos); err != nil {
			return sum, pruneFailed{err}
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- reader.Run(rctx) }()
		for txn := range reader.Txns() {
			for i := range txn.Events {
				sum.lagRows++
				sum.bound = min(sum.bound, txn.Events[i].ID)
			}
		}
		if err := <-done; err != nil {
			return sum, pruneFailed{fmt.Errorf("read the binlog from the checkpoint %s to the snapshot %s: %w", sum.checkpoint.FilePos(), snap.pos.FilePos(), err)}
		}
		if ctx.Err() != nil {
			return sum, ctx.Err()
		}
	}
	r, err := snap.conn.Execute("SELECT DATE_FORMAT(NOW() - INTERVAL ? SECOND, '%Y-%m-%d %H:%i:%s')", int64(o.olderThan/time.Second))
	if err != nil {
		return sum, fmt.Errorf("prune: read the server's time: %w", err)
	}
	sum.cutoff, _ = r.GetString(0, 0)
	log.Info("prune: published rows are those of the snapshot with id below the bound",
		zap.String("checkpoint", sum.checkpoint.FilePos()), zap.String("snapshot", snap.pos.FilePos()),
		zap.Int64("rows_after_checkpoint", sum.lagRows), zap.Uint64("bound", sum.bound), zap.String("cutoff", sum.cutoff))

	bound := sum.bound
	if bound == math.MaxUint64 {
		bound = math.MaxInt64 // BIGINT; ids are signed in the schema
	}
	q := fmt.Sprintf("SELECT COUNT(*), COALESCE(SUM(id < ?), 0) FROM %s WHERE created_at < ?", snap.table)
	if r, err = snap.conn.Execute(q, bound, sum.cutoff); err != nil {
		return sum, pruneFailed{fmt.Errorf("prune: %s: %w", q, err)}
	}
	old, _ := r.GetInt(0, 0)
	sum.candidates, _ = r.GetInt(0, 1)
	sum.kept = old - sum.candidates
	if o.dryRun || sum.candidates == 0 {
		return sum, nil
	}

	del, err := client.ConnectWithContext(ctx, cfg.Source.Addr, cfg.Source.User, cfg.Source.Password, cfg.Source.Schema, 10*time.Second)
	if err != nil {
		return sum, fmt.Errorf("prune: connect to %s: %w", cfg.Source.Addr, err)
	}
	defer del.Close()
	sel := fmt.Sprintf("SELECT id FROM %s WHERE id > ? AND id < ? AND created_at < ? ORDER BY id LIMIT %d", snap.table, o.batch)
	var after int64
	for ctx.Err() == nil {
		r, err := snap.conn.Execute(sel, after, bound, sum.cutoff)
		if err != nil {
			return sum, pruneFailed{fmt.Errorf("prune: select a batch: %w", err)}
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
		res, err := del.Execute(fmt.Sprintf("DELETE FROM %s WHERE id IN (%s)", snap.table, strings.Join(ids, ",")))
		if err != nil {
			var me *mysql.MyError
			if errors.As(err, &me) && (me.Code == 1142 || me.Code == 1227) { // table or specific access denied
				err = fmt.Errorf("%w: %q cannot DELETE from %s: GRANT DELETE ON %s TO a prune user (the publisher's user stays read-only; docs/operations.md)",
					err, cfg.Source.User, snap.table, snap.table)
			}
			return sum, pruneFailed{fmt.Errorf("prune: delete a batch after id %s: %w", ids[0], err)}
		}
		sum.deleted += int64(res.AffectedRows)
		sum.batches++
		if sum.batches%100 == 0 {
			log.Info("prune progress", zap.Int64("deleted", sum.deleted), zap.Int64("of", sum.candidates), zap.Int64("last_id", after))
		}
		if n < o.batch {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(o.sleep):
		}
	}
	return sum, nil
}
