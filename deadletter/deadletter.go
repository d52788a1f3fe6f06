package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// RepublishedFrom is the value of the republished_from header
// (sink.HeaderRepublishedFrom) on records re-published by
// "cdc-outbox dead-letter republish".
const RepublishedFrom = "dead-letter"

func ParseEventIDs(ss []string) ([]uint64, error) {
	var out []uint64
	for _, s := range ss {
		id, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("--event-id %q: want a positive integer (the outbox row's id)", s)
		}
		out = append(out, id)
	}
	return out, nil
}

// Options select what Republish does.
type Options struct {
	IDs    []uint64 // none: every event of the dead-letter topic
	DryRun bool
	Out    io.Writer // one line per event, then the summary is the caller's
}

// Summary counts the outcome per selected event.
type Summary struct {
	Selected, Published, StillPoison, Missing, Failed int
	DryRun                                            bool
}

// OK reports whether every selected event was (or, dry, would be) published.
func (s Summary) OK() bool { return s.StillPoison == 0 && s.Missing == 0 && s.Failed == 0 }

func (s Summary) String() string {
	verb := "republished"
	if s.DryRun {
		verb = "would republish (dry run)"
	}
	return fmt.Sprintf("summary: %d selected, %d %s, %d still poison, %d missing, %d failed",
		s.Selected, s.Published, verb, s.StillPoison, s.Missing, s.Failed)
}

// deadLettered is one event's newest record in the dead-letter topic.
type deadLettered struct {
	id  uint64
	rec verify.Record
}

func Republish(ctx context.Context, cfg config.Config, o Options, log *zap.Logger) (Summary, error) {
	sum := Summary{DryRun: o.DryRun}
	topic := cfg.Kafka.DeadLetterTopic
	recs, err := verify.NewConsumer(cfg.Kafka, topic).Poll(ctx)
	if err != nil {
		return sum, fmt.Errorf("dead-letter republish: read %s: %w", topic, err)
	}
	// One entry per event: a restart may have dead-lettered it twice.
	byID := map[uint64]verify.Record{}
	for _, r := range recs {
		id, err := strconv.ParseUint(r.EventID, 10, 64)
		if err != nil {
			fmt.Fprintf(o.Out, "skipping record %s/%d@%d: no event_id header\n", topic, r.Partition, r.Offset)
			continue
		}
		byID[id] = r
	}
	var sel []deadLettered
	var absent []uint64
	if len(o.IDs) == 0 {
		for id, r := range byID {
			sel = append(sel, deadLettered{id, r})
		}
	} else {
		seen := map[uint64]bool{}
		for _, id := range o.IDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			r, ok := byID[id]
			if !ok {
				absent = append(absent, id)
				continue
			}
			sel = append(sel, deadLettered{id, r})
		}
	}
	// In event id order: a conversation's republished events keep their order.
	sort.Slice(sel, func(i, j int) bool { return sel[i].id < sel[j].id })
	fmt.Fprintf(o.Out, "dead-letter topic %s: %d records, %d events; %d selected\n", topic, len(recs), len(byID), len(sel)+len(absent))
	for _, id := range absent {
		sum.Selected++
		sum.Missing++
		fmt.Fprintf(o.Out, "event %d: MISSING: not in the dead-letter topic %s\n", id, topic)
	}
	if len(sel) == 0 {
		return sum, nil
	}

	src := cfg.Source
	conn, err := binlog.Dial(ctx, src, src.Schema)
	if err != nil {
		return sum, fmt.Errorf("dead-letter republish: connect to %s: %w", src.Addr, err)
	}
	defer conn.Close()
	rt := router.New(cfg.Router)
	var kw *sink.Producer
	if !o.DryRun {
		kw = sink.NewProducer(cfg.Kafka, router.Balancer(), log.Named("republish"))
		defer kw.Close()
	}
	table := fmt.Sprintf("`%s`.`%s`", src.Schema, src.Table)
	for _, d := range sel {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		sum.Selected++
		was := fmt.Sprintf("event %d (dead-lettered as %s)", d.id, cmp.Or(d.rec.Headers[sink.HeaderDLQReason], "?"))
		e, found, err := outboxRow(conn, table, d.id)
		if err != nil {
			return sum, err
		}
		if !found {
			sum.Missing++
			fmt.Fprintf(o.Out, "%s: MISSING: no row with id %d in %s\n", was, d.id, table)
			continue
		}
		e.Pos = position(d.rec.Headers[router.HeaderBinlogPos])
		e.Pos.GTID = d.rec.Headers[router.HeaderGTID]
		m, rerr := rt.Route(&e, position(d.rec.Headers[router.HeaderTxnEnd]))
		p, err := sink.CheckEvent(&e, &m, rerr, cfg.Kafka.BatchBytes, cfg.Kafka.DeadLetterTopic)
		if err != nil {
			sum.Failed++
			fmt.Fprintf(o.Out, "%s: FAILED: %v\n", was, err)
			continue
		}
		if p != nil {
			sum.StillPoison++
			fmt.Fprintf(o.Out, "%s: STILL POISON (%s): %v\n", was, p.Reason, p.Err)
			continue
		}
		m.Headers = append(m.Headers, kafka.Header{Key: sink.HeaderRepublishedFrom, Value: []byte(RepublishedFrom)})
		if o.DryRun {
			sum.Published++
			fmt.Fprintf(o.Out, "%s: would republish to %s (conversation %d, seq_no %d, %d bytes)\n", was, m.Topic, e.ConversationID, e.SeqNo, len(m.Value))
			continue
		}
		if err := kw.WriteMessages(ctx, m); err != nil {
			var werrs kafka.WriteErrors
			if errors.As(err, &werrs) && len(werrs) == 1 && werrs[0] != nil {
				err = werrs[0]
			}
			if errors.Is(err, kafka.MessageSizeTooLarge) {
				sum.StillPoison++
				fmt.Fprintf(o.Out, "%s: STILL POISON (%s): topic %s rejected it: %v\n", was, sink.ReasonBrokerTooLarge, m.Topic, err)
				continue
			}
			sum.Failed++
			fmt.Fprintf(o.Out, "%s: FAILED to publish to %s: %v\n", was, m.Topic, err)
			continue
		}
		sum.Published++
		fmt.Fprintf(o.Out, "%s: republished to %s (conversation %d, seq_no %d, %d bytes)\n", was, m.Topic, e.ConversationID, e.SeqNo, len(m.Value))
	}
	return sum, nil
}

// outboxRow reads the outbox row id as the binlog reader decodes it.
func outboxRow(conn *client.Conn, table string, id uint64) (binlog.Event, bool, error) {
	q := fmt.Sprintf("SELECT %s, %s, %s, %s, %s, %s, %s, %s, CAST(%s AS CHAR) FROM %s WHERE %s = %d",
		binlog.ColID, binlog.ColEventType, binlog.ColConversationID, binlog.ColMessageID, binlog.ColSeqNo,
		binlog.ColSenderID, binlog.ColReceiverID, binlog.ColPayload, binlog.ColCreatedAt, table, binlog.ColID, id)
	r, err := conn.Execute(q)
	if err != nil {
		return binlog.Event{}, false, fmt.Errorf("dead-letter republish: read row %d of %s: %w", id, table, err)
	}
	defer r.Close()
	if r.RowNumber() == 0 {
		return binlog.Event{}, false, nil
	}
	var e binlog.Event
	e.ID, _ = r.GetUint(0, 0)
	e.EventType, _ = r.GetString(0, 1)
	e.ConversationID, _ = r.GetInt(0, 2)
	e.MessageID, _ = r.GetInt(0, 3)
	e.SeqNo, _ = r.GetInt(0, 4)
	e.SenderID, _ = r.GetInt(0, 5)
	e.ReceiverID, _ = r.GetInt(0, 6)
	payload, _ := r.GetString(0, 7)
	e.Payload = []byte(payload)
	e.CreatedAt, _ = r.GetString(0, 8)
	return e, true, nil
}

// position parses a "file:pos" header (binlog.ParseStart); a malformed
// one gives the zero position (its header then reads ":0").
func position(s string) binlog.Position {
	st, err := binlog.ParseStart(s)
	if err != nil || st.Kind != binlog.StartFilePos {
		return binlog.Position{}
	}
	return binlog.Position{File: st.File, Pos: st.Pos}
}
