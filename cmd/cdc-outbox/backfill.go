package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// ErrBackfill reports a backfill that cannot be done (a checkpoint exists,
// an unsupported server, a bad source.backfill-where). Errors wrapping it
// also wrap binlog.ErrStart, so they stop the publisher (exit 1).
var ErrBackfill = errors.New("backfill")

// HeaderBackfill marks records published by the backfill ("true").
const HeaderBackfill = "backfill"

// Backfill tuning: rows per Txn handed to the sink, and how often progress
// is logged.
const (
	backfillChunkRows  = 500
	backfillChunkBytes = 1 << 20
	backfillProgress   = 5 * time.Second
)

func backfillError(format string, a ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrBackfill, binlog.ErrStart, fmt.Sprintf(format, a...))
}

// refuseBackfill is called when a checkpoint exists: --backfill is for the
// first start only and is refused; source.backfill in the configuration is
// ignored (it stays in the file across restarts).
func (p *pipeline) refuseBackfill(cp *checkpoint.Checkpoint) error {
	if p.backfillFlag {
		return backfillError("--backfill is for the first start, but a checkpoint exists under Redis key %s (%s:%d): "+
			"the rows of the snapshot were published then; run without --backfill to resume from the checkpoint", p.store.Key(), cp.File, cp.Pos)
	}
	if p.cfg.Source.Backfill {
		p.log.Info("source.backfill is ignored: a checkpoint exists (the backfill ran at the first start)", zap.String("key", p.store.Key()))
	}
	return nil
}

// backfill publishes the outbox rows matching source.backfill-where from a
// consistent snapshot, waits until Kafka acknowledged them all, stores the
// snapshot's binlog position as the checkpoint and returns it: the binlog
// stream starts there, so every row committed before the snapshot comes
// from the snapshot and every row committed after it from the binlog.
func (p *pipeline) backfill(ctx context.Context, srv *binlog.Server) (binlog.Position, error) {
	cfg := p.cfg
	where := strings.TrimSpace(cfg.Source.BackfillWhere)
	if where == "" {
		return binlog.Position{}, backfillError("source.backfill-where is empty: give the condition of the rows to publish, e.g. %s", binlog.DefaultBackfillWhere)
	}
	if srv.Flavor() != binlog.FlavorMariaDB {
		return binlog.Position{}, backfillError("the backfill is implemented for MariaDB (binlog_snapshot_file/position); on MySQL see docs/operations.md (backfill on MySQL 8)")
	}
	if err := p.guardBackfill(ctx); err != nil {
		return binlog.Position{}, err
	}
	snap, err := openSnapshot(ctx, cfg.Source)
	if err != nil {
		return binlog.Position{}, err
	}
	defer snap.close()
	at := snap.pos
	if at.GTIDSet, err = srv.GTIDSetAt(at); err != nil {
		return binlog.Position{}, err
	}
	total, err := snap.count(where)
	if err != nil {
		return binlog.Position{}, err
	}
	p.log.Info("backfill: consistent snapshot taken; publishing the rows the polling dispatcher had not sent, then streaming the binlog from the snapshot's position",
		zap.String("file", at.File), zap.Uint32("pos", at.Pos), zap.String("gtid_set", at.GTIDSet),
		zap.String("where", where), zap.Int64("rows", total))

	st, err := p.publishSnapshot(ctx, snap, where, at, total)
	if err != nil {
		return binlog.Position{}, err
	}
	snap.close()
	if err := p.store.Save(ctx, checkpoint.Checkpoint{File: at.File, Pos: at.Pos, GTIDSet: at.GTIDSet,
		ServerID: srv.ServerID(), ServerUUID: srv.ServerUUID(), Flavor: srv.Flavor(), Partitions: p.parts}); err != nil {
		return binlog.Position{}, err
	}
	p.log.Info("backfill done: every row of the snapshot was acknowledged; the snapshot's position is stored as the first checkpoint",
		zap.Int64("rows", st.acked.Load()), zap.Uint64("last_id", st.lastID.Load()), zap.Duration("took", time.Since(st.began).Round(time.Millisecond)),
		zap.String("key", p.store.Key()), zap.String("file", at.File), zap.Uint32("pos", at.Pos), zap.String("gtid_set", at.GTIDSet))
	return at, nil
}

// backfillState counts a backfill's progress.
type backfillState struct {
	began  time.Time
	read   atomic.Int64  // rows read from the snapshot
	acked  atomic.Int64  // rows acknowledged by Kafka
	lastID atomic.Uint64 // id of the last row read
}

// publishSnapshot streams the snapshot's rows, in id order, through a
// sink.Writer in Txns of up to backfillChunkRows rows, each ending at the
// snapshot's position. Memory is bounded by source.buffer-bytes: rows read
// but not yet acknowledged hold room in a budget.
func (p *pipeline) publishSnapshot(ctx context.Context, snap *snapshot, where string, at binlog.Position, total int64) (*backfillState, error) {
	cfg := p.cfg
	st := &backfillState{began: time.Now()}
	budget := newCountingBudget(cfg.Source.BufferBytes, func(rows int64) { st.acked.Add(rows) })
	writer := sink.NewWriter(cfg.Kafka, backfillRouter{router.New(cfg.Router)}, router.Balancer(), p.log)
	writer.SetBudget(budget)
	txns := make(chan binlog.Txn, cfg.Source.TxnBuffer)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return writer.Run(gctx, txns) })
	g.Go(func() error {
		for range writer.Acks() {
		}
		return nil
	})
	done := make(chan struct{})
	go p.backfillProgress(st, total, done)
	defer close(done)
	g.Go(func() error {
		defer close(txns)
		// A Txn's events share the snapshot's position: it is the binlog_pos
		// and binlog_txn_end header of every record.
		var cur binlog.Txn
		size := 0
		send := func() error {
			if len(cur.Events) == 0 {
				return nil
			}
			held, err := budget.acquire(gctx, int64(cur.Size()), int64(len(cur.Events)))
			if err != nil {
				return err
			}
			cur.Held, cur.End = held, at
			select {
			case txns <- cur:
			case <-gctx.Done():
				return gctx.Err()
			}
			cur, size = binlog.Txn{}, 0
			return nil
		}
		return snap.rows(where, func(e binlog.Event) error {
			e.Pos = at
			cur.Events = append(cur.Events, e)
			size += len(e.Payload)
			st.read.Add(1)
			st.lastID.Store(e.ID)
			if len(cur.Events) >= backfillChunkRows || size >= backfillChunkBytes {
				return send()
			}
			return nil
		}, send)
	})
	if err := g.Wait(); err != nil {
		if dl := writer.DeadLettered(); dl > 0 {
			p.deadLettered += dl
		}
		return st, fmt.Errorf("backfill (nothing stored; the next start backfills again, publishing its rows again with the same event_id): %w", err)
	}
	p.deadLettered += writer.DeadLettered()
	return st, nil
}

// backfillProgress logs the backfill's progress until done is closed.
func (p *pipeline) backfillProgress(st *backfillState, total int64, done <-chan struct{}) {
	t := time.NewTicker(backfillProgress)
	defer t.Stop()
	last, lastAt := int64(0), st.began
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			acked := st.acked.Load()
			rate := float64(acked-last) / now.Sub(lastAt).Seconds()
			last, lastAt = acked, now
			fields := []zap.Field{zap.Int64("read", st.read.Load()), zap.Int64("acknowledged", acked), zap.Int64("total", total),
				zap.Uint64("last_id", st.lastID.Load()), zap.Float64("rows_per_s", float64(int64(rate)))}
			if total > 0 && acked > 0 {
				eta := time.Duration(float64(now.Sub(st.began)) * float64(total-acked) / float64(acked))
				fields = append(fields, zap.Float64("percent", float64(int(1000*float64(acked)/float64(total)))/10), zap.Duration("eta", eta.Round(time.Second)))
			}
			p.log.Info("backfill progress", fields...)
		}
	}
}

// backfillRouter routes like the configured router and adds backfill=true.
type backfillRouter struct{ inner *router.Router }

func (r backfillRouter) Route(e *binlog.Event, end binlog.Position) (kafka.Message, error) {
	m, err := r.inner.Route(e, end)
	m.Headers = append(m.Headers, kafka.Header{Key: HeaderBackfill, Value: []byte("true")})
	return m, err
}

// countingBudget bounds the bytes of Txns in flight like binlog.Budget and
// counts the rows acknowledged: the sink releases the Held of acknowledged
// Txns in order, so releases pop Txns off a FIFO.
type countingBudget struct {
	sem   *semaphore.Weighted
	max   int64
	onAck func(rows int64)

	mu    sync.Mutex
	queue []heldRows // in flight, oldest first
	extra int64      // released bytes not yet matched to a whole Txn
}

type heldRows struct{ held, rows int64 }

func newCountingBudget(max int64, onAck func(rows int64)) *countingBudget {
	return &countingBudget{sem: semaphore.NewWeighted(max), max: max, onAck: onAck}
}

func (b *countingBudget) acquire(ctx context.Context, n, rows int64) (int64, error) {
	n = min(max(n, 1), b.max)
	if err := b.sem.Acquire(ctx, n); err != nil {
		return 0, err
	}
	b.mu.Lock()
	b.queue = append(b.queue, heldRows{n, rows})
	b.mu.Unlock()
	return n, nil
}

// Release implements sink.Releaser.
func (b *countingBudget) Release(n int64) {
	if n <= 0 {
		return
	}
	b.sem.Release(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.extra += n
	var rows int64
	for len(b.queue) > 0 && b.queue[0].held <= b.extra {
		b.extra -= b.queue[0].held
		rows += b.queue[0].rows
		b.queue = b.queue[1:]
	}
	if rows > 0 {
		b.onAck(rows)
	}
}

// snapshot is a connection holding a consistent snapshot, and the binlog
// position it is consistent with.
type snapshot struct {
	conn   *client.Conn
	table  string
	pos    binlog.Position
	closed bool
}

// openSnapshot starts a transaction WITH CONSISTENT SNAPSHOT and reads the
// binlog position the snapshot is consistent with (MariaDB's
// binlog_snapshot_file and binlog_snapshot_position status variables: every
// transaction committed before that position is visible in the snapshot,
// none after it).
func openSnapshot(ctx context.Context, cfg binlog.Config) (*snapshot, error) {
	conn, err := client.ConnectWithContext(ctx, cfg.Addr, cfg.User, cfg.Password, cfg.Schema, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("backfill: connect to %s: %w", cfg.Addr, err)
	}
	s := &snapshot{conn: conn, table: fmt.Sprintf("`%s`.`%s`", cfg.Schema, cfg.Table)}
	for _, q := range []string{
		"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
		"START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
	} {
		if _, err := conn.Execute(q); err != nil {
			conn.Close()
			return nil, fmt.Errorf("backfill: %s: %w", q, err)
		}
	}
	r, err := conn.Execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		s.close()
		return nil, fmt.Errorf("backfill: SHOW STATUS LIKE 'binlog_snapshot_%%': %w", err)
	}
	for i := 0; i < r.RowNumber(); i++ {
		k, _ := r.GetString(i, 0)
		v, _ := r.GetString(i, 1)
		switch strings.ToLower(k) {
		case "binlog_snapshot_file":
			s.pos.File = v
		case "binlog_snapshot_position":
			var n uint64
			if _, err := fmt.Sscan(v, &n); err == nil {
				s.pos.Pos = uint32(n)
			}
		}
	}
	if s.pos.File == "" || s.pos.Pos < 4 {
		s.close()
		return nil, backfillError("the server reports no binlog snapshot position (binlog_snapshot_file %q, position %d): is log_bin on?", s.pos.File, s.pos.Pos)
	}
	return s, nil
}

func (s *snapshot) close() {
	if s.closed {
		return
	}
	s.closed = true
	_, _ = s.conn.Execute("ROLLBACK")
	s.conn.Close()
}

func (s *snapshot) count(where string) (int64, error) {
	q := fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE (%s)", s.table, where)
	r, err := s.conn.Execute(q)
	if err != nil {
		return 0, sqlError(q, err)
	}
	n, _ := r.GetInt(0, 0)
	return n, nil
}

func sqlError(q string, err error) error {
	var me *mysql.MyError
	if errors.As(err, &me) && (me.Code == 1064 || me.Code == 1054) { // parse error, unknown column
		return backfillError("%s: %v: fix source.backfill-where", q, err)
	}
	return fmt.Errorf("backfill: %s: %w", q, err)
}

// backfillColumns are read in this order by rows.
const backfillColumns = "id, event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload, created_at"

// rows streams the rows matching where, in id order, to each, then calls
// end. Only one row is held at a time.
func (s *snapshot) rows(where string, each func(binlog.Event) error, end func() error) error {
	q := fmt.Sprintf("SELECT %s FROM %s WHERE (%s) ORDER BY id", backfillColumns, s.table, where)
	var res mysql.Result
	err := s.conn.ExecuteSelectStreaming(q, &res, func(row []mysql.FieldValue) error {
		e, err := eventFromRow(row)
		if err != nil {
			return err
		}
		return each(e)
	}, nil)
	if err != nil {
		if errors.Is(err, binlog.ErrDecode) || errors.Is(err, context.Canceled) || errors.Is(err, ErrBackfill) {
			return err
		}
		return sqlError(q, err)
	}
	return end()
}

// eventFromRow decodes a row of backfillColumns (text protocol) into an
// Event like the binlog decoder does: same fields, payload bytes as stored.
func eventFromRow(row []mysql.FieldValue) (binlog.Event, error) {
	var e binlog.Event
	if len(row) != 9 {
		return e, fmt.Errorf("%w: backfill row has %d columns, want 9", binlog.ErrDecode, len(row))
	}
	var errs []error
	num := func(i int, name string) int64 {
		switch row[i].Type {
		case mysql.FieldValueTypeSigned, mysql.FieldValueTypeUnsigned:
			return row[i].AsInt64()
		case mysql.FieldValueTypeString:
			var n int64
			if _, err := fmt.Sscan(string(row[i].AsString()), &n); err == nil {
				return n
			}
		}
		errs = append(errs, fmt.Errorf("%w: backfill: column %s: %v", binlog.ErrDecode, name, row[i].Value()))
		return 0
	}
	str := func(i int, name string) []byte {
		if row[i].Type != mysql.FieldValueTypeString {
			errs = append(errs, fmt.Errorf("%w: backfill: column %s: %v", binlog.ErrDecode, name, row[i].Value()))
			return nil
		}
		return append([]byte(nil), row[i].AsString()...)
	}
	if row[0].Type == mysql.FieldValueTypeUnsigned {
		e.ID = row[0].AsUint64()
	} else {
		e.ID = uint64(num(0, binlog.ColID))
	}
	e.EventType = string(str(1, binlog.ColEventType))
	e.ConversationID = num(2, binlog.ColConversationID)
	e.MessageID = num(3, binlog.ColMessageID)
	e.SeqNo = num(4, binlog.ColSeqNo)
	e.SenderID = num(5, binlog.ColSenderID)
	e.ReceiverID = num(6, binlog.ColReceiverID)
	e.Payload = str(7, binlog.ColPayload)
	if row[8].Type != mysql.FieldValueTypeNull {
		e.CreatedAt = string(str(8, binlog.ColCreatedAt))
	}
	return e, errors.Join(errs...)
}

// guardBackfill refuses a backfill when the (fixed) topic shows that a
// publisher already streamed the binlog (the checkpoint was lost, not a
// first start): the backfill would skip what was committed since the last
// checkpoint. A topic whose newest records are all backfill records is an
// interrupted backfill: it is run again (its records are published again,
// with the same event_id).
func (p *pipeline) guardBackfill(ctx context.Context) error {
	topic := p.cfg.Router.Topic
	if strings.Contains(topic, "{") {
		p.log.Warn("backfill: the topic is a template: cannot tell whether cdc-outbox ran before; backfilling")
		return nil
	}
	heads, err := newestHeaders(ctx, p.cfg.Kafka.Brokers, topic)
	if err != nil {
		return err
	}
	streamed := 0
	for part, h := range heads {
		if h[router.HeaderTxnEnd] != "" && h[HeaderBackfill] != "true" {
			streamed++
			p.log.Warn("backfill: newest record of a partition was streamed from the binlog", zap.Int("partition", part), zap.String("binlog_txn_end", h[router.HeaderTxnEnd]))
		}
	}
	if streamed > 0 {
		return backfillError("no checkpoint under Redis key %s, but topic %s holds records streamed by cdc-outbox from the binlog: "+
			"this is not a first start (the checkpoint was lost?), and a backfill would skip what was committed since the last checkpoint. "+
			"Run without --backfill (and source.backfill: false), with --recover-checkpoint", p.store.Key(), topic)
	}
	if len(heads) > 0 {
		p.log.Warn("backfill: the topic holds backfill records of an interrupted backfill; backfilling again (its rows are published again, with the same event_id)",
			zap.String("topic", topic), zap.Int("partitions_with_records", len(heads)))
	}
	return nil
}

// newestHeaders returns, for each partition of topic holding records, the
// headers of its newest record. A missing topic gives none.
func newestHeaders(ctx context.Context, brokers []string, topic string) (map[int]map[string]string, error) {
	parts, err := sink.Partitions(ctx, brokers, topic)
	if errors.Is(err, kafka.UnknownTopicOrPartition) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[int]map[string]string{}
	for _, part := range parts {
		h, err := newestRecordHeaders(ctx, brokers[0], topic, part)
		if err != nil {
			return nil, fmt.Errorf("backfill: newest record of %s/%d: %w", topic, part, err)
		}
		if h != nil {
			out[part] = h
		}
	}
	return out, nil
}

func newestRecordHeaders(ctx context.Context, broker, topic string, partition int) (map[string]string, error) {
	conn, err := kafka.DialLeader(ctx, "tcp", broker, topic, partition)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	first, last, err := conn.ReadOffsets()
	if err != nil || last <= first {
		return nil, err
	}
	if _, err := conn.Seek(last-1, kafka.SeekAbsolute); err != nil {
		return nil, err
	}
	batch := conn.ReadBatch(1, 64<<20)
	defer batch.Close()
	var h map[string]string
	for {
		m, err := batch.ReadMessage()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return h, nil
			}
			return h, err
		}
		h = make(map[string]string, len(m.Headers))
		for _, x := range m.Headers {
			h[x.Key] = string(x.Value)
		}
		if m.Offset >= last-1 {
			return h, nil
		}
	}
}
