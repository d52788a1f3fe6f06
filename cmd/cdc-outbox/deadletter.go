package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/segmentio/kafka-go"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

// RepublishedFrom is the value of the republished_from header
// (sink.HeaderRepublishedFrom) on records re-published by
// "cdc-outbox dead-letter republish".
const RepublishedFrom = "dead-letter"

func deadLetterCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead-letter",
		Short: "Work with the dead-letter topic (kafka.on-poison: dead-letter)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(republishCommand())
	return cmd
}

func republishCommand() *cobra.Command {
	var (
		path   string
		ids    []string
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "republish",
		Short: "Re-publish dead-lettered events to their topics once the cause is fixed",
		Long: `republish reads the dead-letter topic (kafka.dead-letter-topic) from the
beginning up to its current end and selects its records: all of them, or
those of the given --event-id. For each event, in event id order, it reads
the row again from the outbox table by id (with the source user), routes it
with the router configuration, checks that it is no longer poison (valid
JSON, within kafka.batch-bytes, a valid topic, accepted by the broker) and
publishes it to its topic with the usual key and headers plus
republished_from=dead-letter.

It prints what it did per event and a summary. Exit status: 0 when every
selected event was published (or would be, with --dry-run); 1 when any is
still poison, missing from the outbox table or from the dead-letter topic,
or failed to publish; 2 on usage or connection errors.

A republished event arrives late: after events of its conversation that were
committed after it, so per-conversation order is broken for that event.
Consumers must dedupe by the event_id header and handle it out of order (an
idempotent consumer keyed by seq_no skips it unless it applies late events).
Republishing the same event twice publishes it twice.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := opsConfig(path)
			if err != nil {
				return err
			}
			want, err := parseEventIDs(ids)
			if err != nil {
				return err
			}
			log, err := newLogger(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			sum, err := republish(ctx, cfg, republishOptions{ids: want, dryRun: dryRun, out: cmd.OutOrStdout()}, log)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), sum.String())
			if !sum.OK() {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file (source, router and kafka sections are used)")
	f.StringSliceVar(&ids, "event-id", nil, "event id (outbox id) to re-publish; repeatable or comma-separated; default: every event in the dead-letter topic")
	f.BoolVar(&dryRun, "dry-run", false, "check and report, publish nothing")
	return cmd
}

func parseEventIDs(ss []string) ([]uint64, error) {
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

type republishOptions struct {
	ids    []uint64 // none: every event of the dead-letter topic
	dryRun bool
	out    io.Writer
}

// republishSummary counts the outcome per selected event.
type republishSummary struct {
	Selected, Published, StillPoison, Missing, Failed int
	DryRun                                            bool
}

// OK reports whether every selected event was (or, dry, would be) published.
func (s republishSummary) OK() bool { return s.StillPoison == 0 && s.Missing == 0 && s.Failed == 0 }

func (s republishSummary) String() string {
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

func republish(ctx context.Context, cfg Config, o republishOptions, log *zap.Logger) (republishSummary, error) {
	sum := republishSummary{DryRun: o.dryRun}
	topic := cfg.Kafka.DeadLetterTopic
	recs, err := verify.NewConsumer(cfg.Kafka.Brokers, topic).Poll(ctx)
	if err != nil {
		return sum, fmt.Errorf("dead-letter republish: read %s: %w", topic, err)
	}
	// One entry per event: a restart may have dead-lettered it twice.
	byID := map[uint64]verify.Record{}
	for _, r := range recs {
		id, err := strconv.ParseUint(r.EventID, 10, 64)
		if err != nil {
			fmt.Fprintf(o.out, "skipping record %s/%d@%d: no event_id header\n", topic, r.Partition, r.Offset)
			continue
		}
		byID[id] = r
	}
	var sel []deadLettered
	var absent []uint64
	if len(o.ids) == 0 {
		for id, r := range byID {
			sel = append(sel, deadLettered{id, r})
		}
	} else {
		seen := map[uint64]bool{}
		for _, id := range o.ids {
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
	fmt.Fprintf(o.out, "dead-letter topic %s: %d records, %d events; %d selected\n", topic, len(recs), len(byID), len(sel)+len(absent))
	for _, id := range absent {
		sum.Selected++
		sum.Missing++
		fmt.Fprintf(o.out, "event %d: MISSING: not in the dead-letter topic %s\n", id, topic)
	}
	if len(sel) == 0 {
		return sum, nil
	}

	src := cfg.Source
	conn, err := client.ConnectWithContext(ctx, src.Addr, src.User, src.Password, src.Schema, 10*time.Second)
	if err != nil {
		return sum, fmt.Errorf("dead-letter republish: connect to %s: %w", src.Addr, err)
	}
	defer conn.Close()
	rt := router.New(cfg.Router)
	var kw *sink.Producer
	if !o.dryRun {
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
			fmt.Fprintf(o.out, "%s: MISSING: no row with id %d in %s\n", was, d.id, table)
			continue
		}
		e.Pos = position(d.rec.Headers[router.HeaderBinlogPos])
		e.Pos.GTID = d.rec.Headers[router.HeaderGTID]
		m, rerr := rt.Route(&e, position(d.rec.Headers[router.HeaderTxnEnd]))
		p, err := sink.Check(&m, rerr, cfg.Kafka.BatchBytes)
		if err != nil {
			sum.Failed++
			fmt.Fprintf(o.out, "%s: FAILED: %v\n", was, err)
			continue
		}
		if p != nil {
			sum.StillPoison++
			fmt.Fprintf(o.out, "%s: STILL POISON (%s): %v\n", was, p.Reason, p.Err)
			continue
		}
		m.Headers = append(m.Headers, kafka.Header{Key: sink.HeaderRepublishedFrom, Value: []byte(RepublishedFrom)})
		if o.dryRun {
			sum.Published++
			fmt.Fprintf(o.out, "%s: would republish to %s (conversation %d, seq_no %d, %d bytes)\n", was, m.Topic, e.ConversationID, e.SeqNo, len(m.Value))
			continue
		}
		if err := kw.WriteMessages(ctx, m); err != nil {
			var werrs kafka.WriteErrors
			if errors.As(err, &werrs) && len(werrs) == 1 && werrs[0] != nil {
				err = werrs[0]
			}
			if errors.Is(err, kafka.MessageSizeTooLarge) {
				sum.StillPoison++
				fmt.Fprintf(o.out, "%s: STILL POISON (%s): topic %s rejected it: %v\n", was, sink.ReasonBrokerTooLarge, m.Topic, err)
				continue
			}
			sum.Failed++
			fmt.Fprintf(o.out, "%s: FAILED to publish to %s: %v\n", was, m.Topic, err)
			continue
		}
		sum.Published++
		fmt.Fprintf(o.out, "%s: republished to %s (conversation %d, seq_no %d, %d bytes)\n", was, m.Topic, e.ConversationID, e.SeqNo, len(m.Value))
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

// position parses a "file:pos" header; a malformed one gives the zero
// position (its header then reads ":0").
func position(s string) binlog.Position {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return binlog.Position{}
	}
	pos, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil {
		return binlog.Position{}
	}
	return binlog.Position{File: s[:i], Pos: uint32(pos)}
}
