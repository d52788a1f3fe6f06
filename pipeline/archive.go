package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"go.uber.org/zap"
)

// Archive catch-up (source.archive): when run's resume position is in a
// binlog file the server purged, but a copy of it is in the archive, run
// publishes from the archived files up to the start of the oldest binlog
// the server still has (a transaction boundary: transactions never span
// files), then streams from exactly there. No gap: every archived file
// read must end with the rotate event naming the next one (a copy taken
// while the server still wrote it does not); no double: the hand-over
// position is stored as the checkpoint before the live stream starts.

// resolveStart is srv.Resolve followed by srv.CheckPosition, as
// "checkpoint set" checks a position (the file on the server, the offset
// within it, between two transactions), so that a wrong start is refused
// before it is stored as the first checkpoint; except that a <file>:<pos>
// start the server no longer has but source.archive holds is accepted as
// is; catchUp then reads it from the archive.
func (p *Publisher) resolveStart(srv server, st binlog.Start) (binlog.Position, error) {
	pos, err := srv.Resolve(st)
	if err == nil {
		if err := srv.CheckPosition(pos); err != nil {
			return pos, fmt.Errorf("start %s: %w", pos.FilePos(), err)
		}
		return pos, nil
	}
	if p.cfg.Source.Archive == "" || st.Kind != binlog.StartFilePos || !errors.Is(err, binlog.ErrPositionUnavailable) {
		return pos, err
	}
	pos = binlog.Position{File: st.File, Pos: st.Pos}
	infos, aerr := binlog.InspectFiles(p.cfg.Source.Archive)
	if aerr != nil {
		return pos, fmt.Errorf("%w; source.archive: %w", err, aerr)
	}
	if archiveIndex(infos, pos.File) < 0 {
		return pos, fmt.Errorf("%w; source.archive %s does not hold it either (%s)", err, p.cfg.Source.Archive, archiveRange(infos))
	}
	if err := binlog.CheckFilePosition(infos[archiveIndex(infos, pos.File)].Path, pos.Pos); err != nil {
		return pos, fmt.Errorf("source.start %s (from source.archive): %w", pos.FilePos(), err)
	}
	return pos, nil
}

// catchUp changes nothing when source.archive is not set, in GTID
// position mode with a GTID set, or when the server still has st.from's
// binlog file; also, with a Warn, when the archive does not hold from's
// file or its files do not reach the server's oldest binlog without a gap
// (source.on-purged then decides). Otherwise it publishes the archived
// transactions after from up to the oldest binlog file on the server and
// wants that file's start stored as the checkpoint (the hand-over); once
// stored, it is both the position to stream from and the saved one. The
// step asks to run again: the server may have purged further during the
// catch-up.
func (p *Publisher) catchUp(ctx context.Context, st *startState) (step, error) {
	src := p.cfg.Source
	srv, from, saved := st.srv, st.from, st.saved
	if src.Archive == "" || from.File == "" || (src.PositionMode == binlog.ModeGTID && from.GTIDSet != "") {
		return step{}, nil
	}
	files, err := srv.BinaryLogs()
	if err != nil {
		return step{}, err
	}
	if len(files) == 0 || slices.Contains(files, from.File) {
		return step{}, nil
	}
	oldest := binlog.Position{File: files[0], Pos: 4}
	if binlog.ComparePos(from, oldest) >= 0 {
		return step{}, nil // not purged: from another server, or not written yet; run's checks report it
	}
	// The archive cannot help: say why, and leave the purged position
	// to source.on-purged (fail by default).
	cannot := func(why string, err error) (step, error) {
		p.log.Warn("the resume position's binlog was purged from the server and source.archive cannot bridge it: "+why,
			zap.String("from", from.FilePos()), zap.String("oldest_on_server", oldest.FilePos()), zap.String("archive", src.Archive), zap.Error(err))
		return step{}, nil
	}
	infos, err := binlog.InspectFiles(src.Archive)
	if err != nil {
		return cannot("cannot read the archive", err)
	}
	i := archiveIndex(infos, from.File)
	if i < 0 {
		return cannot("the archive does not hold its file ("+archiveRange(infos)+")", nil)
	}
	// The archived files from from's up to the server's oldest: the
	// oldest itself when archived (read up to its offset 4, i.e.
	// nothing of it), else the last archived file must rotate to it.
	j := archiveIndex(infos, oldest.File)
	read := infos[i:]
	chain := append(slices.Clone(read), binlog.FileInfo{Name: oldest.File})
	end := binlog.Position{}
	if j >= 0 {
		read, chain, end = infos[i:j+1], infos[i:j+1], oldest
	}
	if err := binlog.CheckChain(chain); err != nil {
		return cannot("the archived files do not reach the server's oldest binlog without a gap", err)
	}
	p.log.Warn("the resume position's binlog was purged from the server: catching up from the archive (source.archive)",
		zap.String("from", from.FilePos()), zap.String("oldest_on_server", oldest.FilePos()),
		zap.String("archive", src.Archive), zap.String("archive_files", archiveRange(read)))
	last, err := p.publishArchive(ctx, srv, st.cpw, read, from, end, saved)
	if err != nil || ctx.Err() != nil {
		return step{}, cmpErr(err, ctx.Err())
	}
	// Every transaction before oldest:4 is acknowledged: hand over there.
	oldest.GTIDSet = last.GTIDSet
	hand := oldest
	hand.GTID, hand.Time = last.GTID, last.Time
	return step{writes: []checkpoint.Intent{write("archive hand-over", hand)}, again: true, applied: func() {
		p.resume = oldest
		p.log.Info("caught up from the archive: handing over to the server's binlog (stored as the checkpoint)",
			zap.String("position", oldest.FilePos()), zap.String("gtid_set", oldest.GTIDSet), zap.String("last_archived_transaction", last.FilePos()))
		st.from, st.saved = oldest, oldest
	}}, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// publishArchive publishes the transactions of the archived files after
// from (up to end when set, else to the end of the last file) with the
// run's router, sink and checkpoint committer, and returns the end of the
// last acknowledged transaction (from when there was none). It keeps
// p.resume at the acknowledged position so that a restart resumes there.
func (p *Publisher) publishArchive(ctx context.Context, srv server, cpw *checkpoint.Writer, files []binlog.FileInfo, from, end, saved binlog.Position) (binlog.Position, error) {
	cfg := p.cfg
	tables, cols, err := Tables(cfg, srv)
	if err != nil {
		return from, err
	}
	if sc, err := binlog.SchemaColumns(cfg.Source.SchemaFile, cfg.Source.Table); err != nil {
		return from, err
	} else if sc != nil {
		cols = sc
	}
	paths := make([]string, len(files))
	for k, fi := range files {
		paths[k] = fi.Path
	}
	reader, err := binlog.NewFileReader(paths, binlog.FileConfig{Schema: cfg.Source.Schema, Table: cfg.Source.Table, Flavor: srv.Flavor(),
		Columns: cols, Start: from, End: end, TxnBuffer: cfg.Source.TxnBuffer, Tables: tables}, p.log)
	if err != nil {
		return from, err
	}
	if err := p.stream(ctx, "archive catch-up", reader, nil, nil, cpw, saved, false); err != nil {
		return p.resume, fmt.Errorf("archive catch-up: %w", err)
	}
	res := reader.Result()
	if ctx.Err() == nil && res.Truncated != nil {
		return p.resume, fmt.Errorf("archive catch-up: %w", res.Truncated)
	}
	p.log.Info("archived binlog files published", zap.Int("transactions", res.Txns), zap.Int("events", res.Events),
		zap.String("end", res.End.FilePos()), zap.String("stopped_at", fmt.Sprintf("%s:%d", res.StopFile, res.StopOffset)))
	return res.End, nil
}

func archiveIndex(infos []binlog.FileInfo, name string) int {
	return slices.IndexFunc(infos, func(fi binlog.FileInfo) bool { return fi.Name == name })
}

func archiveRange(infos []binlog.FileInfo) string {
	if len(infos) == 0 {
		return "no files"
	}
	return fmt.Sprintf("%s … %s", infos[0].Name, infos[len(infos)-1].Name)
}
