package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
)

// Record is one consumed record, with the fields the checks need.
type Record struct {
	Topic     string
	Partition int
	Offset    int64
	Key       string
	EventID   string
	SeqNo     int64
	Value     []byte
	Headers   map[string]string
}

// Consumer reads every partition of a topic from the beginning, remembering
// where it stopped so that Poll returns only new records.
type Consumer struct {
	cfg       sink.Config
	topic     string
	next      map[int]int64
	committed bool // read_committed (SetReadCommitted)
}

// SetReadCommitted makes the Consumer read with isolation level
// read_committed (KIP-98): records of aborted Kafka transactions are
// skipped and a partition is read up to its last stable offset, as a
// consumer of exactly-once topics reads them.
func (c *Consumer) SetReadCommitted() { c.committed = true }

// Offsets returns, per partition, the offset the next Poll or Each starts
// at (partitions not read yet are absent).
func (c *Consumer) Offsets() map[int]int64 {
	out := make(map[int]int64, len(c.next))
	for p, o := range c.next {
		out[p] = o
	}
	return out
}

// NewConsumer returns a Consumer of topic on the brokers of cfg, with
// its TLS and SASL settings.
func NewConsumer(cfg sink.Config, topic string) *Consumer {
	return &Consumer{cfg: cfg, topic: topic, next: map[int]int64{}}
}

// Poll reads each partition from where the last Poll stopped up to its
// high watermark at the time of the call, and returns the records in
// partition, then offset, order.
func (c *Consumer) Poll(ctx context.Context) ([]Record, error) {
	var out []Record
	err := c.Each(ctx, func(r Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// Each is Poll without collecting: it calls fn for each record, in
// partition, then offset, order, holding one fetch batch in memory.
func (c *Consumer) Each(ctx context.Context, fn func(Record) error) error {
	parts, err := sink.Partitions(ctx, c.cfg, c.topic)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for _, p := range parts {
		if err := c.readPartition(ctx, p, fn); err != nil {
			return err
		}
	}
	return nil
}

// SeekEnd makes the next Poll or Each start each partition of the topic
// at its present end (the high watermark): only records written from now
// on are read.
func (c *Consumer) SeekEnd(ctx context.Context) error {
	parts, err := sink.Partitions(ctx, c.cfg, c.topic)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for _, p := range parts {
		conn, err := sink.DialLeader(ctx, c.cfg, c.topic, p)
		if err != nil {
			return err
		}
		_ = conn.SetDeadline(time.Now().Add(readTimeout))
		_, last, err := conn.ReadOffsets()
		conn.Close()
		if err != nil {
			return err
		}
		c.next[p] = last
	}
	return nil
}

// Seek makes the next Poll or Each start partition at offset.
func (c *Consumer) Seek(partition int, offset int64) { c.next[partition] = offset }

// readTimeout bounds each request of a partition read.
const readTimeout = 30 * time.Second

func (c *Consumer) readPartition(ctx context.Context, partition int, fn func(Record) error) error {
	conn, err := sink.DialLeader(ctx, c.cfg, c.topic, partition)
	if err != nil {
		return err
	}
	defer conn.Close()
	// A paused leader accepts the connection and never answers: each
	// request is bounded (the caller retries).
	_ = conn.SetDeadline(time.Now().Add(readTimeout))
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return err
	}
	off, ok := c.next[partition]
	if !ok || off < first {
		off = first
	}
	defer func() { c.next[partition] = off }()
	for off < last {
		if _, err := conn.Seek(off, kafka.SeekAbsolute); err != nil {
			return err
		}
		_ = conn.SetReadDeadline(time.Now().Add(readTimeout))
		cfg := kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 64 << 20}
		if c.committed {
			cfg.IsolationLevel = kafka.ReadCommitted
		}
		batch := conn.ReadBatchWith(cfg)
		from := off
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					batch.Close()
					return err
				}
				break
			}
			if m.Offset >= last {
				break
			}
			if err := fn(toRecord(m)); err != nil {
				batch.Close()
				return err
			}
			off = m.Offset + 1
		}
		if err := batch.Close(); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if off == from && c.committed {
			// Nothing readable before the last stable offset (an open
			// transaction, or only control records left): the next call
			// goes on from here.
			break
		}
	}
	return nil
}

func toRecord(m kafka.Message) Record {
	r := Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: m.Value,
		Headers: make(map[string]string, len(m.Headers))}
	for _, h := range m.Headers {
		r.Headers[h.Key] = string(h.Value)
	}
	r.EventID = r.Headers["event_id"]
	r.SeqNo, _ = strconv.ParseInt(r.Headers["seq_no"], 10, 64)
	return r
}

// Report is the outcome of a check.
type Report struct {
	Records    int // records read
	Unique     int // distinct events (conversation, seq_no)
	Duplicates int // records beyond the first of their event
	// Missing counts expected events never seen; MissingSample lists some.
	Missing       int
	MissingSample []string
	// Reordered counts first deliveries whose seq_no is below an earlier
	// first delivery of the same conversation.
	Reordered int
	// Split counts conversations seen on more than one partition.
	Split int
	// Conflicts counts duplicates whose event id differs from the original.
	Conflicts int
	// Unexpected counts events not in the expected set.
	Unexpected int
	Problems   []string // first few problems, human-readable
}

// OK reports whether nothing was lost, reordered, split or conflicting.
func (r *Report) OK() bool {
	return r.Missing == 0 && r.Reordered == 0 && r.Split == 0 && r.Conflicts == 0 && r.Unexpected == 0
}

func (r *Report) String() string {
	return fmt.Sprintf("records=%d unique=%d duplicates=%d missing=%d reordered=%d split=%d conflicts=%d unexpected=%d",
		r.Records, r.Unique, r.Duplicates, r.Missing, r.Reordered, r.Split, r.Conflicts, r.Unexpected)
}

// Checker accumulates records, in partition order, and checks them against
// the expected events: for each conversation (the record key) seq_no 1 …
// last.
type Checker struct {
	expected  map[string]int64            // key → last seq_no
	seen      map[string]map[int64]string // key → seq → event id
	maxSeq    map[string]int64
	partition map[string]int
	rep       Report
}

// NewChecker expects, for each conversation key, seq_no 1 … last.
func NewChecker(expected map[int64]int64) *Checker {
	e := make(map[string]int64, len(expected))
	for k, v := range expected {
		e[strconv.FormatInt(k, 10)] = v
	}
	return &Checker{expected: e, seen: map[string]map[int64]string{}, maxSeq: map[string]int64{}, partition: map[string]int{}}
}

func (c *Checker) problem(format string, a ...any) {
	if len(c.rep.Problems) < 20 {
		c.rep.Problems = append(c.rep.Problems, fmt.Sprintf(format, a...))
	}
}

// Add checks records; within one partition they must be in offset order.
func (c *Checker) Add(recs ...Record) {
	for i := range recs {
		r := &recs[i]
		c.rep.Records++
		if p, ok := c.partition[r.Key]; !ok {
			c.partition[r.Key] = r.Partition
		} else if p != r.Partition {
			c.rep.Split++
			c.partition[r.Key] = r.Partition
			c.problem("conversation %s on partitions %d and %d", r.Key, p, r.Partition)
		}
		s := c.seen[r.Key]
		if s == nil {
			s = map[int64]string{}
			c.seen[r.Key] = s
		}
		if id, dup := s[r.SeqNo]; dup {
			c.rep.Duplicates++
			if id != r.EventID {
				c.rep.Conflicts++
				c.problem("conversation %s seq %d: event id %s then %s", r.Key, r.SeqNo, id, r.EventID)
			}
			continue
		}
		s[r.SeqNo] = r.EventID
		c.rep.Unique++
		if last, ok := c.expected[r.Key]; !ok || r.SeqNo < 1 || r.SeqNo > last {
			c.rep.Unexpected++
			c.problem("unexpected event: conversation %s seq %d (event id %s)", r.Key, r.SeqNo, r.EventID)
		}
		if r.SeqNo < c.maxSeq[r.Key] {
			c.rep.Reordered++
			c.problem("conversation %s: seq %d after %d (partition %d offset %d)", r.Key, r.SeqNo, c.maxSeq[r.Key], r.Partition, r.Offset)
		} else {
			c.maxSeq[r.Key] = r.SeqNo
		}
	}
}

// Complete reports whether every expected event has been seen.
func (c *Checker) Complete() bool {
	for k, last := range c.expected {
		if int64(len(c.seen[k])) < last {
			return false
		}
	}
	return true
}

// Report returns the result so far, with missing events counted.
func (c *Checker) Report() Report {
	rep := c.rep
	rep.Problems = append([]string(nil), c.rep.Problems...)
	keys := make([]string, 0, len(c.expected))
	for k := range c.expected {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for s := int64(1); s <= c.expected[k]; s++ {
			if _, ok := c.seen[k][s]; !ok {
				rep.Missing++
				if len(rep.MissingSample) < 10 {
					rep.MissingSample = append(rep.MissingSample, k+"/"+strconv.FormatInt(s, 10))
				}
			}
		}
	}
	if len(rep.MissingSample) > 0 {
		rep.Problems = append(rep.Problems, "missing (conversation/seq): "+strings.Join(rep.MissingSample, " "))
	}
	return rep
}
