package pipeline

import (
	"context"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"go.uber.org/zap"
)

// purgedPhase checks that the server still has what lies after st.from
// (binlog.Server.CheckResume). When it was purged, source.on-purged
// decides: fail returns the ErrPositionUnavailable error naming the
// stored and the oldest available position; earliest and latest resume
// there with a Warn and want the new position stored as the checkpoint at
// once (then it is st.from and st.saved). A position in the oldest
// binlog file (the next purge removes it) is logged as a Warn.
func (p *Publisher) purgedPhase(ctx context.Context, st *startState) (step, error) {
	srv, from := st.srv, st.from
	pg, err := srv.CheckResume(from)
	if err != nil {
		return step{}, err
	}
	if pg == nil {
		p.warnHeadroom(srv, from)
		return step{}, nil
	}
	policy := p.cfg.Source.OnPurged
	if policy == "" || policy == binlog.OnPurgedFail {
		return step{}, pg.Err()
	}
	to, err := srv.Skip(pg, policy)
	if err != nil {
		return step{}, err
	}
	fields := []zap.Field{
		zap.String("key", p.store.Key()), zap.String("on_purged", policy),
		zap.String("stored", from.Text()), zap.String("oldest_available", pg.Oldest.Text()), zap.String("resume", to.Text()),
		zap.Uint64("purged_skips", p.obs.Stops.PurgedSkip()),
	}
	if pg.FilesPurged >= 0 {
		fields = append(fields, zap.Int("files_purged", pg.FilesPurged))
	}
	if pg.Transactions >= 0 {
		fields = append(fields, zap.Int64("transactions_purged", pg.Transactions))
	}
	if len(pg.Domains) > 0 {
		fields = append(fields, zap.Strings("purged_domains", pg.Domains))
	}
	if policy == binlog.OnPurgedLatest && to.File != "" {
		// Skipping to the end also skips every binlog still on the server.
		if files, err := srv.BinaryLogSizes(); err == nil {
			if n, _, ok := binlog.Headroom(files, to); ok {
				fields = append(fields, zap.Int64("available_bytes_skipped", n))
			}
		}
	}
	p.log.Warn("the checkpoint's binlog was purged from the server: resuming at the "+policy+" position (source.on-purged); "+
		"the outbox events in between are NOT published (purged bytes unknown; see docs/operations.md, purged binlogs)", fields...)
	return step{writes: []checkpoint.Intent{write("on-purged skip", binlog.Position{File: to.File, Pos: to.Pos, GTIDSet: to.GTIDSet})}, applied: func() {
		p.resume = to
		st.from, st.saved = to, to
	}}, nil
}

// warnHeadroom logs a Warn when from lies in the oldest binlog file the
// server keeps: the next purge (binlog expiry, PURGE BINARY LOGS) takes it.
// It is rate-limited to once per 10 minutes across pipeline restarts.
func (p *Publisher) warnHeadroom(srv server, from binlog.Position) {
	if from.File == "" {
		return
	}
	files, err := srv.BinaryLogSizes()
	if err != nil || len(files) < 2 {
		return // one file: it is also the current one, which is never purged
	}
	n, before, ok := binlog.Headroom(files, from)
	if !ok || before > 0 {
		return
	}
	fields := []zap.Field{zap.String("position", from.FilePos()), zap.Int64("bytes_after_oldest_start", n),
		zap.Int("binlog_files", len(files))}
	if ret, err := srv.Retention(); err == nil {
		fields = append(fields, zap.Int64("binlog_expire_logs_seconds", ret.ExpireSeconds), zap.Float64("expire_logs_days", ret.ExpireDays))
	}
	if ok, _ := p.headroom.Allow(time.Now()); !ok {
		return
	}
	p.log.Warn("the resume position is in the oldest binlog file the server keeps: the next purge removes it; "+
		"catch up, or raise binlog_expire_logs_seconds (see cdc-outbox status, retention headroom)", fields...)
}
