package pipeline

import (
	"fmt"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"go.uber.org/zap"
)

// checkHistory refuses a stored position (the checkpoint at the first
// pipeline start, the acknowledged position at a restart) that belongs to
// another binlog history than the server's: binlog.CheckHistory on what
// the server shows (Server.HistoryFacts), same telling whether the server
// is the one the position was read from. The refusal is a
// *binlog.HistoryError (fatal) naming the checkpoint key and the fix.
// In GTID mode another server that executed the whole stored set is
// resumed by GTID; at a restart (restart: the first start's decision
// logged it already) that is logged as a Warn.
func (p *Publisher) checkHistory(srv *binlog.Server, from binlog.Position, same, restart bool) error {
	facts, err := srv.HistoryFacts(from, p.cfg.Source.PositionMode)
	if err != nil {
		return err
	}
	facts.SameServer = same
	v := binlog.CheckHistory(facts)
	if v.Err != nil {
		return fmt.Errorf("checkpoint %s: %w", p.store.Key(), v.Err)
	}
	if v.Repoint && restart {
		p.log.Warn("the source is now another server (a promoted replica, a switchover) that has executed every transaction of the acknowledged GTID set: resuming by GTID set, nothing is lost",
			zap.String("gtid_set", from.GTIDSet), zap.Uint32("source_server_id", srv.ServerID()), zap.String("source_server_uuid", srv.ServerUUID()))
	}
	return nil
}
