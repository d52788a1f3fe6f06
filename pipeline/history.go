package pipeline

import (
	"fmt"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"go.uber.org/zap"
)

// CheckStored checks a stored checkpoint against the server's binlog
// history as run does before resuming from it (binlog.CheckHistory, the
// server compared with the one cp was written for): the refusal is a
// *binlog.HistoryError; Repoint tells a resume by GTID on another server.
// For check's preflight.
func CheckStored(srv server, mode string, cp *checkpoint.Checkpoint) (binlog.HistoryVerdict, error) {
	return history(srv, mode, cp.Position(), sameServer(checkpoint.Source{ServerID: cp.ServerID, ServerUUID: cp.ServerUUID, Flavor: cp.Flavor},
		checkpoint.Source{ServerID: srv.ServerID(), ServerUUID: srv.ServerUUID(), Flavor: srv.Flavor()}))
}

// history is binlog.CheckHistory on what srv shows of from's history,
// same telling whether srv is the server from was read from.
func history(srv server, mode string, from binlog.Position, same bool) (binlog.HistoryVerdict, error) {
	facts, err := srv.HistoryFacts(from, mode)
	if err != nil {
		return binlog.HistoryVerdict{}, err
	}
	facts.SameServer = same
	return binlog.CheckHistory(facts), nil
}

// checkHistory refuses a stored position (the checkpoint at the first
// pipeline start, the acknowledged position at a restart) that belongs to
// another binlog history than the server's: binlog.CheckHistory on what
// the server shows (Server.HistoryFacts), same telling whether the server
// is the one the position was read from. The refusal is a
// *binlog.HistoryError (fatal) naming the checkpoint key and the fix.
// In GTID mode another server that executed the whole stored set is
// resumed by GTID; at a restart (restart: the first start's decision
// logged it already) that is logged as a Warn.
func (p *Publisher) checkHistory(srv server, from binlog.Position, same, restart bool) error {
	v, err := history(srv, p.cfg.Source.PositionMode, from, same)
	if err != nil {
		return err
	}
	if v.Err != nil {
		return fmt.Errorf("checkpoint %s: %w", p.store.Key(), v.Err)
	}
	if v.Repoint && restart {
		p.log.Warn("the source is now another server (a promoted replica, a switchover) that has executed every transaction of the acknowledged GTID set: resuming by GTID set, nothing is lost",
			zap.String("gtid_set", from.GTIDSet), zap.Uint32("source_server_id", srv.ServerID()), zap.String("source_server_uuid", srv.ServerUUID()))
	}
	return nil
}
