package binlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/secure"
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
	pace   Pacer // told of the linger pauses; nil: none
	obs    Observer
	files  FileObserver
	// noRows: rows events are not decoded and no Event is produced, only
	// transactions and their positions (PositionAt's scan).
	noRows bool
	// findCommit returns the end_log_pos of the commit event of the
	// transaction starting at file:start (set by Run: SHOW BINLOG EVENTS
	// on a connection of its own); nil: unknown.
	findCommit func(file string, start uint32) (uint32, error)
	// logSizes returns the server's binlog files and sizes (set by Run:
	// SHOW BINARY LOGS on a connection of its own); nil: no server to ask.
	logSizes func() ([]LogFile, error)
	// heard: when the server was last heard from (a transaction read, a
	// heartbeat), Unix nanoseconds; 0: not yet (LastHeard).
	heard atomic.Int64
}

// LastHeard returns when the reader last heard from the server: an event
// between transactions (the start of any transaction, whatever its
// tables), or a heartbeat (which the server sends only when it has nothing
// newer); zero before either. Safe for concurrent use (the
// health metrics read it at scrape time).
func (r *Reader) LastHeard() time.Time {
	if n := r.heard.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
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
	sc, err := syncerConfig(ctx, r.cfg, r.flavor) // tls.go: login and TLS
	if err != nil {
		return &PositionError{Pos: r.from, Err: err}
	}
	fill, err := r.omitsPositions(ctx)
	if err != nil {
		return &PositionError{Pos: r.from, Err: err}
	}
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		// MariaDB 11.4+ writes end_log_pos 0 inside transactions: go-mysql
		// then asks for the Annotate_rows events too (without them the
		// events sent are not contiguous) and fills the positions in.
		FillZeroLogPos:  fill,
		ServerID:        sc.ServerID,
		Flavor:          sc.Flavor,
		Host:            sc.Host,
		Port:            sc.Port,
		User:            sc.User,
		Password:        sc.Password,
		TLSConfig:       sc.TLSConfig,
		Dialer:          withLinger(sc.Dialer, r.cfg.Linger, r.pace),
		HeartbeatPeriod: r.cfg.HeartbeatPeriod,
		ReadTimeout:     r.cfg.ReadTimeout,
		// Reconnecting inside go-mysql would resume in the middle of a
		// transaction; the caller restarts from the last acknowledged
		// transaction instead.
		DisableRetrySync:      true,
		MaxReconnectAttempts:  1,
		RenderJSONAsMySQLText: true,
		// go-mysql asks the server for event checksums
		// (@master_binlog_checksum); verify each event's CRC32 before
		// decoding it: a mismatch is fatal (classify).
		VerifyChecksum: true,
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
		// Events where possible (fastrows.go); none with noRows.
		RowsEventDecodeFunc: r.rowsDecodeFunc(),
	})
	defer syncer.Close()
	if r.findCommit == nil {
		// The end of a transaction passed on in fragments (MariaDB has
		// no transaction_length), on a plain SQL connection of its own,
		// opened at the first such transaction.
		var conn *Conn
		defer func() {
			if conn != nil {
				conn.Close()
			}
		}()
		r.findCommit = func(file string, start uint32) (uint32, error) {
			if conn == nil {
				c, err := Dial(ctx, r.cfg, "")
				if err != nil {
					return 0, fmt.Errorf("binlog: connect to %s to look up a transaction's end: %w", r.cfg.Addr, err)
				}
				conn = c
			}
			return findCommit(streamEvents(conn), file, start)
		}
		defer func() { r.findCommit = nil }()
	}
	if r.logSizes == nil {
		// The server's binlog files and sizes, asked when the stream
		// rotates into a file mid-stream (followsRead), on a plain SQL
		// connection of its own, opened at the first such rotation.
		var conn *Conn
		defer func() {
			if conn != nil {
				conn.Close()
			}
		}()
		r.logSizes = func() ([]LogFile, error) {
			if conn == nil {
				c, err := Dial(ctx, r.cfg, "")
				if err != nil {
					return nil, fmt.Errorf("binlog: connect to %s to list the binlog files after a rotation: %w", r.cfg.Addr, err)
				}
				conn = c
			}
			return logSizes(conn)
		}
		defer func() { r.logSizes = nil }()
	}

	st := &state{r: r, pos: r.from, opened: r.from.Opened}
	if r.stop == nil {
		// A bounded read (StopAt) keeps transactions whole: a transaction
		// straddling the stop must not be partly emitted.
		st.chunk, st.chunkBytes = ChunkEvents, ChunkBytes
	}
	// One GTID per MariaDB domain, the highest (go-mysql keeps the last
	// listed, which for a raw gtid_binlog_state may be the older one).
	from, err := NormalizeGTIDSet(r.flavor, r.from.GTIDSet)
	if err != nil {
		return fmt.Errorf("%w: stored GTID set %q: %v", ErrStart, r.from.GTIDSet, err)
	}
	if st.gset, err = mysql.ParseGTIDSet(r.flavor, from); err != nil {
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
	if r.obs != nil {
		r.obs.Streaming()
	}
	r.log.Info("streaming binlog", zap.String("file", r.from.File), zap.Uint32("pos", r.from.Pos),
		zap.String("gtid_set", r.from.GTIDSet), zap.String("mode", r.cfg.PositionMode), zap.String("flavor", r.flavor))
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if at, bad, cerr := r.checksumFailed(ctx, err, st.pos); cerr != nil {
				r.log.Warn("could not read the binlog again to check event checksums", zap.String("file", st.pos.File), zap.Uint32("pos", st.pos.Pos), zap.Error(cerr))
			} else if bad {
				err = fmt.Errorf("%w: binlog event checksum mismatch in the event starting at %s: the server's binlog is damaged at that point (or was corrupted on the way); "+
					"nothing from that transaction on was published: check the file with mariadb-binlog/mysqlbinlog --verify-binlog-checksum, and republish its transactions from an intact copy",
					ErrCorruptEvent, at.FilePos())
			}
			if !errors.Is(err, ErrCorruptEvent) {
				err = classify(r.historyChanged(err, st))
			}
			return &PositionError{Pos: st.resume(), Err: err}
		}
		if !st.inTxn {
			// Heard from the server: a heartbeat, or an event between
			// transactions (each transaction's GTID/BEGIN, any table's).
			r.heard.Store(time.Now().UnixNano())
		}
		if r.obs != nil && !st.inTxn && isHeartbeat(ev.Header.EventType) {
			// The server sends heartbeats only when it has nothing newer:
			// everything before was read.
			r.obs.Idle(st.pos)
		}
		if ev.Header.LogPos != 0 && ev.Header.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 && !isHeartbeat(ev.Header.EventType) {
			st.read = true
		}
		txn, done, err := r.step(st, ev)
		if err != nil {
			return &PositionError{Pos: st.resume(), Err: err}
		}
		if r.files != nil && ev.Header.EventType == replication.FORMAT_DESCRIPTION_EVENT && ev.Header.Timestamp > 0 && st.pos.File != "" {
			r.files.FileStarted(st.pos.File, time.Unix(int64(ev.Header.Timestamp), 0))
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

// rowsDecodeFunc returns the syncer's RowsEventDecodeFunc: the fast
// decoder, or with noRows one that reads the event's header only.
func (r *Reader) rowsDecodeFunc() func(*replication.RowsEvent, []byte) error {
	if r.noRows {
		return func(e *replication.RowsEvent, data []byte) error {
			_, err := e.DecodeHeader(data)
			return err
		}
	}
	return newRowsDecoder(r.tables).decode
}

// checksumFailed tells whether the stream failed because an event after
// from (the last complete transaction's end) has a checksum that does not
// match (corruptAfter reads the binlog again), and where that event
// starts; only for a failure in decoding an event, not for one of the
// server (an error packet) or of the connection (go-mysql wraps every
// read failure, a read timeout included, in mysql.ErrBadConn), so that a
// reconnect is not delayed.
func (r *Reader) checksumFailed(ctx context.Context, err error, from Position) (Position, bool, error) {
	var me *mysql.MyError
	var ne net.Error
	if errors.As(err, &me) || errors.As(err, &ne) || errors.Is(err, mysql.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || from.File == "" || from.Pos < 4 {
		return Position{}, false, nil
	}
	fill, err := r.omitsPositions(ctx)
	if err != nil {
		return Position{}, false, err
	}
	return corruptAfter(ctx, r.cfg, r.flavor, fill, from, r.log)
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

// Observer learns the reader's connection state (the health metrics'
// source_connected and caught-up facts). Calls come from Run's goroutine
// and must not block.
type Observer interface {
	// Streaming: the binlog dump started.
	Streaming()
	// Idle: a heartbeat outside a transaction: the reader has read
	// everything the server had (heartbeats come only after
	// heartbeat-period without events), up to at, the end of the last
	// complete transaction.
	Idle(at Position)
}

// SetObserver makes the reader report to o. Call it before Run.
func (r *Reader) SetObserver(o Observer) { r.obs = o }

// FileObserver learns when each binlog file the reader reads was opened
// by the server (its Format_description event's timestamp, 1 s
// resolution; the server sends it also when a dump starts inside the
// file): the age of the checkpoint's file for the retention headroom.
// Calls come from Run's goroutine and must not block.
type FileObserver interface {
	FileStarted(file string, at time.Time)
}

// SetFileObserver sets the FileObserver. Call it before Run.
func (r *Reader) SetFileObserver(o FileObserver) { r.files = o }

func isHeartbeat(t replication.EventType) bool {
	return t == replication.HEARTBEAT_EVENT || t == replication.HEARTBEAT_LOG_EVENT_V2
}

// SetBudget bounds the bytes of transactions between the reader and the
// sink: Run waits before emitting a transaction until the sink released
// enough (Budget.Release) of what it holds. Call it before Run.
func (r *Reader) SetBudget(b *Budget) { r.budget = b }

// SetPace tells p when the stream's linger pauses begin and end
// (source.linger; none without it). Call it before Run.
func (r *Reader) SetPace(p Pacer) { r.pace = p }

// state is the framing state machine: it follows rotate events to know the
// current file, GTID events to know the transaction's GTID, and BEGIN …
// XID/COMMIT to frame transactions.
type state struct {
	r    *Reader
	pos  Position // end of the last complete transaction
	file string   // current binlog file
	// opened: when the server created file (its Format_description
	// event's timestamp); zero until that event is read.
	opened time.Time
	// read: an event of the binlog itself was read (not one of the
	// artificial events a dump starts with, nor a heartbeat).
	read bool
	// entered: file was rotated into after events were read, and its
	// GTID header (Gtid_list, Previous_gtids) is not checked yet
	// (followsRead).
	entered bool
	// left: where the stream would have resumed just before it rotated
	// into the entered file (the end of the last transaction read of the
	// file before): what the checkpoint holds once all is acknowledged.
	left Position
	gset mysql.GTIDSet
	gtid string // GTID of the open transaction
	// commitMicros: the open transaction's immediate_commit_timestamp
	// (MySQL 8.0.1+ GTID event: µs since the epoch, on this server); 0
	// unknown (MariaDB, older servers): the commit event's 1 s time then.
	commitMicros uint64
	inTxn        bool
	// txnStart is where the open transaction's first event (GTID, or
	// BEGIN without GTIDs) starts; txnLen its transaction_length (MySQL
	// GTID events; 0 unknown); body counts its events after the opening
	// ones; commitAt caches commitPos.
	txnStart uint32
	fromGTID bool // txnStart is a GTID event's
	txnLen   uint64
	body     int
	commitAt Position
	// commitUnknown: commitPos failed for the open transaction (warned once)
	commitUnknown bool
	events        []Event
	// next is the end of the last event read that carried its position:
	// where the next event of the file starts (fillPos).
	next uint32
	// lastEvents is the event count of the last transaction committed: the
	// capacity events starts with (bounded by maxEventsHint), so that a
	// transaction of many rows events does not regrow and copy its events.
	lastEvents int
	columns    map[uint64]*columnMap // by table id
	generic    map[uint64]*genMap    // by table id: mappings other than the im preset
	// chunk > 0 lets a transaction with more than chunk events (or
	// chunkBytes payload bytes) go out in fragments (Txn.Partial) on
	// ready, so that memory stays bounded; 0 keeps transactions whole.
	chunk, chunkBytes, bytes int
	ready                    []Txn
	// ddl is the position of the first statement naming the outbox table
	// seen (ALTER, RENAME, ...): without column names in the table map,
	// rows after it cannot be mapped with the columns read at start.
	ddl string
	// xa: the open transaction is an XA transaction (XA START seen); its
	// rows are held at XA PREPARE in prepared, in prepare order, until
	// its XA COMMIT or XA ROLLBACK (xa.go).
	xa       bool
	prepared []preparedXA
	// emptyXA: XIDs prepared without outbox rows in this run, awaiting
	// their outcome (so that an outcome of an XA transaction prepared
	// before the start is told apart).
	emptyXA map[string]bool
}

// resume is the position to restart from: the end of the last complete
// transaction, or, while a prepared XA transaction's rows are held, the
// position before the oldest of them (so that a restart reads it again).
func (st *state) resume() Position {
	if len(st.prepared) > 0 {
		return st.prepared[0].start
	}
	return st.pos
}

// omitsPositions reports whether the source writes events without their
// end_log_pos: MariaDB 11.4+ with binlog_legacy_event_pos OFF (the
// default). Servers without that variable (MySQL, older MariaDB) write
// every position. Asked on a connection of its own.
func (r *Reader) omitsPositions(ctx context.Context) (bool, error) {
	if r.flavor != FlavorMariaDB {
		return false, nil
	}
	c, err := Dial(ctx, r.cfg, "")
	if err != nil {
		return false, err
	}
	defer c.Close()
	res, err := c.Execute("SELECT @@GLOBAL.binlog_legacy_event_pos")
	if code(err) == codeUnknownSystemVariable {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("binlog: SELECT @@GLOBAL.binlog_legacy_event_pos: %w", err)
	}
	legacy, _ := res.GetInt(0, 0)
	return legacy == 0, nil
}

// fillPos fills in the end_log_pos of an event inside a transaction that
// the server wrote without it: MariaDB 11.4+ with binlog_legacy_event_pos
// OFF (the default) writes 0 there for every event of a transaction but its
// GTID and commit events (MariaDB KB, "binlog_legacy_event_pos"). The
// events of a transaction follow each other in the file, so such an
// event ends at the previous event's end plus its own size. Artificial
// events (the rotate and format description a dump starts with) are not
// in the file and keep 0.
func (st *state) fillPos(h *replication.EventHeader) {
	if h.LogPos == 0 && st.inTxn && st.next != 0 && h.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 {
		h.LogPos = st.next + h.EventSize
	}
	if h.LogPos != 0 {
		st.next = h.LogPos
	}
}

// handle consumes one event and returns a transaction when one completes.
func (st *state) handle(ev *replication.BinlogEvent, h *replication.EventHeader) (*Txn, error) {
	if st.file == "" {
		st.file = st.pos.File
	}
	st.fillPos(h)
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		if next := string(e.NextLogName); next != st.file {
			st.file, st.opened = next, time.Time{}
			// Entered mid-stream, after events of the binlog were read:
			// the file's GTID header must follow all of them.
			st.entered, st.left = st.read, st.resume()
		}
		if !st.inTxn && st.pos.File != st.file {
			// Rotation between transactions: the next transaction starts
			// in the new file; positions resume there.
			st.pos.File, st.pos.Pos, st.pos.Opened = st.file, uint32(e.Position), time.Time{}
		}
	case *replication.FormatDescriptionEvent:
		// The current file's: when the server created it (the server
		// sends it also when a dump starts inside the file).
		if h.Timestamp == 0 {
			break
		}
		st.opened = time.Unix(int64(h.Timestamp), 0).UTC()
		if err := st.r.checkOpened(st.file, st.opened); err != nil {
			return nil, err
		}
		if st.pos.File == st.file {
			st.pos.Opened = st.opened
		}
	case *replication.GTIDEvent:
		// ANONYMOUS_GTID_EVENT (gtid_mode=OFF) decodes to a GTIDEvent with
		// a zero SID: it names no transaction.
		if err := st.opening(h); err != nil {
			return nil, err
		}
		st.txnStart, st.txnLen, st.fromGTID = eventStart(h), e.TransactionLength, true
		st.commitMicros = e.ImmediateCommitTimestamp
		if h.EventType != replication.ANONYMOUS_GTID_EVENT {
			st.setGTID(e)
		}
	case *replication.GtidTaggedLogEvent:
		// MySQL 8.4 tagged GTID (uuid:tag:gno).
		if err := st.opening(h); err != nil {
			return nil, err
		}
		st.txnStart, st.txnLen, st.fromGTID = eventStart(h), e.TransactionLength, true
		st.commitMicros = e.ImmediateCommitTimestamp
		st.setGTID(&e.GTIDEvent)
	case *replication.MariadbGTIDListEvent:
		// The GTID state before this file (MariaDB writes it at the start
		// of every binlog): domains known only from history (their
		// transactions purged, or in older files) enter the tracked set
		// here, so that the stored set stands for everything before the
		// position.
		if err := st.followsRead(listBehind(st.gset, e.GTIDs)); err != nil {
			return nil, err
		}
		st.mergeList(e.GTIDs)
	case *replication.PreviousGTIDsEvent:
		// MySQL's: the GTID set executed before this file.
		if err := st.followsRead(previousLacks(st.gset, e.GTIDSets)); err != nil {
			return nil, err
		}
	case *replication.MariadbGTIDEvent:
		if err := st.opening(h); err != nil {
			return nil, err
		}
		st.gtid = e.GTID.String()
		st.txnStart, st.fromGTID = eventStart(h), true
		st.begin(h)
		if e.IsStandalone() {
			// DDL or other event group with no terminating COMMIT: it ends
			// with its single query event.
			st.inTxn = false
		}
	case *replication.QueryEvent:
		switch q := e.Query; {
		case bytes.EqualFold(q, []byte("BEGIN")):
			if err := st.opening(h); err != nil {
				return nil, err
			}
			st.begin(h)
		case bytes.EqualFold(q, []byte("COMMIT")):
			return st.commit(h), nil
		case st.inTxn && bytes.EqualFold(q, []byte("ROLLBACK")):
			// A transaction that changed a non-transactional table and was
			// rolled back is logged ending in ROLLBACK: its InnoDB rows
			// (the outbox's) were rolled back, so none is published.
			st.events, st.bytes = nil, 0
			return st.commit(h), nil
		case hasPrefixFold(q, "XA START"):
			// An XA transaction ends at XA_PREPARE_LOG_EVENT; its outcome
			// (XA COMMIT / XA ROLLBACK) comes later as an event group of
			// its own (xa.go).
			if err := st.opening(h); err != nil {
				return nil, err
			}
			st.begin(h)
			st.xa = true
		case hasPrefixFold(q, "XA COMMIT ") || hasPrefixFold(q, "XA ROLLBACK "):
			return st.xaEnd(q, h), nil
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
		st.body++
		if st.r.noRows {
			return nil, nil
		}
		if !isWriteRows(h.EventType) || st.r.tables.entry(e.Table.Schema, e.Table.Table) < 0 {
			return nil, nil
		}
		return nil, st.rows(e, h)
	default:
		if h.EventType == replication.XA_PREPARE_LOG_EVENT {
			return st.xaPrepare(ev, h)
		}
	case *replication.TransactionPayloadEvent:
		// MySQL 8 binlog_transaction_compression: the inner events carry
		// no positions of their own; the outer event's end is the end.
		var out *Txn
		for _, inner := range e.Events {
			ih := *inner.Header
			ih.LogPos, ih.EventSize = h.LogPos, h.EventSize
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

// opening checks, before an event that opens a transaction (GTID, BEGIN,
// XA START), that the previous one was closed: a transaction whose commit
// event is missing (a damaged or edited binlog) would otherwise be
// dropped, with its outbox rows, without a word. A GTID event followed by
// BEGIN (MySQL) or XA START is one opening.
func (st *state) opening(h *replication.EventHeader) error {
	st.entered = false // the file's GTID header, if any, came before
	if !st.inTxn || st.body == 0 {
		return nil
	}
	return fmt.Errorf("%w: a transaction starts at %s:%d while the one that began at %s:%d (%d outbox row(s) so far) has no commit event: the binlog is damaged; "+
		"read it from an intact copy",
		ErrCorruptEvent, st.file, eventStart(h), st.file, st.txnStart, len(st.events))
}

func (st *state) begin(h *replication.EventHeader) {
	if !st.fromGTID {
		st.txnStart = eventStart(h)
	}
	st.inTxn = true
	st.events, st.bytes, st.body = nil, 0, 0
	st.commitAt = Position{}
}

// mergeList adds a MariaDB Gtid_list (the GTID state before a binlog
// file) to the tracked set, keeping per domain the higher sequence number.
func (st *state) mergeList(list []mysql.MariadbGTID) {
	ms, ok := st.gset.(*mysql.MariadbGTIDSet)
	if !ok {
		return
	}
	for i := range list {
		g := list[i]
		if cur, ok := ms.Sets[g.DomainID]; !ok || g.SequenceNumber > cur.SequenceNumber {
			ms.Sets[g.DomainID] = &g
		}
	}
}

// followsRead returns a *HistoryError when the GTID header of a file the
// stream rotated into mid-stream (entered) shows a state behind what was
// read before (why, from listBehind or previousLacks): in one binlog
// history a file begins after every transaction of the earlier files, so
// the server's binlog was reset (or restored) under the stream, which
// followed the rotation into the new history and would skip what the new
// history wrote before this file. The stream stops before any
// transaction of the file, so the checkpoint stays in the old history and
// the restart's CheckHistory refuses it. Nil otherwise (the header
// checked once per entered file).
//
// Without GTIDs to compare (MySQL with gtid_mode OFF, its default), the
// file the stream left is looked up instead (leftShorter): in one history
// it ends at or after where the stream read it up to; after a reset and a
// FLUSH BINARY LOGS the server's file of that name is the new history's,
// shorter (the dump thread waited at the old offset of it, then rotated on).
func (st *state) followsRead(why string) error {
	if !st.entered {
		return nil
	}
	st.entered = false
	if why == "" {
		var err error
		if why, err = st.leftShorter(); err != nil {
			return err
		}
	}
	if why == "" {
		return nil
	}
	mode := ModeFile
	if st.r.cfg.PositionMode == ModeGTID {
		mode = ModeGTID
	}
	return &HistoryError{Stored: st.left, Mode: mode, Change: ChangeReset,
		Evidence: []string{fmt.Sprintf("the stream rotated into %s, whose %s (noticed while streaming)", st.file, why)}}
}

// leftShorter asks the server for the file the stream rotated out of
// (st.left) and says how it is shorter than what was read of it
// (StreamEvidence); "" when it is not, or is not listed any more (purged
// at once: nothing to compare), or when the reader has no way to ask (a
// reader of files, tests). A file no longer written to has its final size,
// so one answer is conclusive. When the server does not answer (a lacking
// privilege, a dropped connection), a warning says so and the stream goes
// on: the binlog measurement compares the files again within 30 s.
func (st *state) leftShorter() (string, error) {
	if st.r.logSizes == nil || st.left.File == "" {
		return "", nil
	}
	logs, err := st.r.logSizes()
	if err != nil {
		st.r.log.Warn("could not list the binlog files to check the file the stream rotated out of", zap.String("file", st.left.File), zap.Uint32("pos", st.left.Pos), zap.Error(err))
		return "", nil
	}
	left := st.left
	i := slices.IndexFunc(logs, func(l LogFile) bool { return l.Name == left.File })
	if i < 0 {
		return "", nil
	}
	if ev := StreamEvidence(logs[i:i+1], left); ev != "" {
		return "previous file is another history: " + ev, nil
	}
	return "", nil
}

// listBehind says how a MariaDB Gtid_list (the state before a file) is
// behind the tracked set: a domain whose highest sequence number there
// is below the one already read; "" when none is (domains the list lacks
// tell nothing: FLUSH BINARY LOGS DELETE_DOMAIN_ID drops them). A pure
// function.
func listBehind(tracked mysql.GTIDSet, list []mysql.MariadbGTID) string {
	ms, ok := tracked.(*mysql.MariadbGTIDSet)
	if !ok {
		return ""
	}
	top := map[uint32]uint64{}
	for _, g := range list {
		top[g.DomainID] = max(top[g.DomainID], g.SequenceNumber)
	}
	for _, d := range slices.Sorted(maps.Keys(ms.Sets)) {
		if t, ok := top[d]; ok && t < ms.Sets[d].SequenceNumber {
			return fmt.Sprintf("Gtid_list ends domain %d at sequence number %d, behind %s already read", d, t, ms.Sets[d])
		}
	}
	return ""
}

// previousLacks says which transactions already read (tracked) a MySQL
// Previous_gtids set (the GTIDs executed before a file) lacks; "" when it
// has them all or does not parse. A pure function.
func previousLacks(tracked mysql.GTIDSet, previous string) string {
	ts, ok := tracked.(*mysql.MysqlGTIDSet)
	if !ok || ts.String() == "" {
		return ""
	}
	prev, err := mysql.ParseMysqlGTIDSet(previous)
	if err != nil || prev.Contain(ts) {
		return ""
	}
	return fmt.Sprintf("Previous_gtids %q lacks transactions already read (%s)", previous, ts)
}

// commitPos returns the open transaction's own end (Txn.Commit) for a
// fragment: after its commit event, with its GTID and the set including
// it. The file:pos is the GTID event's start plus its transaction_length
// (MySQL 8.0.2+), or looked up on the source (Reader.findCommit; the whole
// transaction is in the binlog once its first event is sent); without
// either it is left empty, and the error says why.
func (st *state) commitPos() (Position, error) {
	if st.commitAt.File != "" {
		return st.commitAt, nil
	}
	p := Position{File: st.file, GTID: st.gtid, Opened: st.opened}
	switch {
	case st.txnLen > 0:
		p.Pos = st.txnStart + uint32(st.txnLen)
	case st.r.findCommit != nil:
		end, err := st.r.findCommit(st.file, st.txnStart)
		if err != nil {
			return Position{}, err
		}
		p.Pos = end
	default:
		return Position{}, fmt.Errorf("binlog: the end of the transaction that began at %s:%d is unknown (no transaction_length, no SQL connection to look it up)", st.file, st.txnStart)
	}
	set := st.gset.Clone()
	if st.gtid != "" {
		if err := set.Update(st.gtid); err != nil {
			return Position{}, fmt.Errorf("binlog: add GTID %s to the set: %w", st.gtid, err)
		}
	}
	p.GTIDSet = set.String()
	st.commitAt = p
	return p, nil
}

func (st *state) commit(h *replication.EventHeader) *Txn {
	if st.gtid != "" {
		if err := st.gset.Update(st.gtid); err != nil {
			st.r.log.Warn("cannot add GTID to the GTID set", zap.String("gtid", st.gtid), zap.Error(err))
		}
	}
	st.pos = Position{File: st.file, Pos: h.LogPos, GTID: st.gtid, GTIDSet: st.gset.String(), Time: commitTime(st.commitMicros, h.Timestamp), Opened: st.opened}
	txn := &Txn{Events: st.events, End: st.resume()}
	st.lastEvents = len(st.events)
	st.events, st.inTxn, st.gtid, st.bytes, st.body, st.xa = nil, false, "", 0, 0, false
	st.txnStart, st.txnLen, st.commitAt, st.fromGTID, st.commitUnknown, st.commitMicros = 0, 0, Position{}, false, false, 0
	return txn
}

// commitTime is a transaction's commit time: its immediate_commit_timestamp
// (µs; MySQL 8.0.1+, the GTID event: MySQL manual, "Replication Delay
// Monitoring"), else its commit event's header timestamp (seconds).
func commitTime(micros uint64, header uint32) time.Time {
	if micros != 0 {
		return time.UnixMicro(int64(micros)).UTC()
	}
	return time.Unix(int64(header), 0).UTC()
}

// xaPrepare ends an XA transaction's prepare group: committed there when
// one-phase; otherwise its outbox rows, if any, are held until its outcome.
func (st *state) xaPrepare(ev *replication.BinlogEvent, h *replication.EventHeader) (*Txn, error) {
	var body []byte
	if g, ok := ev.Event.(*replication.GenericEvent); ok {
		body = g.Data
	}
	xid, onePhase, err := parseXAPrepare(body)
	if err != nil {
		return nil, fmt.Errorf("%w (at %s:%d)", err, st.file, h.LogPos)
	}
	if onePhase {
		return st.commit(h), nil
	}
	if len(st.events) == 0 {
		if st.emptyXA == nil {
			st.emptyXA = make(map[string]bool)
		}
		st.emptyXA[xid] = true
		return st.commit(h), nil
	}
	held := preparedXA{xid: xid, events: st.events, start: st.resume()}
	st.events = nil
	st.prepared = append(st.prepared, held)
	st.r.log.Warn("XA transaction prepared with outbox rows: they are published at its XA COMMIT; until then a restart resumes from before it",
		zap.String("file", st.file), zap.Uint32("pos", h.LogPos), zap.String("gtid", st.gtid), zap.Int("rows", len(held.events)))
	// the prepare group itself is complete (its GTID is executed)
	return st.commit(h), nil
}

// xaEnd handles the XA COMMIT / XA ROLLBACK event group: the held rows of
// that XA transaction are published with it (COMMIT) or dropped (ROLLBACK).
func (st *state) xaEnd(q []byte, h *replication.EventHeader) *Txn {
	xid, commit, ok := parseXAEnd(q)
	i := -1
	for j := range st.prepared {
		if ok && st.prepared[j].xid == xid {
			i = j
			break
		}
	}
	if i < 0 {
		if ok && st.emptyXA[xid] {
			delete(st.emptyXA, xid)
		} else if commit {
			st.r.log.Warn("XA COMMIT of an XA transaction prepared before the start position: outbox rows it may have are not published; if it had some, republish from before its XA PREPARE",
				zap.String("file", st.file), zap.Uint32("pos", h.LogPos), zap.ByteString("query", q))
		}
		return st.commit(h)
	}
	held := st.prepared[i]
	st.prepared = append(st.prepared[:i], st.prepared[i+1:]...)
	st.begin(h)
	if commit {
		st.events = held.events
	}
	return st.commit(h)
}

// maxEventsHint bounds the capacity a transaction's events start with.
const maxEventsHint = 4096

func (st *state) rows(e *replication.RowsEvent, h *replication.EventHeader) error {
	at := Position{File: st.file, Pos: eventStart(h), GTID: st.gtid}
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
		if st.events == nil && st.lastEvents > len(evs) {
			n := min(st.lastEvents, maxEventsHint)
			if st.chunk > 0 {
				n = min(n, st.chunk)
			}
			st.events = make([]Event, 0, max(n, len(evs)))
		}
		st.events = append(st.events, evs...)
		return st.fragment()
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
	if err := fullImage(e, at); err != nil {
		return err
	}
	for _, row := range e.Rows {
		ev, err := m.decodeRow(row)
		if err != nil {
			return fmt.Errorf("%w (row event at %s)", err, at.FilePos())
		}
		if ev.Err != nil {
			// Not a reason to stop: the sink handles it as a poison record.
			ev.Err = fmt.Errorf("%w (row event at %s)", ev.Err, at.FilePos())
		}
		ev.Pos = at
		ev.Table = tbl
		st.events = append(st.events, ev)
		st.bytes += len(ev.Payload)
	}
	return st.fragment()
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
func (st *state) fragment() error {
	// An XA transaction's rows stay whole: it may still roll back.
	if st.chunk > 0 && !st.xa && (len(st.events) >= st.chunk || st.bytes >= st.chunkBytes) {
		// A fragment of the open transaction: its End is the end of the
		// last complete transaction, the position to resume from if the
		// pipeline stops before this transaction's commit; its Commit is
		// the transaction's own end, for the records' headers and errors.
		var commit Position
		var err error
		if !st.commitUnknown {
			commit, err = st.commitPos()
		}
		if err != nil {
			// Never stall on it: the records then name the end of the
			// transaction before (what may be acknowledged) instead of
			// their own; the positions that move the checkpoint are not
			// affected.
			if !st.commitUnknown {
				st.r.log.Warn("the end of a large transaction passed on in fragments cannot be looked up: its records' binlog_txn_end names the end of the transaction before it",
					zap.String("file", st.file), zap.Uint32("pos", st.txnStart), zap.String("gtid", st.gtid), zap.Error(err))
			}
			st.commitUnknown, commit = true, Position{}
		}
		st.ready = append(st.ready, Txn{Events: st.events, End: st.resume(), Commit: commit, Partial: true})
		st.events, st.bytes = nil, 0
	}
	return nil
}

// eventStart returns the offset where the event of header h starts in its
// binlog file: its end_log_pos minus its size (an event without a size,
// as in tests, gives its end_log_pos).
func eventStart(h *replication.EventHeader) uint32 {
	if h.EventSize > 0 && h.EventSize <= h.LogPos {
		return h.LogPos - h.EventSize
	}
	return h.LogPos
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
		return fmt.Errorf("%w: %v; if the binlog was purged, choose a new start (see docs/operations.md, \"Where a run starts\")", ErrPositionUnavailable, err)
	case codeAccessDenied:
		return fmt.Errorf("%w: %v; the binlog dump needs REPLICATION SLAVE: GRANT REPLICATION SLAVE ON *.* TO the publisher's user", ErrPrivileges, err)
	case codeSlaveSameID:
		return fmt.Errorf("%w: %v; set source.server-id to a value no other replica uses", ErrServerID, err)
	}
	return err
}

// staleOffsetTexts are the ERROR 1236 texts the servers send when a dump
// starts at an offset that is no event of the file (inside one, or past
// its end): MySQL "log event entry exceeded max_allowed_packet" (it reads
// the bytes there as an event's length), "Client requested source to
// start replication from position > file size"; MariaDB "binlog
// truncated in the middle of event", "Client requested master to start
// replication from impossible position"; both "bogus data in log event".
var staleOffsetTexts = []string{"exceeded max_allowed_packet", "position > file size", "impossible position",
	"truncated in the middle of event", "bogus data in log event"}

// historyChanged turns the ERROR 1236 texts that show the server's
// binlog history changed under the stream into a *HistoryError: at any
// time "could not find next log" (the binlog index lost the file after
// the one being read: a binlog reset while streaming); before any event
// of the binlog itself was read, at a file-mode start, the texts of an
// offset that is no event of the server's file (staleOffsetTexts: a
// checkpoint names the end of a transaction, so the file of that name is
// another one; the texts themselves blame the packet size or the disk).
// Other errors are returned as they are. The history check at start
// (CheckHistory) finds a changed history before the dump; this is for a
// change while streaming or in between.
func (r *Reader) historyChanged(err error, st *state) error {
	var me *mysql.MyError
	if !errors.As(err, &me) || me.Code != codeMasterFatalReading {
		return err
	}
	msg := strings.ToLower(me.Message)
	gtidMode := r.cfg.PositionMode == ModeGTID && (r.from.GTIDSet != "" || r.from.File == "")
	if strings.Contains(msg, "could not find next log") {
		mode := ModeFile
		if gtidMode {
			mode = ModeGTID
		}
		return &HistoryError{Stored: st.resume(), Mode: mode, Change: ChangeReset,
			Evidence: []string{fmt.Sprintf("the server's binlog lost the file after %s while it was being read (ERROR 1236 %q): its binlog was reset", st.file, me.Message)}}
	}
	if st.read || r.from.File == "" || gtidMode || !slices.ContainsFunc(staleOffsetTexts, func(t string) bool { return strings.Contains(msg, strings.ToLower(t)) }) {
		return err
	}
	return &HistoryError{Stored: r.from, Mode: ModeFile, Change: ChangeReset,
		Evidence: []string{fmt.Sprintf("the server cannot read its binlog at %s: ERROR 1236 %q (what the server says for an offset inside an event or past the end of the file; "+
			"a checkpoint is always the end of a transaction, unless a single event there is larger than the server's max_allowed_packet)", r.from.FilePos(), me.Message)}}
}

// checkOpened refuses a file-mode start whose file was created at
// another time than the one stored with the start position (Position.Opened):
// the server's file of that name is another file. Only for the start file,
// before anything of it is read.
func (r *Reader) checkOpened(file string, opened time.Time) error {
	if file != r.from.File || r.from.Opened.IsZero() || (r.cfg.PositionMode == ModeGTID && r.from.GTIDSet != "") || r.stop != nil {
		return nil
	}
	if why := openedChanged(r.from, opened); why != "" { // history.go
		return &HistoryError{Stored: r.from, Mode: ModeFile, Change: ChangeReset, Evidence: []string{why}}
	}
	return nil
}

// IsFatal reports whether err is one that a reconnect cannot fix.
func IsFatal(err error) bool {
	return errors.Is(err, ErrServerConfig) || errors.Is(err, ErrPrivileges) || errors.Is(err, ErrAuth) || errors.Is(err, ErrServerID) || errors.Is(err, ErrOwnServerID) ||
		errors.Is(err, ErrPositionUnavailable) || errors.Is(err, ErrHistory) || errors.Is(err, ErrDecode) || errors.Is(err, ErrStart) || errors.Is(err, ErrCorruptEvent) ||
		errors.Is(err, ErrTLS) || secure.IsTLSFailure(err) || errors.Is(err, mapping.ErrMapping)
}
