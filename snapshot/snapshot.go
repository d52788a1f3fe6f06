package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// ErrSnapshot reports a snapshot that cannot be read as asked (no binlog
// snapshot position, a bad condition). Errors wrapping it also wrap
// binlog.ErrStart, so they are fatal.
var ErrSnapshot = errors.New("backfill")

func snapshotError(format string, a ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrSnapshot, binlog.ErrStart, fmt.Sprintf(format, a...))
}

// Rows per Txn handed to the sink, and payload bytes.
const (
	chunkRows  = 500
	chunkBytes = 1 << 20
)

// Snapshot is a connection holding a consistent snapshot, and the binlog
// position it is consistent with. As a Source (Run, Txns) it sends the rows
// matching its condition; call Close when done.
type Snapshot struct {
	conn   *binlog.Conn
	table  string
	where  string
	pos    binlog.Position
	closed bool
	out    chan binlog.Txn
	budget *binlog.Budget
	tbl    *binlog.Table // a mapped table (SetTable); nil: the im columns
}

// Open starts a transaction WITH CONSISTENT SNAPSHOT and reads the binlog
// position the snapshot is consistent with: every transaction committed
// before that position is visible in the snapshot, none after it. The
// statements are chosen by what the server offers, not by its version:
//
//   - binlog_snapshot_file and binlog_snapshot_position (session status of
//     MariaDB and Percona Server): read inside the snapshot, no lock;
//   - otherwise (MySQL) the way mysqldump --single-transaction
//     --source-data does it: FLUSH TABLES WITH READ LOCK (commits wait),
//     START TRANSACTION WITH CONSISTENT SNAPSHOT, SHOW BINARY LOG STATUS
//     (or SHOW MASTER STATUS) for file, position and Executed_Gtid_Set,
//     UNLOCK TABLES. The global read lock is held for milliseconds; it
//     needs the RELOAD privilege, and waits at most lockWait for running
//     statements (MySQL manual, "FLUSH Statement").
//
// Errors wrapping ErrSnapshot name the fix (log_bin off, RELOAD missing).
func Open(ctx context.Context, cfg binlog.Config, where string) (*Snapshot, error) {
	conn, err := binlog.Dial(ctx, cfg, cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("backfill: connect to %s: %w", cfg.Addr, err)
	}
	s := &Snapshot{conn: conn, table: fmt.Sprintf("`%s`.`%s`", cfg.Schema, cfg.Table), where: where, out: make(chan binlog.Txn, max(cfg.TxnBuffer, 1))}
	if err := s.begin(); err != nil {
		s.Close()
		return nil, err
	}
	found, err := s.snapshotStatus()
	if err != nil {
		s.Close()
		return nil, err
	}
	if !found {
		// No binlog_snapshot_* variables: take the pair under the
		// global read lock.
		if err := s.lockedBegin(cfg.User); err != nil {
			s.Close()
			return nil, err
		}
	}
	if s.pos.File == "" || s.pos.Pos < 4 {
		s.Close()
		return nil, snapshotError("the server reports no binlog snapshot position (file %q, position %d): is log_bin on?", s.pos.File, s.pos.Pos)
	}
	return s, nil
}

// lockWait bounds FLUSH TABLES WITH READ LOCK's wait for running
// statements (lock_wait_timeout, seconds): writes queue behind it.
const lockWait = 10

// begin starts the snapshot transaction.
func (s *Snapshot) begin() error {
	for _, q := range []string{
		"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
		"START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
	} {
		if _, err := s.conn.Execute(q); err != nil {
			return fmt.Errorf("backfill: %s: %w", q, err)
		}
	}
	return nil
}

// snapshotStatus reads binlog_snapshot_file/position into s.pos; found is
// false when the server has no such variables.
func (s *Snapshot) snapshotStatus() (found bool, err error) {
	r, err := s.conn.Execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return false, fmt.Errorf("backfill: SHOW STATUS LIKE 'binlog_snapshot_%%': %w", err)
	}
	for i := 0; i < r.RowNumber(); i++ {
		k, _ := r.GetString(i, 0)
		v, _ := r.GetString(i, 1)
		switch strings.ToLower(k) {
		case "binlog_snapshot_file":
			found = true
			s.pos.File = v
		case "binlog_snapshot_position":
			var n uint64
			if _, err := fmt.Sscan(v, &n); err == nil {
				s.pos.Pos = uint32(n)
			}
		}
	}
	return found, nil
}

// lockedBegin restarts the snapshot transaction under FLUSH TABLES WITH
// READ LOCK and reads the binlog position and GTID set while commits
// wait. The lock is released before it returns, whatever happened.
func (s *Snapshot) lockedBegin(user string) error {
	if _, err := s.conn.Execute("ROLLBACK"); err != nil {
		return fmt.Errorf("backfill: ROLLBACK: %w", err)
	}
	if _, err := s.conn.Execute(fmt.Sprintf("SET SESSION lock_wait_timeout = %d", lockWait)); err != nil {
		return fmt.Errorf("backfill: SET lock_wait_timeout: %w", err)
	}
	const ftwrl = "FLUSH TABLES WITH READ LOCK"
	if _, err := s.conn.Execute(ftwrl); err != nil {
		var me *mysql.MyError
		switch {
		case errors.As(err, &me) && (me.Code == 1227 || me.Code == 1044 || me.Code == 1045): // ER_SPECIFIC_ACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR
			return snapshotError("%s: %v: this server has no binlog_snapshot_file/position, so the snapshot's binlog position is read under the global read lock (held for milliseconds): GRANT RELOAD ON *.* TO '%s' (or FLUSH_TABLES where the server has it; docs/operations.md)", ftwrl, err, user)
		case errors.As(err, &me) && me.Code == 1205: // ER_LOCK_WAIT_TIMEOUT
			return fmt.Errorf("backfill: %s: waited %d s for running statements (a long query or an open LOCK TABLES); try again at a quieter time: %w", ftwrl, lockWait, err)
		}
		return fmt.Errorf("backfill: %s: %w", ftwrl, err)
	}
	err := s.begin()
	if err == nil {
		s.pos, err = binlog.LatestOn(s.conn.Execute, binlog.FlavorMySQL)
	}
	if _, uerr := s.conn.Execute("UNLOCK TABLES"); uerr != nil && err == nil {
		err = fmt.Errorf("backfill: UNLOCK TABLES: %w", uerr)
	}
	return err
}

// Close ends the snapshot and closes the connection; safe to call twice.
func (s *Snapshot) Close() {
	if s.closed {
		return
	}
	s.closed = true
	_, _ = s.conn.Execute("ROLLBACK")
	s.conn.Close()
}

// Count returns how many rows match the condition.
func (s *Snapshot) Count() (int64, error) {
	where := s.where
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
		return snapshotError("%s: %v: fix source.backfill-where", q, err)
	}
	return fmt.Errorf("backfill: %s: %w", q, err)
}

// backfillColumns are read in this order by rows.
const backfillColumns = "id, event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload, created_at"

// SetTable makes the snapshot read t, a table whose mapping is not the im
// preset: its mapped columns (binlog.Table.SelectList) in the order of its
// id column, decoded as the binlog reader decodes them. Call it before
// Count and Run.
func (s *Snapshot) SetTable(t *binlog.Table) error {
	s.tbl, s.table = t, t.Quoted()
	// TIMESTAMP columns in UTC, as the binlog carries them.
	if _, err := s.conn.Execute("SET time_zone = '+00:00'"); err != nil {
		return fmt.Errorf("backfill: %w", err)
	}
	return nil
}

// rows streams the rows matching where, in id order, to each, then calls
// end. Only one row is held at a time.
func (s *Snapshot) rows(where string, each func(binlog.Event) error, end func() error) error {
	q := fmt.Sprintf("SELECT %s FROM %s WHERE (%s) ORDER BY id", backfillColumns, s.table, where)
	if s.tbl != nil {
		q = fmt.Sprintf("SELECT %s FROM %s WHERE (%s) ORDER BY %s", s.tbl.SelectList(), s.table, where, s.tbl.IDColumn())
	}
	var res mysql.Result
	err := s.conn.ExecuteSelectStreaming(q, &res, func(row []mysql.FieldValue) error {
		if s.tbl != nil {
			vals := make([][]byte, len(row))
			for i := range row {
				vals[i] = text(&row[i])
			}
			return each(s.tbl.EventFromText(vals))
		}
		e, err := eventFromRow(row)
		if err != nil {
			return err
		}
		return each(e)
	}, nil)
	if err != nil {
		if errors.Is(err, binlog.ErrDecode) || errors.Is(err, context.Canceled) || errors.Is(err, ErrSnapshot) {
			return err
		}
		return sqlError(q, err)
	}
	return end()
}

// text returns a text-protocol value as text (nil for NULL).
func text(v *mysql.FieldValue) []byte {
	switch v.Type {
	case mysql.FieldValueTypeNull:
		return nil
	case mysql.FieldValueTypeSigned:
		return strconv.AppendInt(nil, v.AsInt64(), 10)
	case mysql.FieldValueTypeUnsigned:
		return strconv.AppendUint(nil, v.AsUint64(), 10)
	case mysql.FieldValueTypeFloat:
		return strconv.AppendFloat(nil, v.AsFloat64(), 'f', -1, 64)
	}
	return append([]byte{}, v.AsString()...)
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

// Pos returns the binlog position the snapshot is consistent with.
func (s *Snapshot) Pos() binlog.Position { return s.pos }

// SetPosition sets the position the rows' transactions end at (Pos with
// its GTID set filled in). Call it before Run.
func (s *Snapshot) SetPosition(p binlog.Position) { s.pos = p }

// SetBudget makes Run wait for room in b before sending each transaction
// (Txn.Held). Call it before Run.
func (s *Snapshot) SetBudget(b *binlog.Budget) { s.budget = b }

// Txns returns the rows' transactions; closed when Run returns.
func (s *Snapshot) Txns() <-chan binlog.Txn { return s.out }

// Run sends the rows matching the condition, in id order, in transactions
// of up to 500 rows or 1 MiB of payload, each ending at the snapshot's
// position (the binlog_pos and binlog_txn_end of every record). It returns
// nil at the end or when ctx is cancelled (nothing half-sent), an error
// naming the fix for a bad condition.
func (s *Snapshot) Run(ctx context.Context) error {
	defer close(s.out)
	var cur binlog.Txn
	size := 0
	send := func() error {
		if len(cur.Events) == 0 {
			return nil
		}
		cur.End = s.pos
		if s.budget != nil {
			held, err := s.budget.Acquire(ctx, int64(cur.Size()))
			if err != nil {
				return err
			}
			cur.Held = held
		}
		select {
		case s.out <- cur:
		case <-ctx.Done():
			return ctx.Err()
		}
		cur, size = binlog.Txn{}, 0
		return nil
	}
	err := s.rows(s.where, func(e binlog.Event) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.Pos = s.pos
		cur.Events = append(cur.Events, e)
		size += len(e.Payload)
		if len(cur.Events) >= chunkRows || size >= chunkBytes {
			return send()
		}
		return nil
	}, send)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Execute runs a statement inside the snapshot's transaction (the
// snapshot's view of the tables) on its connection.
func (s *Snapshot) Execute(q string, args ...any) (*mysql.Result, error) {
	return s.conn.Execute(q, args...)
}

// Table returns the outbox table's quoted name, `schema`.`table`.
func (s *Snapshot) Table() string { return s.table }
