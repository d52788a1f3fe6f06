package binlog

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Column names of the outbox table (schema/*.sql). Extra columns (status,
// retry_count, ...) are ignored.
const (
	ColID             = "id"
	ColEventType      = "event_type"
	ColConversationID = "conversation_id"
	ColMessageID      = "message_id"
	ColSeqNo          = "seq_no"
	ColSenderID       = "sender_id"
	ColReceiverID     = "receiver_id"
	ColPayload        = "payload"
	ColCreatedAt      = "created_at"
)

var requiredColumns = []string{ColID, ColEventType, ColConversationID, ColMessageID, ColSeqNo, ColSenderID, ColReceiverID, ColPayload, ColCreatedAt}

// columnMap holds, for each required column, its index in a row image.
type columnMap struct {
	id, eventType, conversationID, messageID, seqNo, senderID, receiverID, payload, createdAt int
	n                                                                                         int // number of columns in the row image
}

// newColumnMap maps required column names to indexes. names are the
// table's columns in ordinal order.
func newColumnMap(names []string) (columnMap, error) {
	idx := make(map[string]int, len(names))
	for i, n := range names {
		idx[strings.ToLower(n)] = i
	}
	var missing []string
	get := func(c string) int {
		i, ok := idx[c]
		if !ok {
			missing = append(missing, c)
			return -1
		}
		return i
	}
	m := columnMap{
		id: get(ColID), eventType: get(ColEventType), conversationID: get(ColConversationID),
		messageID: get(ColMessageID), seqNo: get(ColSeqNo), senderID: get(ColSenderID),
		receiverID: get(ColReceiverID), payload: get(ColPayload), createdAt: get(ColCreatedAt),
		n: len(names),
	}
	if len(missing) > 0 {
		return columnMap{}, fmt.Errorf("%w: outbox table lacks column(s) %s (have %s); create it from schema/mariadb.sql or schema/mysql.sql",
			ErrDecode, strings.Join(missing, ", "), strings.Join(names, ", "))
	}
	return m, nil
}

// decodeRow turns one row image into an Event.
func (m *columnMap) decodeRow(row []any) (Event, error) {
	if len(row) != m.n {
		return Event{}, fmt.Errorf("%w: row has %d columns, the table has %d (schema changed under the publisher?)", ErrDecode, len(row), m.n)
	}
	var (
		e   Event
		err error
	)
	field := func(col string, i int, f func(any) error) {
		if err != nil {
			return
		}
		if ferr := f(row[i]); ferr != nil {
			err = fmt.Errorf("%w: column %s: %v", ErrDecode, col, ferr)
		}
	}
	field(ColID, m.id, func(v any) (err error) { e.ID, err = asUint64(v); return })
	field(ColEventType, m.eventType, func(v any) (err error) { e.EventType, err = asString(v); return })
	field(ColConversationID, m.conversationID, func(v any) (err error) { e.ConversationID, err = asInt64(v); return })
	field(ColMessageID, m.messageID, func(v any) (err error) { e.MessageID, err = asInt64(v); return })
	field(ColSeqNo, m.seqNo, func(v any) (err error) { e.SeqNo, err = asInt64(v); return })
	field(ColSenderID, m.senderID, func(v any) (err error) { e.SenderID, err = asInt64(v); return })
	field(ColReceiverID, m.receiverID, func(v any) (err error) { e.ReceiverID, err = asInt64(v); return })
	field(ColPayload, m.payload, func(v any) (err error) { e.Payload, err = asBytes(v); return })
	field(ColCreatedAt, m.createdAt, func(v any) (err error) { e.CreatedAt, err = asTimeString(v); return })
	return e, err
}

func asUint64(v any) (uint64, error) {
	switch x := v.(type) {
	case int64:
		// BIGINT UNSIGNED arrives as int64 when the table map carries no
		// signedness metadata; the bit pattern is the unsigned value.
		return uint64(x), nil
	case uint64:
		return x, nil
	case int32:
		return uint64(uint32(x)), nil
	case uint32:
		return uint64(x), nil
	case int8, int16, uint8, uint16, int:
		n, err := asInt64(v)
		return uint64(n), err
	case nil:
		return 0, fmt.Errorf("NULL")
	}
	return 0, fmt.Errorf("unexpected type %T", v)
}

func asInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%d does not fit a signed BIGINT", x)
		}
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case int:
		return int64(x), nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	case nil:
		return 0, fmt.Errorf("NULL")
	}
	return 0, fmt.Errorf("unexpected type %T", v)
}

func asString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case nil:
		return "", fmt.Errorf("NULL")
	}
	return "", fmt.Errorf("unexpected type %T", v)
}

func asBytes(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case string:
		return []byte(x), nil
	case nil:
		return nil, fmt.Errorf("NULL")
	}
	return nil, fmt.Errorf("unexpected type %T", v)
}

func asTimeString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.999999"), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("unexpected type %T", v)
}
