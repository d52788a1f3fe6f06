//go:build integration

package integration

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// checkFields asserts that every record's fields are the row's: message_id,
// sender and receiver follow from (conversation, seq_no) in the workload,
// and the payload is the workload's payload, so a value landing in the
// wrong field is caught.
func checkFields(t *testing.T, recs []verify.Record, payloadBytes int) {
	t.Helper()
	for _, r := range recs {
		conv, _ := strconv.ParseInt(r.Key, 10, 64)
		want := map[string]string{
			"message_id":  strconv.FormatInt(conv*1_000_000+r.SeqNo, 10),
			"sender_id":   strconv.FormatInt(conv%97, 10),
			"receiver_id": strconv.FormatInt(conv%89, 10),
			"event_type":  "message.created",
		}
		for k, v := range want {
			if r.Headers[k] != v {
				t.Fatalf("record %s/%d: header %s = %q, want %q (values in the wrong field?)", r.Key, r.SeqNo, k, r.Headers[k], v)
			}
		}
		if isMySQL() {
			// binary JSON, its keys reordered at INSERT (bytes: TestPayloadByteExact)
			jsonEqual(t, r.Value, workload.Payload(conv, r.SeqNo, payloadBytes))
		} else if string(r.Value) != string(workload.Payload(conv, r.SeqNo, payloadBytes)) {
			t.Fatalf("record %s/%d: payload %.60q", r.Key, r.SeqNo, r.Value)
		}
	}
}

// Columns added, reordered and dropped while the publisher runs, then the
// table swap of online schema tools: values never land in the wrong field,
// both live and when replaying from a position before the DDL.
func TestSchemaChangesLiveAndReplay(t *testing.T) {
	e := newEnv(t)
	file, pos := e.masterPos()
	e.start()
	w := e.writer()
	c := e.sql()
	defer c.Close()
	ddl := func(q string) {
		t.Helper()
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	last := map[int64]int64{}
	step := func(seed uint64) {
		t.Helper()
		plan := workload.Generate(seed, 0, 10, 200, 1, 20, 120)
		shift(plan, last) // continue the conversations' seq_no
		if err := produce(w, plan); err != nil {
			t.Fatal(err)
		}
	}
	step(1)
	ddl(fmt.Sprintf("ALTER TABLE `%s` ADD COLUMN tenant VARCHAR(16) NOT NULL DEFAULT 't1' AFTER event_type", e.outbox))
	step(2)
	ddl(fmt.Sprintf("ALTER TABLE `%s` MODIFY COLUMN seq_no BIGINT NOT NULL FIRST, MODIFY COLUMN payload JSON NOT NULL AFTER id", e.outbox))
	step(3)
	ddl(fmt.Sprintf("ALTER TABLE `%s` DROP COLUMN status, DROP COLUMN retry_count", e.outbox))
	step(4)
	// Online schema change: copy into a new table, swap names.
	ddl(fmt.Sprintf("CREATE TABLE `%s_new` LIKE `%s`", e.outbox, e.outbox))
	ddl(fmt.Sprintf("ALTER TABLE `%s_new` ADD COLUMN region CHAR(2) NOT NULL DEFAULT 'eu' FIRST, MODIFY COLUMN conversation_id BIGINT NOT NULL AFTER payload", e.outbox))
	ddl(fmt.Sprintf("RENAME TABLE `%s` TO `%s_old`, `%s_new` TO `%s`", e.outbox, e.outbox, e.outbox, e.outbox))
	step(5)
	// Rows of the old table after the swap are not outbox rows any more.
	ddl(fmt.Sprintf("INSERT INTO `%s_old` (seq_no, payload, event_type, conversation_id, message_id, sender_id, receiver_id) VALUES (1, '{}', 'message.created', 999999, 1, 1, 1)", e.outbox))
	step(6)

	rep := e.consume(verify.NewChecker(last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
	if rep.Duplicates != 0 {
		t.Fatalf("duplicates without faults: %s", rep.String())
	}
	recs := mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic))
	checkFields(t, recs, 120)

	// Replay the whole range from before the first DDL with a new
	// publisher (own topic and checkpoint): the same events, the same fields.
	r := newEnvNamed(t, t.Name()+"_r") // newEnv(t) again would share e's checkpoint key and topic
	r.outbox = e.outbox
	r.start("--start", fmt.Sprintf("%s:%d", file, pos))
	rep = r.consume(verify.NewChecker(last), verify.NewConsumer(sink.Config{Brokers: brokers}, r.topic), 2*time.Minute)
	requireOK(t, rep)
	checkFields(t, mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, r.topic)), 120)
}

// shift renumbers plan's seq_no to continue after last, and updates last.
func shift(plan *workload.Plan, last map[int64]int64) {
	base := map[int64]int64{}
	for c := range plan.Last {
		base[c] = last[c]
	}
	for _, txn := range plan.Txns {
		for i := range txn {
			txn[i].Payload = workload.Payload(txn[i].ConversationID, txn[i].SeqNo+base[txn[i].ConversationID], 120)
			txn[i].SeqNo += base[txn[i].ConversationID]
		}
	}
	for c, n := range plan.Last {
		last[c] = base[c] + n
	}
}
