package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"go.uber.org/zap"
)

// Router maps an event to its record; *router.Router implements it.
type Router interface {
	Route(e *binlog.Event, end binlog.Position) (kafka.Message, error)
}

// Writer is the Kafka stage. Run consumes transactions; Acks delivers the
// end position of each acknowledged run of transactions, in order.
type Writer struct {
	cfg    Config
	router Router
	kw     *kafka.Writer
	acks   chan binlog.Position
	log    *zap.Logger

	msgs  []kafka.Message
	bytes int64
	owner []int // index into pending of the transaction each msg belongs to
}

// NewWriter returns a Writer for a validated Config. balancer must be the
// partitioner every producer of these topics uses (router.Balancer()).
func NewWriter(cfg Config, r Router, balancer kafka.Balancer, log *zap.Logger) *Writer {
	codec, _ := compression(cfg.Compression)
	log = log.Named("sink")
	kw := &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Balancer:     balancer,
		RequiredAcks: kafka.RequireAll,
		// One batch per partition per round: rounds never exceed these.
		BatchSize:  cfg.BatchSize,
		BatchBytes: cfg.BatchBytes,
		// A round is complete when WriteMessages is called; do not linger.
		BatchTimeout:           time.Millisecond,
		WriteTimeout:           cfg.WriteTimeout,
		ReadTimeout:            cfg.WriteTimeout,
		MaxAttempts:            cfg.MaxAttempts,
		WriteBackoffMin:        100 * time.Millisecond,
		WriteBackoffMax:        2 * time.Second,
		AllowAutoTopicCreation: cfg.AllowAutoTopicCreation,
		ErrorLogger:            kafka.LoggerFunc(func(f string, a ...any) { log.Warn(fmt.Sprintf(f, a...)) }),
	}
	if codec != nil {
		kw.Compression = kafka.Compression(codec.Code())
	}
	return &Writer{cfg: cfg, router: r, kw: kw, acks: make(chan binlog.Position, 64), log: log}
}

// Acks returns the channel of acknowledged positions. Each value is the end
// of a transaction all of whose records, and those of every transaction
// before it, were acknowledged by all in-sync replicas. It is closed when
// Run returns.
func (w *Writer) Acks() <-chan binlog.Position { return w.acks }

// Run writes the transactions read from in until in is closed (returning
// nil after flushing everything read) or a write fails (returning a
// *WriteError). Cancelling ctx aborts in-flight writes.
func (w *Writer) Run(ctx context.Context, in <-chan binlog.Txn) error {
	defer close(w.acks)
	defer w.kw.Close()
	var pending []binlog.Position // ends of transactions with records in w.msgs
	for {
		var txn binlog.Txn
		var ok bool
		select {
		case txn, ok = <-in:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			return nil
		}
		for {
			if err := w.add(ctx, &txn, &pending); err != nil {
				return err
			}
			// Merge whatever is already queued into this round.
			if more, ok := tryRecv(in); ok && w.room() {
				txn = more
				continue
			} else if ok {
				// No room left: flush, then carry on with the received txn.
				if err := w.flush(ctx, &pending); err != nil {
					return err
				}
				txn = more
				continue
			}
			break
		}
		if err := w.flush(ctx, &pending); err != nil {
			return err
		}
	}
}

func tryRecv(in <-chan binlog.Txn) (binlog.Txn, bool) {
	select {
	case t, ok := <-in:
		return t, ok
	default:
		return binlog.Txn{}, false
	}
}

func (w *Writer) room() bool {
	return len(w.msgs) < w.cfg.BatchSize && w.bytes < w.cfg.BatchBytes
}

// add routes txn's events into the current round, flushing full rounds.
func (w *Writer) add(ctx context.Context, txn *binlog.Txn, pending *[]binlog.Position) error {
	idx := len(*pending)
	*pending = append(*pending, txn.End)
	for i := range txn.Events {
		m, err := w.router.Route(&txn.Events[i], txn.End)
		if err != nil {
			return &WriteError{EventID: fmt.Sprint(txn.Events[i].ID), Pos: txn.End, Err: err}
		}
		size := estimate(&m)
		if size > w.cfg.BatchBytes {
			return &WriteError{EventID: fmt.Sprint(txn.Events[i].ID), Topic: m.Topic, Pos: txn.End,
				Err: fmt.Errorf("%w: %d bytes > kafka.batch-bytes %d", ErrRecordTooLarge, size, w.cfg.BatchBytes)}
		}
		if len(w.msgs) > 0 && (len(w.msgs)+1 > w.cfg.BatchSize || w.bytes+size > w.cfg.BatchBytes) {
			// The transaction does not fit: send what we have. Only the
			// transactions completed before it are acknowledged.
			if err := w.flushUpTo(ctx, pending, idx); err != nil {
				return err
			}
			idx = 0
		}
		w.msgs = append(w.msgs, m)
		w.owner = append(w.owner, idx)
		w.bytes += size
	}
	return nil
}

func (w *Writer) flush(ctx context.Context, pending *[]binlog.Position) error {
	return w.flushUpTo(ctx, pending, len(*pending))
}

// flushUpTo writes the current round and acknowledges the first n pending
// transactions, keeping the rest pending.
func (w *Writer) flushUpTo(ctx context.Context, pending *[]binlog.Position, n int) error {
	if len(w.msgs) > 0 {
		if err := w.kw.WriteMessages(ctx, w.msgs...); err != nil {
			return w.writeError(err, *pending)
		}
	}
	if n > 0 {
		select {
		case w.acks <- (*pending)[n-1]:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	*pending = append((*pending)[:0], (*pending)[n:]...)
	clear(w.msgs)
	w.msgs, w.owner, w.bytes = w.msgs[:0], w.owner[:0], 0
	return nil
}

func (w *Writer) writeError(err error, pending []binlog.Position) error {
	first := 0
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		for i, e := range werrs {
			if e != nil {
				first, err = i, e
				break
			}
		}
	}
	var tooLarge kafka.MessageTooLargeError
	if errors.As(err, &tooLarge) || errors.Is(err, kafka.MessageSizeTooLarge) {
		err = fmt.Errorf("%w: %v: raise the broker's message.max.bytes / the topic's max.message.bytes, or kafka.batch-bytes", ErrRecordTooLarge, err)
	}
	m := &w.msgs[first]
	return &WriteError{EventID: header(m, "event_id"), Topic: m.Topic, Pos: pending[w.owner[first]], Err: err}
}

func header(m *kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// estimate is an upper bound of kafka-go's own size accounting of m
// (message header plus key, value and headers), so that a round within
// BatchBytes by this measure never splits into two batches of a partition.
func estimate(m *kafka.Message) int64 {
	n := int64(len(m.Key) + len(m.Value) + 64)
	for _, h := range m.Headers {
		n += int64(len(h.Key) + len(h.Value) + 16)
	}
	return n
}

func compression(name string) (compress.Codec, error) {
	switch name {
	case "", "none":
		return nil, nil
	case "gzip":
		return compress.Gzip.Codec(), nil
	case "snappy":
		return compress.Snappy.Codec(), nil
	case "lz4":
		return compress.Lz4.Codec(), nil
	case "zstd":
		return compress.Zstd.Codec(), nil
	}
	return nil, fmt.Errorf("%q: want none, gzip, snappy, lz4 or zstd", name)
}

// IsFatal reports whether err is a write error that a restart cannot fix.
func IsFatal(err error) bool {
	if errors.Is(err, ErrRecordTooLarge) {
		return true
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.InvalidTopic, kafka.TopicAuthorizationFailed, kafka.ClusterAuthorizationFailed,
			kafka.SASLAuthenticationFailed, kafka.UnsupportedVersion:
			return true
		}
	}
	return false
}
