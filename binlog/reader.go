package binlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"
)

// Reader streams committed transactions from the binlog, starting at a
// given position. Create it with NewReader, read Txns() while Run runs.
type Reader struct {
	cfg     Config
	flavor  string
	columns []string // from information_schema, used when the table map has no names
	from    Position
	log     *zap.Logger
	out     chan Txn
	stop    *stopper // StopAt; nil: stream until cancelled

	tables *TableSet
	budget *Budget
}

// NewReader returns a Reader that starts at from. flavor is the detected
// flavor (Server.Flavor) and columns the outbox table's columns
// (Server.Columns), used when the binlog carries no column names.
func NewReader(cfg Config, flavor string, columns []string, from Position, log *zap.Logger) *Reader {
	return &Reader{
		cfg: cfg, flavor: flavor, columns: columns, from: from,
		log: log.Named("binlog"), out: make(chan Txn, cfg.TxnBuffer),
		tables: defaultTables(cfg),
	}
}

// defaultTables is the TableSet of cfg with router.topic's default (the
// im preset's topic); SetTables sets the configured one.
func defaultTables(cfg Config) *TableSet {
	ts, err := NewTableSet(cfg, "im.events")
	if err != nil {
		ts, _ = NewTableSet(Config{Schema: cfg.Schema, Table: cfg.Table}, "im.events")
	}
	return ts
}

// SetTables sets the outbox tables to read (NewTableSet with router.topic).
// Call it before Run.
func (r *Reader) SetTables(ts *TableSet) { r.tables = ts }

// Txns returns the channel of committed transactions, in commit order. It
// is closed when Run returns.
func (r *Reader) Txns() <-chan Txn { return r.out }

// Run streams until ctx is cancelled (returning nil) or an error occurs.
// Errors carry the position of the last complete transaction (*PositionError).
// A transaction cut short by cancellation or an error is never emitted.
func (r *Reader) Run(ctx context.Context) error {
	defer close(r.out)
	host, portStr, _ := net.SplitHostPort(r.cfg.Addr)
	port, _ := strconv.ParseUint(portStr, 10, 16)
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID:        r.cfg.ServerID,
		Flavor:          r.flavor,
		Host:            host,
		Port:            uint16(port),
		User:            r.cfg.User,
		Password:        r.cfg.Password,
		HeartbeatPeriod: r.cfg.HeartbeatPeriod,
		ReadTimeout:     r.cfg.ReadTimeout,
		// Reconnecting inside go-mysql would resume in the middle of a
		// transaction; the caller restarts from the last acknowledged
		// transaction instead.
		DisableRetrySync:      true,
		MaxReconnectAttempts:  1,
		RenderJSONAsMySQLText: true,
		// DATETIME and TIMESTAMP as time.Time, rendered by asTimeString
		// (go-mysql's own text goes through fmt.Sprintf: a fifth of the
		// CPU of a drain). TIMESTAMP text, where go-mysql still renders
		// it (zero dates), in UTC whatever the host's TZ.
		ParseTime:               true,
		TimestampStringLocation: time.UTC,
		Logger:                  slog.New(zapHandler{r.log.Named("go-mysql")}),
		// go-mysql decodes ahead of us into a channel of this many events
		// (10,240 by default: over 100 MB of decoded rows events); the
		// byte budget downstream bounds memory, this keeps read-ahead small.
		EventCacheCount: 128,
		// Only the outbox table's INSERT rows are decoded, straight into
		// Events where possible (fastrows.go).
		RowsEventDecodeFunc: newRowsDecoder(r.tables).decode,
	})
	defer syncer.Close()

	st := &state{r: r, pos: r.from}
	if r.stop == nil {
		// A bounded read (StopAt) keeps transactions whole: a transaction
		// straddling the stop must not be partly emitted.
		st.chunk, st.chunkBytes = ChunkEvents, ChunkBytes
	}
	var err error
	if st.gset, err = mysql.ParseGTIDSet(r.flavor, r.from.GTIDSet); err != nil {
		return fmt.Errorf("%w: stored GTID set %q: %v", ErrStart, r.from.GTIDSet, err)
	}
	var streamer *replication.BinlogStreamer
	if r.cfg.PositionMode == ModeGTID && (r.from.GTIDSet != "" || r.from.File == "") {
		streamer, err = syncer.StartSyncGTID(st.gset.Clone())
	} else {
		streamer, err = syncer.StartSync(mysql.Position{Name: r.from.File, Pos: r.from.Pos})
	}
	if err != nil {
		return &PositionError{Pos: r.from, Err: classify(err)}
	}
	r.log.Info("streaming binlog", zap.String("file", r.from.File), zap.Uint32("pos", r.from.Pos),
		zap.String("gtid_set", r.from.GTIDSet), zap.String("mode", r.cfg.PositionMode), zap.String("flavor", r.flavor))
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return &PositionError{Pos: st.pos, Err: classify(err)}
		}
		txn, done, err := r.step(st, ev)
		if err != nil {
			return &PositionError{Pos: st.pos, Err: err}
		}
		for _, frag := range st.ready {
			if !r.send(ctx, frag) {
				return nil
			}
		}
		clear(st.ready)
		st.ready = st.ready[:0]
		if txn != nil && !r.send(ctx, *txn) {
			return nil
		}
		if done {
			return nil
		}
	}
}

// Fragment sizes of large transactions (see Txn.Partial).
const (
	ChunkEvents = 2000    // events per fragment
	ChunkBytes  = 2 << 20 // payload bytes per fragment
)

// send puts a transaction on the output channel, waiting for room in the
// byte budget first; false when ctx was cancelled.
func (r *Reader) send(ctx context.Context, t Txn) bool {
	if r.budget != nil {
		held, err := r.budget.Acquire(ctx, int64(t.Size()))
		if err != nil {
			return false
		}
		t.Held = held
	}
	select {
	case r.out <- t:
		return true
	case <-ctx.Done():
		return false
	}
}

// SetBudget bounds the bytes of transactions between the reader and the
// sink: Run waits before emitting a transaction until the sink released
// enough (Budget.Release) of what it holds. Call it before Run.
func (r *Reader) SetBudget(b *Budget) { r.budget = b }

// state is the framing state machine: it follows rotate events to know the
// current file, GTID events to know the transaction's GTID, and BEGIN …
// XID/COMMIT to frame transactions.
type state struct {
	r       *Reader
	pos     Position // end of the last complete transaction
	file    string   // current binlog file
	gset    mysql.GTIDSet
	gtid    string // GTID of the open transaction
	inTxn   bool
	events  []Event
	columns map[uint64]*columnMap // by table id
	generic map[uint64]*genMap    // by table id: mappings other than the im preset
	// chunk > 0 lets a transaction with more than chunk events (or
	// chunkBytes payload bytes) go out in fragments (Txn.Partial) on
	// ready, so that memory stays bounded; 0 keeps transactions whole.
	chunk, chunkBytes, bytes int
	ready                    []Txn
	// ddl is the position of the first statement naming the outbox table
	// seen (ALTER, RENAME, ...): without column names in the table map,
	// rows after it cannot be mapped with the columns read at start.
	ddl string
}

// handle consumes one event and returns a transaction when one completes.
func (st *state) handle(ev *replication.BinlogEvent, h *replication.EventHeader) (*Txn, error) {
	if st.file == "" {
		st.file = st.pos.File
	}
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		st.file = string(e.NextLogName)
		if !st.inTxn && st.pos.File != st.file {
			// Rotation between transactions: the next transaction starts
			// in the new file; positions resume there.
			st.pos.File, st.pos.Pos = st.file, uint32(e.Position)
		}
	case *replication.GTIDEvent:
		// ANONYMOUS_GTID_EVENT (gtid_mode=OFF) decodes to a GTIDEvent with
		// a zero SID: it names no transaction.
		if h.EventType != replication.ANONYMOUS_GTID_EVENT {
			st.setGTID(e)
		}
	case *replication.GtidTaggedLogEvent:
		// MySQL 8.4 tagged GTID (uuid:tag:gno).
		st.setGTID(&e.GTIDEvent)
	case *replication.MariadbGTIDEvent:
		st.gtid = e.GTID.String()
		st.begin()
		if e.IsStandalone() {
			// DDL or other event group with no terminating COMMIT: it ends
			// with its single query event.
			st.inTxn = false
		}
	case *replication.QueryEvent:
		switch q := e.Query; {
		case bytes.EqualFold(q, []byte("BEGIN")):
			st.begin()
		case bytes.EqualFold(q, []byte("COMMIT")):
			return st.commit(h), nil
		case hasPrefixFold(q, "XA START"):
			// An XA transaction ends at XA_PREPARE_LOG_EVENT; its outcome
			// (XA COMMIT / XA ROLLBACK) comes later as an event group of
			// its own.
			st.begin()
		case st.inTxn && isDML(q) && st.r.tables.Mentions(q):
			// Statement-based logging of a change to the outbox table
			// (binlog_format STATEMENT or MIXED for that session): the rows
			// are not in the binlog, so they cannot be published.
			return nil, fmt.Errorf("%w: a statement on the outbox table was logged as a statement, not as rows, at %s:%d (binlog_format is not ROW for the session that wrote it): "+
				"run SET GLOBAL binlog_format=ROW (and in the server's config), reconnect the application's sessions, then republish from before this position",
				ErrServerConfig, st.file, h.LogPos)
		case !st.inTxn:
			// A statement outside BEGIN … COMMIT (DDL) is a transaction of its own.
			if st.ddl == "" && st.r.tables.Mentions(q) {
				st.ddl = fmt.Sprintf("%s:%d", st.file, h.LogPos)
			}
			return st.commit(h), nil
		}
	case *replication.XIDEvent:
		return st.commit(h), nil
	case *replication.RowsEvent:
		if !isWriteRows(h.EventType) || st.r.tables.entry(e.Table.Schema, e.Table.Table) < 0 {
			return nil, nil
		}
		return nil, st.rows(e, h)
	default:
		if h.EventType == replication.XA_PREPARE_LOG_EVENT {
			if len(st.events) > 0 {
				return nil, fmt.Errorf("%w: %d outbox row(s) in an XA transaction (prepared at %s:%d): XA transactions on the outbox table are not supported; insert outbox rows in a regular transaction",
					ErrDecode, len(st.events), st.file, h.LogPos)
			}
			return st.commit(h), nil
		}
	case *replication.TransactionPayloadEvent:
		// MySQL 8 binlog_transaction_compression: the inner events carry
		// no positions of their own; the outer event's end is the end.
		var out *Txn
		for _, inner := range e.Events {
			ih := *inner.Header
			ih.LogPos = h.LogPos
			txn, err := st.handle(inner, &ih)
			if err != nil {
				return nil, err
			}
			if txn != nil {
				out = txn
			}
		}
		return out, nil
	}
	return nil, nil
}

func (st *state) setGTID(e *replication.GTIDEvent) {
	if next, err := e.GTIDNext(); err == nil {
		st.gtid = next.String()
	}
}

// isDML reports whether a statement is an INSERT, REPLACE, UPDATE or DELETE.
func isDML(q []byte) bool {
	q = bytes.TrimLeft(q, " \t\r\n(")
	for _, p := range []string{"INSERT", "REPLACE", "UPDATE", "DELETE"} {
		if hasPrefixFold(q, p) {
			return true
		}
	}
	return false
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], []byte(prefix))
}

func (st *state) begin() {
	st.inTxn = true
	st.events, st.bytes = nil, 0
}

func (st *state) commit(h *replication.EventHeader) *Txn {
	if st.gtid != "" {
		if err := st.gset.Update(st.gtid); err != nil {
			st.r.log.Warn("cannot add GTID to the GTID set", zap.String("gtid", st.gtid), zap.Error(err))
		}
	}
	st.pos = Position{File: st.file, Pos: h.LogPos, GTID: st.gtid, GTIDSet: st.gset.String(), Time: time.Unix(int64(h.Timestamp), 0).UTC()}
	txn := &Txn{Events: st.events, End: st.pos}
	st.events, st.inTxn, st.gtid, st.bytes = nil, false, "", 0
	return txn
}

func (st *state) rows(e *replication.RowsEvent, h *replication.EventHeader) error {
	at := Position{File: st.file, Pos: h.LogPos, GTID: st.gtid}
	var names []string
	if len(st.r.tables.entries) == 1 && st.r.tables.entries[0].re == nil && st.ddl == "" {
		names = st.r.columns
	}
	tbl, err := st.r.tables.forTableMap(e.Table, names)
	if err != nil {
		return fmt.Errorf("%w (row event at %s)", err, at.FilePos())
	}
	if evs, ok := fromFast(e); ok {
		for i := range evs {
			evs[i].Pos = at
			evs[i].Table = tbl
			st.bytes += len(evs[i].Payload)
		}
		st.events = append(st.events, evs...)
		st.fragment()
		return nil
	}
	if tbl != nil && !tbl.Mapping.IM {
		return st.genericRows(e, tbl, at)
	}
	m, ok := st.columns[e.TableID]
	if !ok {
		names := e.Table.ColumnNameString()
		if len(names) == 0 {
			if st.ddl != "" {
				return fmt.Errorf("%w: a statement on %s.%s at %s (DDL?) may have changed its columns, and the binlog carries no column names (binlog_row_metadata=MINIMAL): "+
					"set binlog_row_metadata=FULL on the server, then restart the publisher from this position", ErrDecode, e.Table.Schema, e.Table.Table, st.ddl)
			}
			names = st.r.columns
		}
		cm, err := newColumnMap(names)
		if err != nil {
			return err
		}
		if int(e.Table.ColumnCount) != cm.n {
			return fmt.Errorf("%w: the table map of %s.%s has %d columns but %d names are known (%v); the table changed since start: restart the publisher, or set binlog_row_metadata=FULL",
				ErrDecode, e.Table.Schema, e.Table.Table, e.Table.ColumnCount, cm.n, names)
		}
		if st.columns == nil {
			st.columns = make(map[uint64]*columnMap)
		}
		cm.setTable(e.Table)
		m = &cm
		st.columns[e.TableID] = m
	}
	if bm := e.ColumnBitmap1; len(bm) > 0 {
		for i := 0; i < int(e.ColumnCount); i++ {
			if bm[i/8]&(1<<(i%8)) == 0 {
				return fmt.Errorf("%w: the row event at %s lacks column %d of %s.%s: binlog_row_image is not FULL for the session that wrote it: "+
					"run SET GLOBAL binlog_row_image=FULL (and in the server's config), then reconnect the application's sessions",
					ErrServerConfig, at.FilePos(), i+1, e.Table.Schema, e.Table.Table)
			}
		}
	}
	for _, row := range e.Rows {
		ev, err := m.decodeRow(row)
		if err != nil {
			return fmt.Errorf("%w (row event at %s)", err, at.FilePos())
		}
		ev.Pos = at
		ev.Table = tbl
		st.events = append(st.events, ev)
		st.bytes += len(ev.Payload)
	}
	st.fragment()
	return nil
}

// genericRows decodes the rows that go-mysql decoded of a table with a
// mapping other than the im preset.
func (st *state) genericRows(e *replication.RowsEvent, tbl *Table, at Position) error {
	g, ok := st.generic[e.TableID]
	if !ok || g.tbl != tbl {
		names := e.Table.ColumnNameString()
		if len(names) == 0 {
			names = st.r.columns
		}
		gm, err := newGenMap(tbl, names, e.Table)
		if err != nil {
			return fmt.Errorf("%w (row event at %s)", err, at.FilePos())
		}
		if st.generic == nil {
			st.generic = make(map[uint64]*genMap)
		}
		g = &gm
		st.generic[e.TableID] = g
	}
	if err := fullImage(e, at); err != nil {
		return err
	}
	for _, row := range e.Rows {
		ev, err := g.decodeRow(row)
		if err != nil {
			return fmt.Errorf("%w (row event at %s)", err, at.FilePos())
		}
		ev.Pos = at
		st.events = append(st.events, ev)
		st.bytes += len(ev.Payload)
	}
	st.fragment()
	return nil
}

// fullImage returns the error of a rows event without every column
// (binlog_row_image not FULL).
func fullImage(e *replication.RowsEvent, at Position) error {
	if bm := e.ColumnBitmap1; len(bm) > 0 {
		for i := 0; i < int(e.ColumnCount); i++ {
			if bm[i/8]&(1<<(i%8)) == 0 {
				return fmt.Errorf("%w: the row event at %s lacks column %d of %s.%s: binlog_row_image is not FULL for the session that wrote it: "+
					"run SET GLOBAL binlog_row_image=FULL (and in the server's config), then reconnect the application's sessions",
					ErrServerConfig, at.FilePos(), i+1, e.Table.Schema, e.Table.Table)
			}
		}
	}
	return nil
}

// fragment emits the open transaction's events so far as a fragment once
// they reach the chunk size.
func (st *state) fragment() {
	if st.chunk > 0 && (len(st.events) >= st.chunk || st.bytes >= st.chunkBytes) {
		// A fragment of the open transaction: its End is the end of the
		// last complete transaction, the position to resume from if the
		// pipeline stops before this transaction's commit.
		st.ready = append(st.ready, Txn{Events: st.events, End: st.pos, Partial: true})
		st.events, st.bytes = nil, 0
	}
}

func isWriteRows(t replication.EventType) bool {
	switch t {
	case replication.WRITE_ROWS_EVENTv0, replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2,
		replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1:
		return true
	}
	return false
}

// classify maps replication errors to this package's sentinels.
func classify(err error) error {
	switch code(err) {
	case codeMasterFatalReading:
		return fmt.Errorf("%w: %v; if the binlog was purged, choose a new start (see README: start options)", ErrPositionUnavailable, err)
	case codeAccessDenied:
		return fmt.Errorf("%w: %v; the binlog dump needs REPLICATION SLAVE: GRANT REPLICATION SLAVE ON *.* TO the publisher's user", ErrPrivileges, err)
	case codeSlaveSameID:
		return fmt.Errorf("%w: %v; set source.server-id to a value no other replica uses", ErrServerID, err)
	}
	return err
}

// IsFatal reports whether err is one that a reconnect cannot fix.
func IsFatal(err error) bool {
	return errors.Is(err, ErrServerConfig) || errors.Is(err, ErrPrivileges) || errors.Is(err, ErrAuth) || errors.Is(err, ErrServerID) ||
		errors.Is(err, ErrPositionUnavailable) || errors.Is(err, ErrDecode) || errors.Is(err, ErrStart) || errors.Is(err, mapping.ErrMapping)
}
