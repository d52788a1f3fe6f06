package binlog

import "strconv"

// Event is one INSERT row of the outbox table.
//
// The numeric fields are the row's BIGINT columns; Payload is the JSON
// column's bytes exactly as the server sent them (MariaDB stores and sends
// JSON as text; MySQL 8's binary JSON is rendered by appendMySQLJSON in
// MySQL's own text form, byte-equal to what `SELECT payload` returns).
// CreatedAt is the DATETIME column as "YYYY-MM-DD hh:mm:ss[.ffffff]".
// Pos is the position where the row event that carried the row starts
// (its offset in the binlog file: end_log_pos minus its size; for the
// events inside a MySQL compressed transaction payload, the payload
// event's start), with the transaction's GTID, for tracing; it is not a
// resumable position (SHOW BINLOG EVENTS IN 'file' FROM pos shows it).
//
// ConversationUnsigned says that conversation_id is a BIGINT UNSIGNED
// column: ConversationID then holds the bit pattern of the unsigned value
// (values of 2^63 and above are negative as int64); AppendConversationKey gives
// the decimal value. ID is always unsigned.
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
// Err is non-nil for a row that cannot become a record (a NULL or
// out-of-range value in an outbox column, or in the id, key, topic or
// payload column of its mapping): it wraps ErrDecode and names the column
// (and table); the other fields are set as far as they could be decoded
// (ID whenever the id column itself is readable), Pos always. The sink
// treats such an event as a poison record (sink.ReasonUndecodable).
type Event struct {
	ID                   uint64
	EventType            string
	ConversationID       int64
	ConversationUnsigned bool
	MessageID            int64
	SeqNo                int64
	SenderID             int64
	ReceiverID           int64
	Payload              []byte
	CreatedAt            string
	Pos                  Position
	Table                *Table
	Vals                 [][]byte
	Err                  error
}

// AppendConversationKey appends conversation_id in decimal, the record
// key: unsigned when the column is BIGINT UNSIGNED (ConversationUnsigned).
func (e *Event) AppendConversationKey(b []byte) []byte {
	if e.ConversationUnsigned {
		return strconv.AppendUint(b, uint64(e.ConversationID), 10)
	}
	return strconv.AppendInt(b, e.ConversationID, 10)
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
// Commit is set on fragments only: the transaction's own end, the
// position right after its commit event, with its GTID and the GTID set
// that includes it (a whole transaction's own end is End). Own returns
// either; it is what records carry as binlog_txn_end and what errors about
// the transaction's rows name. A fragment's Commit is known before the
// commit event is read: from the MySQL GTID event's transaction_length,
// or (MariaDB) looked up with SHOW BINLOG EVENTS on the source, which holds
// the whole transaction once its first event was sent; its Time is zero.
//
// Held is the room the transaction holds in the reader's Budget, released
// by the sink once the transaction is acknowledged (0 without a budget).
type Txn struct {
	Events  []Event
	End     Position
	Commit  Position
	Partial bool
	Held    int64
}

// Own returns the transaction's own end: Commit for a fragment, End
// otherwise.
func (t *Txn) Own() Position {
	if t.Commit.IsZero() {
		return t.End
	}
	return t.Commit
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
