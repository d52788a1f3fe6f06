package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/health"
	"go.uber.org/zap"
)

// measureEvery is how often a streaming pipeline measures the source's
// binlog files for the metrics bytes_behind_source and
// retention_headroom_bytes/_seconds (SHOW BINARY LOGS and the expiry
// settings, on a SQL connection of its own).
const measureEvery = 15 * time.Second

// fileTimes remembers when the binlog files the reader read were opened
// (their Format_description event's timestamp), for the seconds headroom.
type fileTimes struct {
	mu sync.Mutex
	at map[string]time.Time
}

// FileStarted implements binlog.FileObserver.
func (f *fileTimes) FileStarted(file string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = map[string]time.Time{}
	}
	if len(f.at) > 64 { // a long run: keep the map small
		clear(f.at)
	}
	f.at[file] = at
}

func (f *fileTimes) get(file string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.at[file]
	return t, ok
}

// measure reports the binlog measurements every measureEvery until ctx is
// done. Failures (the server unreachable: the reader notices that itself)
// are logged at debug level and tried again at the next tick. When the
// server's files show that its binlog changed under the stream
// (binlog.StreamEvidence), it calls end with the *binlog.HistoryError and
// returns: nothing else would end a stream whose dump thread waits at an
// offset the new file has not reached.
func (p *Publisher) measure(ctx context.Context, committer *checkpoint.Committer, prog *progress, files *fileTimes, end context.CancelCauseFunc) {
	var srv server
	defer func() {
		if srv != nil {
			srv.Close()
		}
	}()
	t := time.NewTicker(measureEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if srv == nil {
			var err error
			if srv, err = p.connect(ctx, "measure"); err != nil {
				p.log.Debug("binlog measurement: connect failed", zap.Error(err))
				srv = nil
				continue
			}
		}
		if err := p.measureOnce(srv, committer, prog, files); err != nil {
			if errors.Is(err, binlog.ErrHistory) {
				end(err)
				return
			}
			p.log.Debug("binlog measurement failed", zap.Error(err))
			srv.Close()
			srv = nil
		}
	}
}

func (p *Publisher) measureOnce(srv server, committer *checkpoint.Committer, prog *progress, files *fileTimes) error {
	logs, err := srv.BinaryLogSizes()
	if err != nil || len(logs) == 0 {
		return err
	}
	// The evidence must hold at two measurements in a row: MySQL's
	// File_size of the active binlog can lag what its dump thread already
	// sent (a clean-clone run saw 2,171 bytes), while a file created again
	// stays short of the old offset.
	seen := map[string]bool{}
	for _, at := range prog.readPositions() {
		if why := binlog.StreamEvidence(logs, at); why != "" {
			seen[at.File] = true
			if !prog.suspect[at.File] {
				continue
			}
			mode := binlog.ModeFile
			if p.cfg.Source.PositionMode == binlog.ModeGTID {
				mode = binlog.ModeGTID
			}
			return &binlog.HistoryError{Stored: committer.Acked(), Mode: mode, Change: binlog.ChangeReset,
				Evidence: []string{why + " (noticed while streaming, twice " + measureEvery.String() + " apart)"}}
		}
	}
	prog.suspect = seen
	last := logs[len(logs)-1]
	end := binlog.Position{File: last.Name, Pos: uint32(min(last.Size, 1<<32-1))}
	if !prog.caughtUp() {
		if n, _, ok := binlog.Span(logs, committer.Acked(), end); ok {
			p.obs.Lag.SetBytesBehind(n)
		}
	}
	saved := committer.Saved()
	bytes, d := int64(-1), time.Duration(-1)
	if n, _, ok := binlog.Headroom(logs, saved); ok {
		bytes = n
	}
	if ret, err := srv.Retention(); err == nil {
		expire := time.Duration(ret.ExpireSeconds) * time.Second
		if expire <= 0 && ret.ExpireDays > 0 {
			expire = time.Duration(ret.ExpireDays * float64(24*time.Hour))
		}
		if opened, ok := files.get(saved.File); ok {
			d = health.RetentionHeadroom(expire, opened, time.Now())
		}
	}
	p.obs.Lag.SetRetentionHeadroom(bytes, d)
	return nil
}
