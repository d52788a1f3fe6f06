package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// RepublishedFrom is the value of the republished_from header
// (sink.HeaderRepublishedFrom) on records re-published by
// "cdc-outbox dead-letter republish".
const RepublishedFrom = "dead-letter"

// ParseEventIDs checks the --event-id values: the event_id headers of
// dead letters (the outbox rows' ids: a positive integer, or a string such
// as a UUID for a mapping whose id column is a string).
func ParseEventIDs(ss []string) ([]string, error) {
	var out []string
	for _, s := range ss {
		id := strings.TrimSpace(s)
		if id == "" {
			return nil, fmt.Errorf("--event-id %q: want the outbox row's id (the event_id header)", s)
		}
		if n, err := strconv.ParseInt(id, 10, 64); err == nil && n <= 0 || strings.HasPrefix(id, "-") {
			return nil, fmt.Errorf("--event-id %q: want a positive integer or a string id (the event_id header)", s)
		}
		out = append(out, id)
	}
	return out, nil
}

// Options select what Republish does.
type Options struct {
	IDs    []string // event ids; none: every event of the dead-letter topic
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
	id  string
	rec verify.Record
}

// less orders event ids: integers by value, then strings.
func less(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		return x < y
	case errA == nil || errB == nil:
		return errA == nil
	}
	return a < b
}

// Republish publishes the selected dead letters again from their outbox
// rows, read now and routed through the row's table's mapping (the
// dlq_table header, else the source's only table), as run would.
func Republish(ctx context.Context, cfg config.Config, o Options, log *zap.Logger) (Summary, error) {
	sum := Summary{DryRun: o.DryRun}
	topic := cfg.Kafka.DeadLetterTopic
	recs, err := verify.NewConsumer(cfg.Kafka, topic).Poll(ctx)
	if err != nil {
		return sum, fmt.Errorf("dead-letter republish: read %s: %w", topic, err)
	}
	// One entry per event: a restart may have dead-lettered it twice.
	byID := map[string]verify.Record{}
	for _, r := range recs {
		if r.EventID == "" {
			fmt.Fprintf(o.Out, "skipping record %s/%d@%d: no event_id header\n", topic, r.Partition, r.Offset)
			continue
		}
		byID[r.Headers[sink.HeaderDLQTable]+"\x00"+r.EventID] = r
	}
	var sel []deadLettered
	var absent []string
	if len(o.IDs) == 0 {
		for _, r := range byID {
			sel = append(sel, deadLettered{r.EventID, r})
		}
	} else {
		want := map[string]bool{}
		for _, id := range o.IDs {
			want[id] = true
		}
		found := map[string]bool{}
		for _, r := range byID {
			if want[r.EventID] {
				sel = append(sel, deadLettered{r.EventID, r})
				found[r.EventID] = true
			}
		}
		for _, id := range o.IDs {
			if !found[id] && !slices.Contains(absent, id) {
				absent = append(absent, id)
			}
		}
	}
	// In event id order: a conversation's republished events keep their order.
	sort.Slice(sel, func(i, j int) bool {
		if a, b := sel[i].rec.Headers[sink.HeaderDLQTable], sel[j].rec.Headers[sink.HeaderDLQTable]; a != b {
			return a < b
		}
		return less(sel[i].id, sel[j].id)
	})
	fmt.Fprintf(o.Out, "dead-letter topic %s: %d records, %d events; %d selected\n", topic, len(recs), len(byID), len(sel)+len(absent))
	for _, id := range absent {
		sum.Selected++
		sum.Missing++
		fmt.Fprintf(o.Out, "event %s: MISSING: not in the dead-letter topic %s\n", id, topic)
	}
	if len(sel) == 0 {
		return sum, nil
	}

	src := cfg.Source
	srv, err := binlog.Connect(ctx, src, log.Named("source"))
	if err != nil {
		return sum, fmt.Errorf("dead-letter republish: connect to %s: %w", src.Addr, err)
	}
	defer srv.Close()
	ts, err := binlog.NewTableSet(src, cfg.Router.Topic)
	if err != nil {
		return sum, err
	}
	var tables []*binlog.Table
	if !ts.Legacy() {
		if tables, err = ts.Check(srv); err != nil {
			return sum, fmt.Errorf("dead-letter republish: %w", err)
		}
	}
	conn, err := binlog.Dial(ctx, src, src.Schema)
	if err != nil {
		return sum, fmt.Errorf("dead-letter republish: connect to %s: %w", src.Addr, err)
	}
	defer conn.Close()
	// TIMESTAMP columns in UTC, as the binlog carries them.
	if _, err := conn.Execute("SET time_zone = '+00:00'"); err != nil {
		return sum, fmt.Errorf("dead-letter republish: %w", err)
	}
	rt := router.New(cfg.Router, cfg.ReservedTopics())
	var kw *sink.Producer
	if !o.DryRun {
		kw = sink.NewProducer(cfg.Kafka, router.Balancer(), log.Named("republish"))
		defer kw.Close()
	}
	for _, d := range sel {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		sum.Selected++
		was := fmt.Sprintf("event %s (dead-lettered as %s)", d.id, cmp.Or(d.rec.Headers[sink.HeaderDLQReason], "?"))
		tbl, table, err := tableOf(ts, tables, d.rec.Headers[sink.HeaderDLQTable], src)
		if err != nil {
			sum.Failed++
			fmt.Fprintf(o.Out, "%s: FAILED: %v\n", was, err)
			continue
		}
		var e binlog.Event
		var found bool
		if tbl == nil {
			id, perr := strconv.ParseUint(d.id, 10, 64)
			if perr != nil {
				sum.Missing++
				fmt.Fprintf(o.Out, "%s: MISSING: %s's id column is an integer, the event id is not\n", was, table)
				continue
			}
			e, found, err = outboxRow(conn, table, id)
		} else {
			e, found, err = mappedRow(conn, tbl, d.id)
		}
		if err != nil {
			return sum, err
		}
		if !found {
			sum.Missing++
			fmt.Fprintf(o.Out, "%s: MISSING: no row with id %s in %s\n", was, d.id, table)
			continue
		}
		e.Pos = position(d.rec.Headers[router.HeaderBinlogPos])
		e.Pos.GTID = d.rec.Headers[router.HeaderGTID]
		m, rerr := rt.Route(&e, position(d.rec.Headers[router.HeaderTxnEnd]))
		p, err := sink.CheckEvent(&e, &m, rerr, cfg.Kafka.BatchBytes)
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
			fmt.Fprintf(o.Out, "%s: would republish to %s (key %s, %d bytes)\n", was, m.Topic, m.Key, len(m.Value))
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
		fmt.Fprintf(o.Out, "%s: republished to %s (key %s, %d bytes)\n", was, m.Topic, m.Key, len(m.Value))
	}
	return sum, nil
}

// tableOf returns the table of a dead letter: the one its dlq_table
// header names, else the source's only table; a nil *binlog.Table for the
// single im table (read into the typed fields). table is its quoted name.
func tableOf(ts *binlog.TableSet, tables []*binlog.Table, name string, src binlog.Config) (*binlog.Table, string, error) {
	if ts.Legacy() {
		return nil, fmt.Sprintf("`%s`.`%s`", src.Schema, src.Table), nil
	}
	if name == "" {
		if len(tables) == 1 {
			t := tables[0]
			return t, fmt.Sprintf("`%s`.`%s`", t.Schema, t.Name), nil
		}
		return nil, "", fmt.Errorf("the dead letter has no %s header and the source reads %d tables: cannot tell which table holds the row", sink.HeaderDLQTable, len(tables))
	}
	for _, t := range tables {
		if t.String() == name {
			return t, fmt.Sprintf("`%s`.`%s`", t.Schema, t.Name), nil
		}
	}
	return nil, "", fmt.Errorf("table %s (header %s) is not an outbox table of this source now", name, sink.HeaderDLQTable)
}

// mappedRow reads the row with id of a mapped table: its mapped columns as
// the binlog reader renders them (binlog.Table.SelectList), a NULL in a
// required column setting Err as the reader does.
func mappedRow(conn *binlog.Conn, t *binlog.Table, id string) (binlog.Event, bool, error) {
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s = ?", t.SelectList(), t.Quoted(), t.IDColumn())
	r, err := conn.Execute(q, id)
	if err != nil {
		return binlog.Event{}, false, fmt.Errorf("dead-letter republish: read row %s of %s: %w", id, t, err)
	}
	defer r.Close()
	if r.RowNumber() == 0 {
		return binlog.Event{}, false, nil
	}
	vals := make([][]byte, len(t.Mapping.Cols))
	for i := range vals {
		if null, _ := r.IsNull(0, i); !null {
			v, _ := r.GetString(0, i)
			vals[i] = []byte(v)
		}
	}
	return t.EventFromText(vals), true, nil
}

// outboxRow reads the outbox row id as the binlog reader decodes it.
func outboxRow(conn *binlog.Conn, table string, id uint64) (binlog.Event, bool, error) {
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
