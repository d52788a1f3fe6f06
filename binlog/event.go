package binlog

import "strconv"

// Event is one INSERT row of the outbox table.
//
// The numeric fields are the row's BIGINT columns; Payload is the JSON
// column's bytes exactly as the server sent them (MariaDB stores and sends
// JSON as text; MySQL 8's binary JSON is rendered by appendMySQLJSON in
// MySQL's own text form, byte-equal to what `SELECT payload` returns).
// CreatedAt is the DATETIME column as "YYYY-MM-DD hh:mm:ss[.ffffff]".
// Pos is the position of the row event that carried the row (its
// end_log_pos), for tracing; it is not a resumable position.
//
// Table is the row's table when the source reads a table set or a table
// whose mapping is not the plain im preset (nil for the single im table of
// source.schema/source.table). With a mapping other than the im preset
// (Table.Mapping.IM false) the typed IM fields are zero but for ID (when
// the id column is an integer) and Payload, and Vals holds the mapped
// columns' values as text by slot (Table.Mapping.Cols): integers in
// decimal, strings and JSON/TEXT/BLOB bytes as stored, DATETIME/TIMESTAMP
// as CreatedAt is rendered; nil for NULL.
//
// Err is non-nil for a row that cannot become a record (a NULL in the id,
// key, topic or payload column): it wraps ErrDecode and names the column
// and table; the other fields are set as far as they could be decoded,
// Pos always. The sink treats such an event as a poison record
// (sink.ReasonUndecodable).
type Event struct {
	ID             uint64
	EventType      string
	ConversationID int64
	MessageID      int64
	SeqNo          int64
	SenderID       int64
	ReceiverID     int64
	Payload        []byte
	CreatedAt      string
	Pos            Position
	Table          *Table
	Vals           [][]byte
	Err            error
}

// EventID returns the event id as text: the header event_id.
func (e *Event) EventID() string {
	if e.Table != nil && !e.Table.Mapping.IM {
		if v := e.Vals[e.Table.Mapping.ID]; v != nil {
			return string(v)
		}
	}
	return strconv.FormatUint(e.ID, 10)
}

// Txn is one committed transaction. Events holds its outbox INSERT rows in
// binlog order (possibly none: transactions without outbox rows are passed
// on so that the checkpoint can advance past them). End is the position
// right after its XID/COMMIT event: the resumable position.
//
// A large transaction comes as fragments: Partial transactions of up to
// ChunkEvents events or ChunkBytes payload bytes, followed by the final
// part (Partial false) ending at the commit. A fragment's End is the end of
// the last complete transaction before it: acknowledging it does not move
// the checkpoint into the middle of the transaction.
//
// Held is the room the transaction holds in the reader's Budget, released
// by the sink once the transaction is acknowledged (0 without a budget).
type Txn struct {
	Events  []Event
	End     Position
	Partial bool
	Held    int64
}

// Size returns the sum of the events' payload bytes, an estimate of the
// transaction's memory footprint.
func (t *Txn) Size() int {
	n := 0
	for i := range t.Events {
		n += len(t.Events[i].Payload) + 128
	}
	return n
}
