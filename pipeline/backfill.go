package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/snapshot"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// HeaderBackfill marks records published by the backfill ("true").
const HeaderBackfill = "backfill"

// backfillProgress is how often the backfill's progress is logged.
const backfillProgress = 5 * time.Second

// backfill publishes the outbox rows matching source.backfill-where from a
// consistent snapshot through Run (a signal drains what was read, like
// run), and once Kafka acknowledged them all sets st.from to the
// snapshot's binlog position and wants it stored as the checkpoint: the
// binlog stream starts there. Interrupted, it wants nothing stored: the
// next start backfills again (the rows are published again with the same
// event_id).
func (p *Publisher) backfill(ctx context.Context, st *startState) (step, error) {
	at, prog, err := p.backfillRows(ctx, st.srv)
	if err != nil {
		return step{}, err
	}
	st.from = at
	return step{writes: []checkpoint.Intent{write("backfill end", at)}, applied: func() {
		p.log.Info("backfill done: every row of the snapshot was acknowledged; the snapshot's position is stored as the first checkpoint",
			zap.Int64("rows", prog.acked), zap.Duration("took", time.Since(prog.began).Round(time.Millisecond)),
			zap.String("key", p.store.Key()), zap.String("file", at.File), zap.Uint32("pos", at.Pos), zap.String("gtid_set", at.GTIDSet))
	}}, nil
}

// backfillRows publishes the snapshot's rows and returns its position and
// the progress counted.
func (p *Publisher) backfillRows(ctx context.Context, srv server) (binlog.Position, *backfillState, error) {
	cfg := p.cfg
	where := strings.TrimSpace(cfg.Source.BackfillWhere)
	if where == "" {
		return binlog.Position{}, nil, backfillError("source.backfill-where is empty: give the condition of the rows to publish, e.g. %s", binlog.DefaultBackfillWhere)
	}
	if len(cfg.Source.Tables) > 0 {
		return binlog.Position{}, nil, backfillError("the backfill reads the one table of source.schema/source.table, not source.tables: backfill each table with its own configuration first, or start without it")
	}
	snap, err := snapshot.Open(ctx, cfg.Source, where)
	if err != nil {
		return binlog.Position{}, nil, err
	}
	defer snap.Close()
	// A table with a mapping: its rows are read through it (id, key, topic ... columns).
	if ts, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic); err == nil && !ts.Legacy() {
		found, err := srv.CheckTables(ts)
		if err != nil {
			return binlog.Position{}, nil, err
		}
		if len(found) == 1 {
			if err := snap.SetTable(found[0]); err != nil {
				return binlog.Position{}, nil, err
			}
		}
	}
	at := snap.Pos()
	if at.GTIDSet == "" { // MySQL's snapshot read Executed_Gtid_Set with the position
		if at.GTIDSet, err = srv.GTIDSetAt(at); err != nil {
			return binlog.Position{}, nil, err
		}
	}
	snap.SetPosition(at)
	total, err := snap.Count()
	if err != nil {
		return binlog.Position{}, nil, err
	}
	p.log.Info("backfill: consistent snapshot taken; publishing the rows the polling dispatcher had not sent, then streaming the binlog from the snapshot's position",
		zap.String("file", at.File), zap.Uint32("pos", at.Pos), zap.String("gtid_set", at.GTIDSet),
		zap.String("where", where), zap.Int64("rows", total))

	budget := binlog.NewBudget(cfg.Source.BufferBytes)
	snap.SetBudget(budget)
	writer := sink.NewWriter(cfg.Kafka, backfillRouter{router.New(cfg.Router, cfg.ReservedTopics())}, router.Balancer(), p.log)
	writer.SetObserver(p.obs.Sink)
	prog := &backfillState{began: time.Now(), total: total, last: time.Now(), log: p.log, bar: p.opts.BackfillProgress}
	err = Run(ctx, Stages{Name: "backfill", Source: snap, Writer: writer, Budget: budget, OnAck: prog.ack}, cfg.ShutdownTimeout, p.log)
	p.deadLettered += writer.DeadLettered()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return binlog.Position{}, nil, fmt.Errorf("backfill (nothing stored; the next start backfills again, publishing its rows again with the same event_id; %d of %d rows acknowledged): %w",
			prog.acked, total, err)
	}
	snap.Close()
	return at, prog, nil
}

// backfillState counts a backfill's progress from the acknowledgements
// and logs it every backfillProgress.
type backfillState struct {
	began, last time.Time
	total       int64
	acked       int64 // rows acknowledged by Kafka
	lastAcked   int64 // at the last progress line
	log         *zap.Logger
	bar         func(acked, total int64, at string) // Options.BackfillProgress
}

func (st *backfillState) ack(a sink.Ack) {
	st.acked += int64(a.Events)
	if st.bar != nil {
		st.bar(st.acked, st.total, a.End.Text())
	}
	now := time.Now()
	if now.Sub(st.last) < backfillProgress {
		return
	}
	rate := float64(st.acked-st.lastAcked) / now.Sub(st.last).Seconds()
	st.last, st.lastAcked = now, st.acked
	fields := []zap.Field{zap.Int64("acknowledged", st.acked), zap.Int64("total", st.total), zap.Float64("rows_per_s", float64(int64(rate)))}
	if st.total > 0 && st.acked > 0 {
		eta := time.Duration(float64(now.Sub(st.began)) * float64(st.total-st.acked) / float64(st.acked))
		fields = append(fields, zap.Float64("percent", float64(int(1000*float64(st.acked)/float64(st.total)))/10), zap.Duration("eta", eta.Round(time.Second)))
	}
	st.log.Info("backfill progress", fields...)
}

// backfillRouter routes like the configured router and adds backfill=true.
type backfillRouter struct{ inner *router.Router }

func (r backfillRouter) Route(e *binlog.Event, end binlog.Position) (kafka.Message, error) {
	m, err := r.inner.Route(e, end)
	m.Headers = append(m.Headers, kafka.Header{Key: HeaderBackfill, Value: []byte("true")})
	return m, err
}
