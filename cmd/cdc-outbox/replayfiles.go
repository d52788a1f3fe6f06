package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"
)

// fileSource is replay's source with --binlog-files: a FileReader over
// archived binlog files (no server connection), behind a filter for GTID
// set bounds. It implements Run and Txns like binlog.Reader.
type fileSource struct {
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

// schemaColumns reads the outbox table's column names from a schema file
// (its CREATE TABLE), "" giving none.
func schemaColumns(path, table string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	ddl, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("schema file: %w", err)
	}
	cols, err := binlog.ColumnsFromCreateTable(string(ddl), table)
	if err != nil {
		return nil, fmt.Errorf("schema file %s: %w", path, err)
	}
	return cols, nil
}

// noColumnsHint adds the fix to a FileReader's ErrNoColumns error.
func noColumnsHint(err error) error {
	if errors.Is(err, binlog.ErrNoColumns) {
		return fmt.Errorf("%w; give the outbox table's CREATE TABLE with --schema-file (e.g. schema/mariadb.sql) or source.schema-file", err)
	}
	return err
}

// planFileReplay lists and inspects the files of --binlog-files, resolves
// --from and --to against them (a <file>:<pos> must be a transaction
// boundary of a given file, a time resolves from the files' timestamps)
// and checks that the files from the start to the end follow each other.
func planFileReplay(ctx context.Context, cfg Config, o replayOptions, log *zap.Logger) (replayPlan, error) {
	var plan replayPlan
	paths, err := binlog.BinlogFiles(o.files)
	if err != nil {
		return plan, fmt.Errorf("--binlog-files: %w", err)
	}
	fs := &fileSource{paths: paths, log: log}
	for _, p := range paths {
		fi, err := binlog.InspectFile(p)
		if err != nil {
			return plan, fmt.Errorf("--binlog-files: %w", err)
		}
		fs.infos = append(fs.infos, fi)
		plan.logs = append(plan.logs, binlog.LogFile{Name: fi.Name, Size: fi.Clean})
	}
	first, last := fs.infos[0], fs.infos[len(fs.infos)-1]
	fs.flavor = cfg.Source.Flavor
	if fs.flavor == "" {
		fs.flavor = first.Flavor()
	}
	plan.flavor = fs.flavor
	schemaFile := o.schemaFile
	if schemaFile == "" {
		schemaFile = cfg.Source.SchemaFile
	}
	if plan.columns, err = schemaColumns(schemaFile, cfg.Source.Table); err != nil {
		return plan, err
	}
	end := binlog.Position{File: last.Name, Pos: uint32(last.Clean)}
	resolve := func(flag string, p point) (binlog.Position, error) {
		switch {
		case !p.time.IsZero():
			pos, err := fs.positionAt(ctx, cfg, plan.columns, p.time, end)
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
	plan.from = binlog.Position{File: first.Name, Pos: 4}
	if !o.from.isZero() {
		if plan.from, err = resolve("--from", o.from); err != nil {
			return plan, err
		}
	}
	plan.to = end
	if !o.to.isZero() {
		if plan.to, err = resolve("--to", o.to); err != nil {
			return plan, err
		}
	}
	if err := binlog.CheckRange(plan.flavor, plan.from, plan.to, end); err != nil {
		if o.to.isZero() && plan.from.File != "" && binlog.ComparePos(plan.from, end) == 0 {
			plan.files = fs
			return plan, nil // nothing to replay
		}
		return plan, fmt.Errorf("--from %s, --to %s: %w", describe(plan.from), describe(plan.to), err)
	}
	fs.cfg = binlog.FileConfig{Schema: cfg.Source.Schema, Table: cfg.Source.Table, Flavor: fs.flavor, Columns: plan.columns,
		TxnBuffer: cfg.Source.TxnBuffer}
	if plan.from.File != "" {
		fs.cfg.Start = plan.from
	} else if fs.from, err = mysql.ParseGTIDSet(fs.flavor, plan.from.GTIDSet); err != nil {
		return plan, err
	}
	if plan.to.File != "" {
		if !o.to.isZero() {
			fs.cfg.End = plan.to
		}
	} else if fs.to, err = mysql.ParseGTIDSet(fs.flavor, plan.to.GTIDSet); err != nil {
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
	if err := checkChain(fs.infos[lo : hi+1]); err != nil {
		return plan, fmt.Errorf("--binlog-files: %w", err)
	}
	plan.files = fs
	return plan, nil
}

// checkChain checks that each file but the last ends with a rotate event
// naming the next one. Errors wrap binlog.ErrFileOrder in a
// *binlog.FileError naming the file and the offset where it ends.
func checkChain(infos []binlog.FileInfo) error {
	for i := 0; i+1 < len(infos); i++ {
		fi, next := infos[i], infos[i+1]
		if fi.RotateTo == next.Name {
			continue
		}
		why := "ends with no rotate event (copied while the server was still writing it, or the server stopped uncleanly): what the server wrote to it after the copy is missing"
		if fi.Truncated {
			why = "ends inside an event (copied while the server was writing it)"
		} else if fi.RotateTo != "" {
			why = fmt.Sprintf("ends with a rotate to %s: a file is missing between", fi.RotateTo)
		}
		return &binlog.FileError{File: fi.Name, Offset: fi.Clean, Err: fmt.Errorf("%w: %s, but %s follows it; copy the complete file again (or end the range before it)",
			binlog.ErrFileOrder, why, next.Name)}
	}
	return nil
}

func (fs *fileSource) index(name string) int {
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
func (fs *fileSource) positionAt(ctx context.Context, cfg Config, columns []string, t time.Time, end binlog.Position) (binlog.Position, error) {
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
	errc := make(chan error, 1)
	go func() { errc <- r.Run(sctx) }()
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
	if err := <-errc; err != nil {
		return start, noColumnsHint(err)
	}
	if !found {
		return end, nil
	}
	return binlog.Position{File: prev.File, Pos: prev.Pos}, nil
}

// Txns returns the transactions of the range; closed when Run returns.
func (fs *fileSource) Txns() <-chan binlog.Txn { return fs.out }

// start creates the FileReader; call it once before Run.
func (fs *fileSource) start() error {
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
func (fs *fileSource) Run(ctx context.Context) error {
	defer close(fs.out)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- fs.reader.Run(rctx) }()
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
	return noColumnsHint(<-errc)
}

// report prints where reading stopped, and a truncated last file.
func (fs *fileSource) report(w io.Writer) {
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
func (fs *fileSource) describeFiles() string {
	if len(fs.infos) == 1 {
		return fmt.Sprintf("1 binlog file (%s) in %s", fs.infos[0].Name, filepath.Dir(fs.infos[0].Path))
	}
	return fmt.Sprintf("%d binlog files (%s … %s) in %s", len(fs.infos), fs.infos[0].Name, fs.infos[len(fs.infos)-1].Name, filepath.Dir(fs.infos[0].Path))
}
