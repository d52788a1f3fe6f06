package binlog

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// outboxColumns is the im_event_outbox table of schema/mariadb.sql, in
// ordinal order (required columns interleaved with ignored ones).
var outboxColumns = []string{
	"id", "event_type", "conversation_id", "message_id", "seq_no", "sender_id", "receiver_id",
	"payload", "status", "retry_count", "next_retry_at", "claimed_at", "created_at", "updated_at",
}

// outboxRow builds a row image for outboxColumns.
func outboxRow(id any, eventType any, conv, msg, seq, sender, receiver any, payload any, createdAt any) []any {
	return []any{id, eventType, conv, msg, seq, sender, receiver, payload,
		"PENDING", int32(0), "2026-01-02 03:04:05", nil, createdAt, "2026-01-02 03:04:05"}
}

func TestNewColumnMap(t *testing.T) {
	cases := []struct {
		name    string
		names   []string
		want    columnMap
		missing []string // non-empty: ErrDecode naming these columns
	}{
		{
			name:  "schema order with extra columns",
			names: outboxColumns,
			want: columnMap{id: 0, eventType: 1, conversationID: 2, messageID: 3, seqNo: 4, senderID: 5,
				receiverID: 6, payload: 7, createdAt: 12, n: 14},
		},
		{
			name:  "exactly the required columns",
			names: []string{"id", "event_type", "conversation_id", "message_id", "seq_no", "sender_id", "receiver_id", "payload", "created_at"},
			want: columnMap{id: 0, eventType: 1, conversationID: 2, messageID: 3, seqNo: 4, senderID: 5,
				receiverID: 6, payload: 7, createdAt: 8, n: 9},
		},
		{
			name: "arbitrary order",
			names: []string{"created_at", "payload", "x", "receiver_id", "sender_id", "seq_no", "message_id",
				"conversation_id", "event_type", "id"},
			want: columnMap{id: 9, eventType: 8, conversationID: 7, messageID: 6, seqNo: 5, senderID: 4,
				receiverID: 3, payload: 1, createdAt: 0, n: 10},
		},
		{
			name: "case-insensitive names",
			names: []string{"ID", "Event_Type", "CONVERSATION_ID", "Message_Id", "SEQ_NO", "sender_ID", "Receiver_Id",
				"PayLoad", "Created_At"},
			want: columnMap{id: 0, eventType: 1, conversationID: 2, messageID: 3, seqNo: 4, senderID: 5,
				receiverID: 6, payload: 7, createdAt: 8, n: 9},
		},
		{
			name:    "one missing",
			names:   []string{"id", "event_type", "conversation_id", "message_id", "seq_no", "sender_id", "receiver_id", "created_at"},
			missing: []string{"payload"},
		},
		{
			name:    "several missing",
			names:   []string{"id", "event_type", "conversation_id", "message_id", "seq_no", "status"},
			missing: []string{"sender_id", "receiver_id", "payload", "created_at"},
		},
		{
			name:    "no columns",
			names:   nil,
			missing: requiredColumns,
		},
		{
			name:    "similar names do not count",
			names:   []string{"outbox_id", "event_type", "conversation_id", "message_id", "seq_no", "sender_id", "receiver_id", "payload", "created_at "},
			missing: []string{"id", "created_at"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := newColumnMap(c.names)
			if len(c.missing) > 0 {
				if !errors.Is(err, ErrDecode) {
					t.Fatalf("err = %v, want ErrDecode", err)
				}
				msg := err.Error()
				if !strings.Contains(msg, "lacks column(s) "+strings.Join(c.missing, ", ")+" ") {
					t.Errorf("error %q does not name exactly the missing columns %v", msg, c.missing)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != c.want {
				t.Errorf("columnMap = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestDecodeRow(t *testing.T) {
	m, err := newColumnMap(outboxColumns)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"text":"hi 😀","n":[1,{"a":null}]}`)
	cases := []struct {
		name    string
		row     []any
		want    Event
		wantErr string // substring of the ErrDecode error (Event.Err for a value, the error for the row's shape); empty: success
		wantID  uint64 // with a value error, the id still decoded
	}{
		{
			name: "signed BIGINT as int64, varchar string, JSON []byte (MariaDB LONGTEXT / MySQL JSON)",
			row:  outboxRow(int64(42), "message.created", int64(1001), int64(7), int64(3), int64(5), int64(6), payload, "2026-11-29 10:00:00"),
			want: Event{ID: 42, EventType: "message.created", ConversationID: 1001, MessageID: 7, SeqNo: 3,
				SenderID: 5, ReceiverID: 6, Payload: payload, CreatedAt: "2026-11-29 10:00:00"},
		},
		{
			name: "unsigned BIGINT as uint64, payload as string",
			row:  outboxRow(uint64(1<<63+5), []byte("conversation.updated"), uint64(1), uint64(2), uint64(3), uint64(4), uint64(5), string(payload), "2026-11-29 10:00:00.123456"),
			want: Event{ID: 1<<63 + 5, EventType: "conversation.updated", ConversationID: 1, ConversationUnsigned: true, MessageID: 2, SeqNo: 3,
				SenderID: 4, ReceiverID: 5, Payload: payload, CreatedAt: "2026-11-29 10:00:00.123456"},
		},
		{
			name: "unsigned conversation_id at or above 2^63 is kept (the record key is its decimal value)",
			row:  outboxRow(uint64(7), "e", uint64(1<<63+9), int64(2), int64(3), int64(4), int64(5), payload, "2026-11-29 10:00:00"),
			want: Event{ID: 7, EventType: "e", ConversationID: -1<<63 + 9, ConversationUnsigned: true, MessageID: 2, SeqNo: 3,
				SenderID: 4, ReceiverID: 5, Payload: payload, CreatedAt: "2026-11-29 10:00:00"},
		},
		{
			name: "unsigned BIGINT id without signedness metadata arrives as negative int64",
			row:  outboxRow(int64(-1), "e", int64(1), int64(2), int64(3), int64(4), int64(5), payload, "2026-11-29 10:00:00"),
			want: Event{ID: 1<<64 - 1, EventType: "e", ConversationID: 1, MessageID: 2, SeqNo: 3,
				SenderID: 4, ReceiverID: 5, Payload: payload, CreatedAt: "2026-11-29 10:00:00"},
		},
		{
			name: "INT columns as int32 and smaller types",
			row:  outboxRow(int32(9), "e", int32(-10), int16(11), int8(12), uint32(13), uint16(14), []byte("{}"), []byte("2026-11-29 10:00:00")),
			want: Event{ID: 9, EventType: "e", ConversationID: -10, MessageID: 11, SeqNo: 12,
				SenderID: 13, ReceiverID: 14, Payload: []byte("{}"), CreatedAt: "2026-11-29 10:00:00"},
		},
		{
			name: "created_at as time.Time (parseTime) is formatted in UTC, digits as the column's (0 here)",
			row:  outboxRow(int64(1), "e", int64(1), int64(1), int64(1), int64(1), int64(1), payload, time.Date(2026, 11, 29, 19, 0, 0, 500000000, time.FixedZone("UTC+9", 9*3600))),
			want: Event{ID: 1, EventType: "e", ConversationID: 1, MessageID: 1, SeqNo: 1,
				SenderID: 1, ReceiverID: 1, Payload: payload, CreatedAt: "2026-11-29 10:00:00"},
		},
		{
			name: "NULL created_at is tolerated as empty",
			row:  outboxRow(int64(1), "e", int64(1), int64(1), int64(1), int64(1), int64(1), payload, nil),
			want: Event{ID: 1, EventType: "e", ConversationID: 1, MessageID: 1, SeqNo: 1,
				SenderID: 1, ReceiverID: 1, Payload: payload, CreatedAt: ""},
		},
		{
			name:    "NULL id",
			row:     outboxRow(nil, "e", int64(1), int64(1), int64(1), int64(1), int64(1), payload, "x"),
			wantErr: "column id: NULL",
		},
		{
			name:    "NULL event_type",
			row:     outboxRow(int64(1), nil, int64(1), int64(1), int64(1), int64(1), int64(1), payload, "x"),
			wantErr: "column event_type: NULL",
		},
		{
			name:    "NULL conversation_id",
			row:     outboxRow(int64(1), "e", nil, int64(1), int64(1), int64(1), int64(1), payload, "x"),
			wantErr: "column conversation_id: NULL",
		},
		{
			name:    "NULL message_id",
			row:     outboxRow(int64(1), "e", int64(1), nil, int64(1), int64(1), int64(1), payload, "x"),
			wantErr: "column message_id: NULL",
		},
		{
			name:    "NULL seq_no",
			row:     outboxRow(int64(1), "e", int64(1), int64(1), nil, int64(1), int64(1), payload, "x"),
			wantErr: "column seq_no: NULL",
		},
		{
			name:    "NULL sender_id",
			row:     outboxRow(int64(1), "e", int64(1), int64(1), int64(1), nil, int64(1), payload, "x"),
			wantErr: "column sender_id: NULL",
		},
		{
			name:    "NULL receiver_id",
			row:     outboxRow(int64(1), "e", int64(1), int64(1), int64(1), int64(1), nil, payload, "x"),
			wantErr: "column receiver_id: NULL",
		},
		{
			name:    "NULL payload",
			row:     outboxRow(int64(77), "e", int64(1), int64(1), int64(1), int64(1), int64(1), nil, "x"),
			wantErr: "column payload: NULL",
			wantID:  77,
		},
		{
			name:    "signed message_id column with an unsigned value above 2^63",
			row:     outboxRow(int64(78), "e", int64(1), uint64(1<<63), int64(1), int64(1), int64(1), payload, "x"),
			wantErr: "column message_id: 9223372036854775808 does not fit",
			wantID:  78,
		},
		{
			name:    "first failing column is reported",
			row:     outboxRow(int64(1), "e", int64(1), nil, int64(1), int64(1), int64(1), nil, "x"),
			wantErr: "column message_id: NULL",
		},
		{
			name:    "unexpected type for id",
			row:     outboxRow("42", "e", int64(1), int64(1), int64(1), int64(1), int64(1), payload, "x"),
			wantErr: "column id: unexpected type string",
		},
		{
			name:    "unexpected type for event_type",
			row:     outboxRow(int64(1), int64(3), int64(1), int64(1), int64(1), int64(1), int64(1), payload, "x"),
			wantErr: "column event_type: unexpected type int64",
		},
		{
			name:    "unexpected type for payload",
			row:     outboxRow(int64(1), "e", int64(1), int64(1), int64(1), int64(1), int64(1), 3.5, "x"),
			wantErr: "column payload: unexpected type float64",
		},
		{
			name:    "unexpected type for created_at",
			row:     outboxRow(int64(1), "e", int64(1), int64(1), int64(1), int64(1), int64(1), payload, int64(5)),
			wantErr: "column created_at: unexpected type int64",
		},
		{
			name:    "row shorter than the table",
			row:     outboxRow(int64(1), "e", int64(1), int64(1), int64(1), int64(1), int64(1), payload, "x")[:13],
			wantErr: "row has 13 columns, the table has 14",
		},
		{
			name:    "row longer than the table",
			row:     append(outboxRow(int64(1), "e", int64(1), int64(1), int64(1), int64(1), int64(1), payload, "x"), "new"),
			wantErr: "row has 15 columns, the table has 14",
		},
		{
			name:    "empty row",
			row:     []any{},
			wantErr: "row has 0 columns, the table has 14",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := m.decodeRow(c.row)
			if c.wantErr != "" {
				if err == nil && got.Err != nil {
					// A value that cannot be decoded is a poison event,
					// not an error that stops the reader.
					err = got.Err
					if c.wantID != 0 && got.ID != c.wantID {
						t.Errorf("id %d, want %d", got.ID, c.wantID)
					}
				}
				if !errors.Is(err, ErrDecode) {
					t.Fatalf("err = %v, want ErrDecode", err)
				}
				if !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("err = %q, want it to contain %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("decodeRow =\n %+v\nwant\n %+v", got, c.want)
			}
		})
	}
}

func TestAsInt64RejectsUnsignedOverflow(t *testing.T) {
	if _, err := asInt64(uint64(1) << 63); err == nil {
		t.Fatal("uint64 above MaxInt64 must not wrap to a negative id")
	}
	if n, err := asInt64(uint64(42)); err != nil || n != 42 {
		t.Fatalf("asInt64(42) = %d, %v", n, err)
	}
}
