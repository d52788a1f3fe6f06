// Package workload writes IM messages and their outbox rows the way an
// application does: the business row and the outbox row in one transaction.
// The demo, the integration tests and the benchmarks use it.
package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// Row is one message and its outbox event.
type Row struct {
	ConversationID int64
	SeqNo          int64
	SenderID       int64
	ReceiverID     int64
	EventType      string
	Payload        []byte // JSON
}

// Writer inserts rows over one connection.
type Writer struct {
	conn    *client.Conn
	outbox  string
	message string

	addr, user, password, schema string
}

// Open connects to addr and uses schema. outbox and message name the
// tables (message may be empty to write outbox rows only).
func Open(addr, user, password, schema, outbox, message string) (*Writer, error) {
	conn, err := client.Connect(addr, user, password, schema)
	if err != nil {
		return nil, err
	}
	return &Writer{conn: conn, outbox: outbox, message: message, addr: addr, user: user, password: password, schema: schema}, nil
}

// Close closes the connection.
func (w *Writer) Close() error { return w.conn.Close() }

// Exec runs one statement.
func (w *Writer) Exec(q string, args ...any) error {
	_, err := w.conn.Execute(q, args...)
	return err
}

// Txn inserts rows in one transaction: for each row an im_message row and
// an outbox row. With rollback, the transaction is rolled back instead of
// committed.
func (w *Writer) Txn(rows []Row, rollback bool) error {
	if _, err := w.conn.Execute("BEGIN"); err != nil {
		return err
	}
	fail := func(err error) error {
		_, _ = w.conn.Execute("ROLLBACK")
		return err
	}
	const chunk = 500
	for start := 0; start < len(rows); start += chunk {
		part := rows[start:min(start+chunk, len(rows))]
		if w.message != "" {
			q, args := insertMessages(w.message, part)
			if _, err := w.conn.Execute(q, args...); err != nil {
				return fail(fmt.Errorf("insert %s: %w", w.message, err))
			}
		}
		q, args := insertOutbox(w.outbox, part)
		if _, err := w.conn.Execute(q, args...); err != nil {
			return fail(fmt.Errorf("insert %s: %w", w.outbox, err))
		}
	}
	end := "COMMIT"
	if rollback {
		end = "ROLLBACK"
	}
	_, err := w.conn.Execute(end)
	return err
}

func insertMessages(table string, rows []Row) (string, []any) {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO `%s` (conversation_id, seq_no, sender_id, receiver_id, content) VALUES ", table)
	args := make([]any, 0, 5*len(rows))
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?)")
		args = append(args, r.ConversationID, r.SeqNo, r.SenderID, r.ReceiverID, fmt.Sprintf("message %d/%d", r.ConversationID, r.SeqNo))
	}
	return b.String(), args
}

// insertOutbox: message_id is set to conversation_id*1e6+seq_no, a stable id
// the verifier can recompute.
func insertOutbox(table string, rows []Row) (string, []any) {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO `%s` (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ", table)
	args := make([]any, 0, 7*len(rows))
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?)")
		et := r.EventType
		if et == "" {
			et = "message.created"
		}
		args = append(args, et, r.ConversationID, r.ConversationID*1_000_000+r.SeqNo, r.SeqNo, r.SenderID, r.ReceiverID, string(r.Payload))
	}
	return b.String(), args
}

// Plan is a generated workload: transactions of rows over conversations,
// with seq_no increasing by one per conversation in commit order.
type Plan struct {
	Txns  [][]Row
	Last  map[int64]int64 // conversation → last seq_no
	Total int
}

// Generate plans total rows over convs conversations (ids base+1 …
// base+convs) in transactions of minTxn to maxTxn rows, with payloads of
// about payloadBytes bytes. seed makes it reproducible.
func Generate(seed uint64, base int64, convs, total, minTxn, maxTxn, payloadBytes int) *Plan {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := &Plan{Last: make(map[int64]int64, convs), Total: total}
	for n := 0; n < total; {
		size := min(minTxn+rng.IntN(maxTxn-minTxn+1), total-n)
		txn := make([]Row, size)
		for i := range txn {
			c := base + 1 + int64(rng.IntN(convs))
			p.Last[c]++
			txn[i] = Row{ConversationID: c, SeqNo: p.Last[c], SenderID: c % 97, ReceiverID: c % 89,
				Payload: Payload(c, p.Last[c], payloadBytes)}
		}
		p.Txns = append(p.Txns, txn)
		n += size
	}
	return p
}

// Payload returns a JSON document of about n bytes for a message.
func Payload(conv, seq int64, n int) []byte {
	head := fmt.Sprintf(`{"conversation_id":%d,"seq_no":%d,"text":"`, conv, seq)
	pad := max(0, n-len(head)-2)
	return []byte(head + strings.Repeat("x", pad) + `"}`)
}

// TxnRetry is Txn that survives a database restart or a killed
// connection: it reconnects and retries until the transaction commits or
// stop is closed. A retry that hits the message table's unique key
// (conversation_id, seq_no) means the earlier attempt did commit (its
// acknowledgement was lost), so it counts as done: each row is committed
// exactly once. The Writer must have a message table.
func (w *Writer) TxnRetry(rows []Row, stop <-chan struct{}) error {
	for attempt := 0; ; attempt++ {
		err := w.Txn(rows, false)
		if err == nil {
			return nil
		}
		var me *mysql.MyError
		if errors.As(err, &me) && me.Code == 1062 && attempt > 0 { // ER_DUP_ENTRY
			return nil
		}
		select {
		case <-stop:
			return err
		case <-time.After(200 * time.Millisecond):
		}
		if conn, cerr := client.Connect(w.addr, w.user, w.password, w.schema); cerr == nil {
			w.conn.Close()
			w.conn = conn
		}
	}
}
