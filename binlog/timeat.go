package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// firstEventTimeout bounds each short binlog dump that reads a file's
// first event header; firstEventTries dumps are tried.
const (
	firstEventTimeout = 10 * time.Second
	firstEventTries   = 2
)

// FirstEventTime returns the timestamp of file's first event (its
// Format_description event at offset 4: when the server opened the file),
// read through a short binlog dump from file:4 with the configured replica
// server_id. One-second resolution (the binlog event header's timestamp).
// A dump that sends nothing within firstEventTimeout is tried once more on
// a new connection (a MySQL 9.7 under load once sent nothing for 10 s to
// the dump that followed another one of the same server_id); after that
// the error names the file and the wait.
func (s *Server) FirstEventTime(ctx context.Context, file string) (time.Time, error) {
	for try := 1; ; try++ {
		t, err := s.firstEventTime(ctx, file)
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return t, err
		}
		if try == firstEventTries {
			return t, &PositionError{Pos: Position{File: file, Pos: 4}, Err: fmt.Errorf("binlog: the server sent no event of %s in %d binlog dumps from its offset 4, each given %s: check the server's load and error log", file, try, firstEventTimeout)}
		}
		s.log.Warn("a binlog dump sent no event in time; trying once more", zap.String("file", file), zap.Uint32("pos", 4), zap.Duration("waited", firstEventTimeout))
	}
}

func (s *Server) firstEventTime(ctx context.Context, file string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, firstEventTimeout)
	defer cancel()
	syncer, err := newSyncer(ctx, s.cfg, s.flavor, s.log)
	if err != nil {
		return time.Time{}, err
	}
	defer syncer.Close()
	streamer, err := syncer.StartSync(mysql.Position{Name: file, Pos: 4})
	if err != nil {
		return time.Time{}, &PositionError{Pos: Position{File: file, Pos: 4}, Err: classify(err)}
	}
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			return time.Time{}, &PositionError{Pos: Position{File: file, Pos: 4}, Err: fmt.Errorf("binlog: read the first event of %s: %w", file, classify(err))}
		}
		if ev.Header.EventType == replication.FORMAT_DESCRIPTION_EVENT && ev.Header.Timestamp != 0 {
			return time.Unix(int64(ev.Header.Timestamp), 0).UTC(), nil
		}
	}
}

// PositionAt resolves a time to the position where the first transaction
// whose commit timestamp (the header timestamp of its XID/COMMIT event) is
// at or after t begins: the end of the transaction before it. Transactions
// committed before t end at or before the returned position; those at or
// after t end after it. Binlog timestamps have a one-second resolution, so
// t is effectively truncated to the second, and transactions committed
// within the same second as t are all at or after it.
//
// Rows are not decoded (the scan only reads commit times).
//
// It picks the newest file in SHOW BINARY LOGS whose first event is before
// t (by FirstEventTime, newest first), then reads transactions forward from
// its offset 4 with a Reader (columns as for NewReader) up to end, the end
// of the range to search (typically Server.Latest). When t is after every
// transaction it returns end. When even the oldest file was opened at or
// after t, the transactions before it may have been purged: the error
// wraps ErrPositionUnavailable and names the oldest available position.
func (s *Server) PositionAt(ctx context.Context, t time.Time, columns []string, end Position) (Position, error) {
	t = t.Truncate(time.Second)
	files, err := s.BinaryLogs()
	if err != nil {
		return Position{}, err
	}
	if len(files) == 0 {
		return Position{}, fmt.Errorf("%w: the server has no binary logs: enable log_bin", ErrServerConfig)
	}
	start := -1
	for i := len(files) - 1; i >= 0; i-- {
		opened, err := s.FirstEventTime(ctx, files[i])
		if err != nil {
			return Position{}, err
		}
		s.log.Debug("binlog file opened", zap.String("file", files[i]), zap.Time("first_event", opened))
		if opened.Before(t) {
			start = i
			break
		}
		if i == 0 {
			return Position{}, fmt.Errorf("%w: %s is before the oldest binlog the server has (%s:4, opened at %s): transactions of that time may have been purged; "+
				"give a later time, or %s:4 to start at the oldest available position",
				ErrPositionUnavailable, t.Format(time.RFC3339), files[0], opened.Format(time.RFC3339), files[0])
		}
	}
	from := Position{File: files[start], Pos: 4}
	if ComparePos(from, end) >= 0 {
		return end, nil
	}
	r := NewReader(s.cfg, s.flavor, columns, from, s.log)
	// Only commit times are looked at: rows are not decoded, so that no
	// row (published or not) can fail the scan.
	r.noRows = true
	if err := r.StopAt(end); err != nil {
		return Position{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g errgroup.Group
	g.Go(func() error { return r.Run(ctx) })
	prev, found := from, false
	for txn := range r.Txns() {
		// Compared by the second, as t: MySQL's commit times have µs
		// (immediate_commit_timestamp), the binlog's timestamps seconds.
		if !txn.End.Time.Truncate(time.Second).Before(t) {
			found = true
			cancel()
			break
		}
		prev = txn.End
	}
	for range r.Txns() { // drain until Run returns
	}
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return Position{}, fmt.Errorf("binlog: resolve %s to a position: %w", t.Format(time.RFC3339), err)
	}
	if !found {
		return end, nil
	}
	prev.GTIDSet, prev.GTID, prev.Time = "", "", time.Time{}
	return prev, nil
}

// newSyncer returns a go-mysql binlog syncer for cfg (the same settings as
// Reader.Run's).
func newSyncer(ctx context.Context, cfg Config, flavor string, log *zap.Logger, adjust ...func(*replication.BinlogSyncerConfig)) (*replication.BinlogSyncer, error) {
	sc, err := syncerConfig(ctx, cfg, flavor) // tls.go: login and TLS
	if err != nil {
		return nil, err
	}
	sc.HeartbeatPeriod = cfg.HeartbeatPeriod
	sc.ReadTimeout = cfg.ReadTimeout
	sc.DisableRetrySync = true
	sc.MaxReconnectAttempts = 1
	sc.RenderJSONAsMySQLText = true
	sc.VerifyChecksum = true
	sc.Logger = slog.New(zapHandler{log.Named("go-mysql")})
	for _, f := range adjust {
		f(&sc)
	}
	return replication.NewBinlogSyncer(sc), nil
}
