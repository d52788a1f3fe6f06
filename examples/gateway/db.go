package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// db is the application's database: it writes a message and its outbox row
// in one transaction (the seed's sendMessage) and reads a user's messages
// back by seq_no for the ones they missed.
type db struct {
	addr, user, password, schema string
	outbox, message              string
	conns                        chan *client.Conn // idle connections, at most cap
}

func newDB(addr, user, password, schema, outbox, message string) *db {
	return &db{addr: addr, user: user, password: password, schema: schema, outbox: outbox, message: message,
		conns: make(chan *client.Conn, 8)}
}

// with runs f on an idle connection (or a new one); a connection f failed
// on is closed rather than reused.
func (d *db) with(f func(c *client.Conn) error) error {
	var c *client.Conn
	select {
	case c = <-d.conns:
	default:
		var err error
		if c, err = client.Connect(d.addr, d.user, d.password, d.schema); err != nil {
			return fmt.Errorf("connect %s: %w", d.addr, err)
		}
	}
	if err := f(c); err != nil {
		c.Close()
		return err
	}
	select {
	case d.conns <- c:
	default:
		c.Close()
	}
	return nil
}

func (d *db) close() {
	for {
		select {
		case c := <-d.conns:
			c.Close()
		default:
			return
		}
	}
}

// message is what the page gets: one im message, from the outbox row.
type message struct {
	Type           string          `json:"type"` // "message"
	EventID        uint64          `json:"event_id"`
	ConversationID int64           `json:"conversation_id"`
	SeqNo          int64           `json:"seq_no"`
	SenderID       int64           `json:"sender_id"`
	ReceiverID     int64           `json:"receiver_id"`
	Payload        json.RawMessage `json:"payload"`
	Via            string          `json:"via"` // "history" (from the table) or "live" (from Kafka)
}

// conversationID is the conversation of two users (order-free).
func conversationID(a, b int64) int64 { return min(a, b)*1_000_000 + max(a, b) }

// send writes the message and its outbox row in one transaction, at the
// conversation's next seq_no (locked by SELECT … FOR UPDATE on the unique
// (conversation_id, seq_no) index). A deadlock or duplicate key between two
// senders of one conversation is retried.
func (d *db) send(ctx context.Context, from, to int64, text string) (conv, seq int64, err error) {
	conv = conversationID(from, to)
	for attempt := 0; ; attempt++ {
		err = d.with(func(c *client.Conn) error {
			if _, err := c.Execute("BEGIN"); err != nil {
				return err
			}
			fail := func(err error) error { _, _ = c.Execute("ROLLBACK"); return err }
			r, err := c.Execute("SELECT COALESCE(MAX(seq_no), 0) FROM `"+d.message+"` WHERE conversation_id = ? FOR UPDATE", conv)
			if err != nil {
				return fail(err)
			}
			last, _ := r.GetInt(0, 0)
			seq = last + 1
			r, err = c.Execute("INSERT INTO `"+d.message+"` (conversation_id, seq_no, sender_id, receiver_id, content) VALUES (?,?,?,?,?)",
				conv, seq, from, to, text)
			if err != nil {
				return fail(err)
			}
			payload, _ := json.Marshal(map[string]any{"conversation_id": conv, "seq_no": seq, "from": from, "to": to,
				"text": text, "sent_at": time.Now().UTC().Format(time.RFC3339Nano)})
			if _, err := c.Execute("INSERT INTO `"+d.outbox+"` (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('message.created',?,?,?,?,?,?)",
				conv, r.InsertId, seq, from, to, string(payload)); err != nil {
				return fail(err)
			}
			_, err = c.Execute("COMMIT")
			return err
		})
		var me *mysql.MyError
		if err == nil || attempt == 4 || !errors.As(err, &me) || (me.Code != mysql.ER_LOCK_DEADLOCK && me.Code != mysql.ER_DUP_ENTRY) {
			return conv, seq, err
		}
		select {
		case <-ctx.Done():
			return conv, seq, ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
		}
	}
}

// history returns the user's messages after since[conversation] (0 for a
// conversation not in since), ordered by conversation and seq_no.
func (d *db) history(user int64, since map[int64]int64) ([]message, error) {
	return d.query("SELECT id, conversation_id, seq_no, sender_id, receiver_id, payload FROM `"+d.outbox+
		"` WHERE (sender_id = ? OR receiver_id = ?) AND event_type = 'message.created' ORDER BY conversation_id, seq_no", since, user, user)
}

// between returns the conversation's messages with after < seq_no < before.
func (d *db) between(conv, after, before int64) ([]message, error) {
	return d.query("SELECT id, conversation_id, seq_no, sender_id, receiver_id, payload FROM `"+d.outbox+
		"` WHERE conversation_id = ? AND seq_no > ? AND seq_no < ? AND event_type = 'message.created' ORDER BY seq_no", nil, conv, after, before)
}

func (d *db) query(q string, since map[int64]int64, args ...any) ([]message, error) {
	var out []message
	err := d.with(func(c *client.Conn) error {
		r, err := c.Execute(q, args...)
		if err != nil {
			return err
		}
		for i := range r.RowNumber() {
			id, _ := r.GetUint(i, 0)
			conv, _ := r.GetInt(i, 1)
			seq, _ := r.GetInt(i, 2)
			from, _ := r.GetInt(i, 3)
			to, _ := r.GetInt(i, 4)
			payload, _ := r.GetString(i, 5)
			if seq <= since[conv] {
				continue
			}
			out = append(out, message{Type: "message", EventID: id, ConversationID: conv, SeqNo: seq, SenderID: from,
				ReceiverID: to, Payload: json.RawMessage(payload), Via: "history"})
		}
		return nil
	})
	return out, err
}
