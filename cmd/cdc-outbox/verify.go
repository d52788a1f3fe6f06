package main

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
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/segmentio/kafka-go"
	"github.com/spf13/cobra"
)

func verifyCommand() *cobra.Command {
	var (
		path         string
		topics       []string
		sinceID      uint64
		untilID      uint64
		wait         time.Duration
		progressEvry time.Duration
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Compare the published topics with the outbox table: missing, duplicated, reordered, split",
		Long: `verify reads the target topics from the beginning and compares them with the
outbox table's rows of an id range (default: every row in the table at start).

It reports events missing from the topics, duplicates (and how far back the
furthest replay went), events reordered within a conversation, and
conversations split across partitions. Exit status: 0 when nothing is
missing, reordered or split; 1 otherwise; 2 on usage or connection errors.

Topics: the configured router.topic; for a template ({event_type}) the
topics of the event types present in the range; or --topic (repeatable).
Run it once the publisher has caught up, or give --wait to re-check for
missing events until they arrive. Memory: one bit per event id in the range.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadFor(path, config.ScopeOps)
			if err != nil {
				return err
			}
			ctx := cmd.Context() // cancelled by SIGINT/SIGTERM (execute)
			rep, err := runVerify(ctx, cfg, verifyOptions{topics: topics, sinceID: sinceID, untilID: untilID,
				wait: wait, progress: progressEvry, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), rep.String())
			if !rep.OK() {
				fmt.Fprintln(cmd.OutOrStdout(), "result: FAILED (events lost, reordered or split)")
				return exitError{code: 1}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "result: OK")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "config", "c", "", "YAML configuration file (source, router and kafka sections are used)")
	f.StringSliceVar(&topics, "topic", nil, "topic to read (repeatable); default: from router.topic")
	f.Uint64Var(&sinceID, "since-id", 0, "first outbox id to check (default: the smallest in the table)")
	f.Uint64Var(&untilID, "until-id", 0, "last outbox id to check (default: the largest in the table at start)")
	f.DurationVar(&wait, "wait", 0, "keep re-reading for up to this long while events are missing")
	f.DurationVar(&progressEvry, "progress", 5*time.Second, "interval of progress lines on stderr")
	return cmd
}

type verifyOptions struct {
	topics           []string
	sinceID, untilID uint64
	wait, progress   time.Duration
	out, errOut      io.Writer
}

func runVerify(ctx context.Context, cfg config.Config, o verifyOptions) (verify.AuditReport, error) {
	src := cfg.Source
	conn, err := binlog.Dial(ctx, src, src.Schema)
	if err != nil {
		return verify.AuditReport{}, fmt.Errorf("verify: connect to %s: %w", src.Addr, err)
	}
	defer conn.Close()
	table := fmt.Sprintf("`%s`.`%s`", src.Schema, src.Table)
	r, err := conn.Execute("SELECT COALESCE(MIN(id),0), COALESCE(MAX(id),0) FROM " + table)
	if err != nil {
		return verify.AuditReport{}, fmt.Errorf("verify: read id range of %s: %w", table, err)
	}
	lo, _ := r.GetUint(0, 0)
	hi, _ := r.GetUint(0, 1)
	if o.sinceID > 0 {
		lo = o.sinceID
	}
	if o.untilID > 0 {
		hi = o.untilID
	}
	if hi < lo {
		return verify.AuditReport{}, fmt.Errorf("verify: empty id range %d … %d", lo, hi)
	}
	topics := o.topics
	if len(topics) == 0 {
		if topics, err = topicsOf(conn, cfg, table, lo, hi); err != nil {
			return verify.AuditReport{}, err
		}
	}
	fmt.Fprintf(o.errOut, "verify: ids %d … %d of %s against topics %s\n", lo, hi, table, strings.Join(topics, ", "))

	audit := verify.NewAudit(lo, hi)
	consumers := make([]*verify.Consumer, len(topics))
	for i, t := range topics {
		consumers[i] = verify.NewConsumer(cfg.Kafka, t)
	}
	deadline := time.Now().Add(o.wait)
	lastProgress := time.Now()
	for {
		for i, c := range consumers {
			err := c.Each(ctx, func(rec verify.Record) error {
				audit.Add(rec)
				if time.Since(lastProgress) >= o.progress {
					lastProgress = time.Now()
					fmt.Fprintf(o.errOut, "verify: %s: %d records read, at partition %d offset %d\n", topics[i], audit.Report().Records, rec.Partition, rec.Offset)
				}
				return nil
			})
			if err != nil {
				if errors.Is(err, kafka.UnknownTopicOrPartition) {
					return verify.AuditReport{}, fmt.Errorf("read topic %s: %w; check router.topic (or --topic): the topic does not exist on %s", topics[i], err, strings.Join(cfg.Kafka.Brokers, ","))
				}
				return verify.AuditReport{}, fmt.Errorf("read topic %s: %w", topics[i], err)
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
		fmt.Fprintf(o.errOut, "verify: %d events missing so far; re-reading (until %s)\n", rep.Missing, deadline.Format(time.TimeOnly))
		select {
		case <-ctx.Done():
			return rep, nil
		case <-time.After(time.Second):
		}
	}
}

// checkRows streams the table's rows of the range and returns the report.
func checkRows(conn *client.Conn, table string, audit *verify.Audit, lo, hi uint64) (verify.AuditReport, error) {
	a := audit.Clone()
	var res mysql.Result
	q := fmt.Sprintf("SELECT id, conversation_id, seq_no FROM %s WHERE id BETWEEN %d AND %d ORDER BY id", table, lo, hi)
	err := conn.ExecuteSelectStreaming(q, &res, func(row []mysql.FieldValue) error {
		a.AddRow(verify.Row{ID: row[0].AsUint64(), ConversationID: row[1].AsInt64(), SeqNo: row[2].AsInt64()})
		return nil
	}, nil)
	if err != nil {
		return verify.AuditReport{}, fmt.Errorf("verify: read %s: %w", table, err)
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
