package replay

import (
	"context"
	"errors"
	"sync"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/pipeline"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// NewPlan resolves --from and --to against the server (or the files of
// --binlog-files) and checks the range. Its errors are usage errors:
// nothing was read yet.
func NewPlan(ctx context.Context, cfg config.Config, o Options, log *zap.Logger) (Plan, error) {
	if o.Files != "" {
		return planFiles(ctx, cfg, o, log)
	}
	return planServer(ctx, cfg, o, log)
}

// ResumeFrom is the --from that resumes a replay whose transactions up to
// acked were published: acked's file:pos when replay accepts it there (a
// file of --binlog-files, or any on the server); else its GTID set (a
// relay log's events carry the source server's positions, which are not
// offsets of the relay log); "" when nothing was acknowledged.
func (plan Plan) ResumeFrom(acked binlog.Position) string {
	switch {
	case acked.IsZero():
		return ""
	case plan.Files != nil && plan.Files.index(acked.File) < 0 && acked.GTIDSet != "":
		return "gtid:" + acked.GTIDSet
	case acked.File == "":
		return "gtid:" + acked.GTIDSet
	}
	return acked.FilePos()
}

// Empty reports whether the range holds nothing: its start is the end.
func (plan Plan) Empty() bool {
	return plan.From.File != "" && binlog.ComparePos(plan.From, plan.To) == 0
}

// Bytes returns the binlog bytes of the range, -1 when unknown (GTID
// bounds).
func (plan Plan) Bytes() int64 {
	if n, _, ok := binlog.Span(plan.Logs, plan.From, plan.To); ok {
		return n
	}
	return -1
}

// Progress is a replay's progress: events acknowledged (dry run: read)
// up to At, the end of the last such transaction, and Done bytes of the
// range's Bytes (-1 when unknown).
type Progress struct {
	Events int64
	At     binlog.Position
	Done   int64
}

// Run reads the plan's range and publishes it with pipeline.Run (a signal
// stops the reading and drains what was read, as in run) through the
// configured router plus the replay headers (replayed=true, replay_id
// id), or only counts it with o.DryRun. progress, when set, is called
// with the acknowledged progress after each acknowledged round (it must
// not block). The summary is valid even when Run fails: Acked is where to
// resume.
func Run(ctx context.Context, cfg config.Config, plan Plan, o Options, id string, progress func(Progress), log *zap.Logger) (*Summary, error) {
	sum := &Summary{PerTopic: map[string]int64{}}
	var src pipeline.Source
	var budget *binlog.Budget // source.buffer-bytes bounds what is read ahead of the acknowledgements
	if plan.Files != nil {
		if err := plan.Files.start(); err != nil {
			return sum, err
		}
		src = plan.Files
	} else {
		s := cfg.Source
		if plan.GTID {
			s.PositionMode = binlog.ModeGTID
		}
		live := binlog.NewReader(s, plan.Flavor, plan.Columns, plan.From, log)
		// The tables and mappings of run, with router.topic as the im preset's topic.
		if ts, err := binlog.NewTableSet(s, cfg.Router.Topic); err == nil {
			live.SetTables(ts)
		}
		if err := live.StopAt(plan.To); err != nil {
			return sum, err
		}
		budget = binlog.NewBudget(cfg.Source.BufferBytes)
		live.SetBudget(budget)
		src = live
	}
	rt := Router{inner: router.New(cfg.Router, cfg.ReservedTopics()), topic: o.Topic, id: id}
	tap := &counter{src: src, rt: rt, sum: sum, out: make(chan binlog.Txn, max(cfg.Source.TxnBuffer, 1))}
	var w pipeline.Writer = sink.NewWriter(cfg.Kafka, rt, router.Balancer(), log)
	if o.DryRun {
		w = newDiscard(rt, cfg.Kafka, sum)
	}
	var (
		mu   sync.Mutex
		done Progress
	)
	onAck := func(a sink.Ack) {
		mu.Lock()
		done.Events += int64(a.Events)
		done.At = a.End
		p := done
		mu.Unlock()
		if progress != nil {
			p.Done = -1
			if n, _, ok := binlog.Span(plan.Logs, plan.From, p.At); ok {
				p.Done = n
			}
			progress(p)
		}
	}
	stages := pipeline.Stages{Name: "replay", Source: tap, Writer: w, OnAck: onAck}
	if budget != nil {
		stages.Budget = budget
	}
	err := pipeline.Run(ctx, stages, cfg.ShutdownTimeout, log)
	mu.Lock()
	sum.Acked = done.At
	mu.Unlock()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	return sum, err
}

// counter is a Source passing src's transactions on while counting them
// into sum (per topic, first and last positions).
type counter struct {
	src pipeline.Source
	rt  Router
	sum *Summary
	out chan binlog.Txn
}

func (c *counter) Txns() <-chan binlog.Txn { return c.out }

func (c *counter) Run(ctx context.Context) error {
	defer close(c.out)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.src.Run(gctx) })
	g.Go(func() error {
		for txn := range c.src.Txns() {
			select {
			case c.out <- txn:
				c.count(&txn) // counted once passed on: what was counted is drained
			case <-gctx.Done():
				for range c.src.Txns() { // let the source end
				}
				return nil
			}
		}
		return nil
	})
	return g.Wait()
}

func (c *counter) count(txn *binlog.Txn) {
	s := c.sum
	s.Scanned++
	if len(txn.Events) > 0 {
		s.Txns++
	}
	for i := range txn.Events {
		e := &txn.Events[i]
		topic, _ := c.rt.Topic(e)
		s.PerTopic[topic]++
		if s.Events == 0 {
			s.FirstRow, s.FirstEnd = e.Pos.FilePos(), txn.End.FilePos()
		}
		s.LastRow, s.LastEnd = e.Pos.FilePos(), txn.End.FilePos()
		s.Events++
	}
}

// discard is the dry run's Writer: every record is routed and checked as
// the real replay would (poison rows are counted in the summary), every
// transaction is "acknowledged" as soon as it is read, nothing is
// published.
type discard struct {
	acks     chan sink.Ack
	rt       Router
	maxBytes int64
	sum      *Summary
}

func newDiscard(rt Router, cfg sink.Config, sum *Summary) *discard {
	return &discard{acks: make(chan sink.Ack, 64), rt: rt, maxBytes: cfg.BatchBytes, sum: sum}
}

func (d *discard) Acks() <-chan sink.Ack { return d.acks }

func (d *discard) Run(ctx context.Context, in <-chan binlog.Txn) error {
	defer close(d.acks)
	for txn := range in {
		for i := range txn.Events {
			e := &txn.Events[i]
			m, rerr := d.rt.Route(e, txn.End)
			p, err := sink.CheckEvent(e, &m, rerr, d.maxBytes)
			if err != nil {
				return err
			}
			if p != nil {
				d.sum.Poison = append(d.sum.Poison, PoisonRow{EventID: e.ID, Reason: string(p.Reason), Row: e.Pos.FilePos(), TxnEnd: txn.End.Text(), Err: p.Err.Error()})
			}
		}
		select {
		case d.acks <- sink.Ack{End: txn.End, Txns: 1, Events: len(txn.Events)}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
