package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/segmentio/kafka-go"
)

// Options select what Run checks.
type Options struct {
	Topics           []string // none: router.topic, or a template's topics of the range
	SinceID, UntilID uint64   // 0: the smallest / largest id in the table at start
	Wait             time.Duration
	// Log receives the plan and "missing so far" lines (usually stderr).
	Log io.Writer
	// Progress, when set, is told the records read so far and where.
	Progress func(records int64, at string)
}

// Run compares the topics with the outbox table's rows of the id range
// (see the verify command): records are read from the beginning of each
// topic, rows streamed from the table; with Wait, missing events are
// re-checked until they arrive or Wait passes.
func Run(ctx context.Context, cfg config.Config, o Options) (AuditReport, error) {
	src := cfg.Source
	conn, err := binlog.Dial(ctx, src, src.Schema)
	if err != nil {
		return AuditReport{}, fmt.Errorf("verify: connect to %s: %w", src.Addr, err)
	}
	defer conn.Close()
	table := fmt.Sprintf("`%s`.`%s`", src.Schema, src.Table)
	r, err := conn.Execute("SELECT COALESCE(MIN(id),0), COALESCE(MAX(id),0) FROM " + table)
	if err != nil {
		return AuditReport{}, fmt.Errorf("verify: read id range of %s: %w", table, err)
	}
	lo, _ := r.GetUint(0, 0)
	hi, _ := r.GetUint(0, 1)
	if o.SinceID > 0 {
		lo = o.SinceID
	}
	if o.UntilID > 0 {
		hi = o.UntilID
	}
	if hi < lo {
		return AuditReport{}, fmt.Errorf("verify: empty id range %d … %d", lo, hi)
	}
	topics := o.Topics
	if len(topics) == 0 {
		if topics, err = topicsOf(conn, cfg, table, lo, hi); err != nil {
			return AuditReport{}, err
		}
	}
	fmt.Fprintf(o.Log, "verify: ids %d … %d of %s against topics %s\n", lo, hi, table, strings.Join(topics, ", "))

	audit := NewAudit(lo, hi)
	consumers := make([]*Consumer, len(topics))
	for i, t := range topics {
		consumers[i] = NewConsumer(cfg.Kafka, t)
	}
	deadline := time.Now().Add(o.Wait)
	var read int64
	for {
		for i, c := range consumers {
			err := c.Each(ctx, func(rec Record) error {
				audit.Add(rec)
				read++
				if o.Progress != nil {
					o.Progress(read, fmt.Sprintf("%s/%d@%d", topics[i], rec.Partition, rec.Offset))
				}
				return nil
			})
			if err != nil {
				if errors.Is(err, kafka.UnknownTopicOrPartition) {
					return AuditReport{}, fmt.Errorf("read topic %s: %w; check router.topic (or --topic): the topic does not exist on %s", topics[i], err, strings.Join(cfg.Kafka.Brokers, ","))
				}
				return AuditReport{}, fmt.Errorf("read topic %s: %w", topics[i], err)
			}
		}
		// Rows are checked on a fresh audit copy each pass: only the
		// records accumulate.
		rep, err := checkRows(conn, table, audit, lo, hi)
		if err != nil {
			return rep, err
		}
		if rep.Missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return rep, nil
		}
		fmt.Fprintf(o.Log, "verify: %d events missing so far; re-reading (until %s)\n", rep.Missing, deadline.Format(time.TimeOnly))
		select {
		case <-ctx.Done():
			return rep, nil
		case <-time.After(time.Second):
		}
	}
}

// checkRows streams the table's rows of the range and returns the report.
func checkRows(conn *client.Conn, table string, audit *Audit, lo, hi uint64) (AuditReport, error) {
	a := audit.Clone()
	var res mysql.Result
	q := fmt.Sprintf("SELECT id, conversation_id, seq_no FROM %s WHERE id BETWEEN %d AND %d ORDER BY id", table, lo, hi)
	err := conn.ExecuteSelectStreaming(q, &res, func(row []mysql.FieldValue) error {
		a.AddRow(Row{ID: row[0].AsUint64(), ConversationID: row[1].AsInt64(), SeqNo: row[2].AsInt64()})
		return nil
	}, nil)
	if err != nil {
		return AuditReport{}, fmt.Errorf("verify: read %s: %w", table, err)
	}
	return a.Report(), nil
}

func topicsOf(conn *client.Conn, cfg config.Config, table string, lo, hi uint64) ([]string, error) {
	rt := router.New(cfg.Router)
	if !strings.Contains(cfg.Router.Topic, "{") {
		return []string{cfg.Router.Topic}, nil
	}
	r, err := conn.Execute(fmt.Sprintf("SELECT DISTINCT event_type FROM %s WHERE id BETWEEN %d AND %d", table, lo, hi))
	if err != nil {
		return nil, fmt.Errorf("verify: event types of %s: %w", table, err)
	}
	var out []string
	for i := 0; i < r.RowNumber(); i++ {
		et, _ := r.GetString(i, 0)
		t, err := rt.Topic(et)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errors.New("verify: no event types in range; give --topic")
	}
	return out, nil
}
