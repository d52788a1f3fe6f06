package binlog

import (
	"context"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"
)

// checksumTimeout bounds the short binlog dump of corruptAt.
const checksumTimeout = 10 * time.Second

// corruptAfter reads the binlog again from from (a transaction boundary
// at or before the failure), undecoded (a binlog dump in go-mysql's raw
// mode), verifying each event's CRC32, and returns the start of the first
// event whose checksum fails. The Reader's syncer verifies checksums
// (VerifyChecksum), but its error does not wrap
// replication.ErrChecksumMismatch, and go-mysql's read-ahead hides which
// event failed; this tells a damaged event, which no restart gets past,
// from a passing failure. ok is false when every event read verifies
// (until the stream is idle for a second, or checksumTimeout) or the
// server sends no checksums (binlog_checksum=NONE). fill is set for a
// server that writes end_log_pos 0 inside transactions (MariaDB 11.4+,
// see Reader.omitsPositions): go-mysql then fills the positions in, as
// for the Reader, so that the rows events of a transaction are verified
// and the damaged one named.
func corruptAfter(ctx context.Context, cfg Config, flavor string, fill bool, from Position, log *zap.Logger) (at Position, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, checksumTimeout)
	defer cancel()
	c := cfg
	c.ServerID = cfg.ServerID ^ 1<<31 // not the Reader's own registration, still held
	syncer, err := newSyncer(ctx, c, flavor, log, func(sc *replication.BinlogSyncerConfig) {
		sc.RawModeEnabled, sc.VerifyChecksum, sc.FillZeroLogPos = true, false, fill
	})
	if err != nil {
		return Position{}, false, err
	}
	defer syncer.Close()
	streamer, err := syncer.StartSync(mysql.Position{Name: from.File, Pos: from.Pos})
	if err != nil {
		return Position{}, false, classify(err)
	}
	crc, file := false, from.File
	for {
		idle, stop := context.WithTimeout(ctx, time.Second)
		ev, err := streamer.GetEvent(idle)
		stop()
		if err != nil {
			if ctx.Err() == nil && idle.Err() != nil {
				return Position{}, false, nil // read to the end: every event verified
			}
			return Position{}, false, fmt.Errorf("binlog: read the binlog again from %s: %w", from.FilePos(), err)
		}
		switch e := ev.Event.(type) {
		case *replication.FormatDescriptionEvent:
			crc = e.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32
			continue
		case *replication.RotateEvent:
			file = string(e.NextLogName)
			continue
		}
		if !crc {
			return Position{}, false, nil
		}
		if ev.Header.LogPos == 0 || ev.Header.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0 ||
			ev.Header.EventType == replication.HEARTBEAT_EVENT || ev.Header.EventType == replication.HEARTBEAT_LOG_EVENT_V2 {
			continue // artificial events (not in the file; with fill, the only ones left without a position)
		}
		if verifyChecksum(ev.RawData) != nil {
			return Position{File: file, Pos: eventStart(ev.Header)}, true, nil
		}
	}
}
