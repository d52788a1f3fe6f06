package pipeline

import (
	"context"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"go.uber.org/zap"
)

// committed settles the transactional id's open transaction (fencing any
// earlier publisher of it: sink.SettleTransactions) and reads the newest
// committed record of each partition of the fixed topic
// (sink.CommittedHeads), for Facts.Committed. nil without exactly-once or
// with a template topic (its topics are not known at start: a restart
// resumes at the checkpoint, publishing what was committed after it again).
func (p *Publisher) committed(ctx context.Context) (map[int]map[string]string, error) {
	cfg := p.cfg.Kafka.Transactional(p.store.Key())
	if cfg.TxnID() == "" {
		return nil, nil
	}
	if err := sink.SettleTransactions(ctx, cfg, p.log.Named("sink")); err != nil {
		return nil, err
	}
	if strings.Contains(p.cfg.Router.Topic, "{") {
		p.log.Warn("exactly-once with a template topic: the last committed transaction is not looked up at start; a restart resumes at the checkpoint and publishes what was committed after it again",
			zap.String("topic", p.cfg.Router.Topic))
		return nil, nil
	}
	return sink.CommittedHeads(ctx, cfg, p.cfg.Router.Topic)
}

// committedResume is the exactly-once rule at a pipeline restart: from, the
// last acknowledged position, moves to the end of the last committed
// transaction when that is later (a commit whose answer was lost).
func (p *Publisher) committedResume(ctx context.Context, srv server, from binlog.Position) (binlog.Position, error) {
	heads, err := p.committed(ctx)
	if err != nil || heads == nil {
		return from, err
	}
	end, _ := CommittedEnd(heads)
	st, err := binlog.ParseStart(end)
	if end == "" || err != nil || binlog.ComparePos(binlog.Position{File: st.File, Pos: st.Pos}, from) <= 0 {
		return from, nil
	}
	at, err := p.resolveStart(srv, st)
	if err != nil {
		return from, err
	}
	p.log.Warn("exactly-once: the last committed transaction is later than the last acknowledged position (a commit's answer was lost): resuming after it",
		zap.String("acknowledged", from.String()), zap.String("resume", end))
	return at, nil
}
