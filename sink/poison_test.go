package sink

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

const dlq = "dlq.test"

// fakeKafka stands in for kafka-go's Writer: a partition is topic+key; a
// partition batch whose values sum to more than limit bytes is rejected
// with MESSAGE_TOO_LARGE (the whole batch, as kafka-go reports it); fail
// injects an error for a record by event id.
type fakeKafka struct {
	limit   int
	fail    map[string]error
	written []kafka.Message
	calls   int

	round   *Round // the round in flight (Begin), nil: none
	outcome error  // its WriteMessages outcome, returned by Wait
}

func (f *fakeKafka) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	f.calls++
	sums := map[string]int{}
	for _, m := range msgs {
		sums[m.Topic+"/"+string(m.Key)] += len(m.Value)
	}
	werr := make(kafka.WriteErrors, len(msgs))
	bad := map[string]error{}
	for _, m := range msgs {
		p := m.Topic + "/" + string(m.Key)
		if f.limit > 0 && sums[p] > f.limit {
			bad[p] = kafka.MessageSizeTooLarge
		}
		if err := f.fail[header(&m, router.HeaderEventID)]; err != nil {
			bad[p] = err
		}
	}
	for i, m := range msgs {
		if werr[i] = bad[m.Topic+"/"+string(m.Key)]; werr[i] == nil {
			f.written = append(f.written, m)
		}
	}
	if len(bad) > 0 {
		return werr
	}
	return nil
}

func (f *fakeKafka) Close() error { return nil }

// Its rounds are the Producer's without idempotence: one in flight,
// written when begun (WriteMessages), the outcome returned by Wait.
func (f *fakeKafka) MaxInFlight() int { return 1 }

func (f *fakeKafka) Begin(ctx context.Context, msgs []kafka.Message) (*Round, error) {
	if f.round != nil {
		return nil, errors.New("fakeKafka: a round in flight already")
	}
	f.round, f.outcome = &Round{msgs: msgs}, f.WriteMessages(ctx, msgs...)
	return f.round, nil
}

func (f *fakeKafka) Wait(_ context.Context, r *Round) error {
	if r == nil || r != f.round {
		return errors.New("fakeKafka: Wait out of order")
	}
	f.round = nil
	return f.outcome
}

func (f *fakeKafka) TxnOpen() (time.Time, bool)   { return time.Time{}, false }
func (f *fakeKafka) Commit(context.Context) error { return nil }
func (f *fakeKafka) Abort(context.Context) error  { return nil }

// ev is an event of conversation conv with a payload; id is its event id.
func ev(id uint64, conv int64, payload string) binlog.Event {
	return binlog.Event{ID: id, EventType: "message.created", ConversationID: conv, SeqNo: int64(id), Payload: []byte(payload),
		Pos: binlog.Position{File: "bin.000001", Pos: uint32(id * 100)}}
}

func txn(end uint32, events ...binlog.Event) binlog.Txn {
	return binlog.Txn{Events: events, End: binlog.Position{File: "bin.000001", Pos: end, GTID: "0-1-" + strconv.Itoa(int(end))}}
}

func testConfig(policy string) Config {
	c := DefaultConfig()
	c.BatchBytes = 4096
	c.OnPoison, c.DeadLetterTopic = policy, dlq
	return c
}

// run writes txns (all queued before the Writer starts, so that they share
// rounds) and returns Run's error, the acknowledged positions and the Writer.
func run(t *testing.T, cfg Config, fk *fakeKafka, txns ...binlog.Txn) (error, []binlog.Position, *Writer) {
	t.Helper()
	w := newWriter(cfg, router.New(router.Config{Topic: "im.{event_type}"}, router.Reserved{DeadLetter: cfg.DeadLetterTopic}), fk, zap.NewNop())
	in := make(chan binlog.Txn, len(txns))
	for _, x := range txns {
		in <- x
	}
	close(in)
	var acks []binlog.Position
	done := make(chan struct{})
	go func() {
		for p := range w.Acks() {
			acks = append(acks, p.End)
		}
		close(done)
	}()
	err := w.Run(context.Background(), in)
	<-done
	return err, acks, w
}

// ids returns the event ids of the records written to topic, in order.
func ids(fk *fakeKafka, topic string) string {
	var out []string
	for _, m := range fk.written {
		if m.Topic == topic {
			out = append(out, header(&m, router.HeaderEventID))
		}
	}
	return strings.Join(out, ",")
}

func headers(m *kafka.Message) map[string]string {
	h := map[string]string{}
	for _, x := range m.Headers {
		h[x.Key] = string(x.Value)
	}
	return h
}

func TestCheck(t *testing.T) {
	r := router.New(router.Config{Topic: "im.{event_type}"}, router.Reserved{})
	big := `"` + strings.Repeat("x", 5000) + `"`
	cases := []struct {
		name      string
		eventType string
		payload   string
		want      Reason // "": publishable
		is        error
	}{
		{"valid", "message.created", `{"a":1}`, "", nil},
		{"valid scalar", "message.created", `"s"`, "", nil},
		{"invalid json", "message.created", `{"a":`, ReasonInvalidJSON, ErrInvalidJSON},
		{"empty payload", "message.created", ``, ReasonInvalidJSON, ErrInvalidJSON},
		{"not utf-8 text", "message.created", "\xff", ReasonInvalidJSON, ErrInvalidJSON},
		{"too large", "message.created", big, ReasonTooLarge, ErrRecordTooLarge},
		{"too large beats invalid json", "message.created", big[1:], ReasonTooLarge, ErrRecordTooLarge},
		{"invalid topic", "bad type", `{}`, ReasonInvalidTopic, router.ErrTopic},
		{"invalid topic beats the rest", "bad/type", big[1:], ReasonInvalidTopic, router.ErrTopic},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := binlog.Event{ID: 1, EventType: c.eventType, ConversationID: 9, Payload: []byte(c.payload)}
			m, err := r.Route(&e, binlog.Position{})
			p, err := Check(&m, err, 4096)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if c.want == "" {
				if p != nil {
					t.Fatalf("Check = %+v, want publishable", p)
				}
				return
			}
			if p == nil || p.Reason != c.want || !errors.Is(p.Err, c.is) {
				t.Fatalf("Check = %+v, want %s (%v)", p, c.want, c.is)
			}
			if want := "im." + c.eventType; p.Topic != want {
				t.Errorf("intended topic %q, want %q", p.Topic, want)
			}
		})
	}
	other := errors.New("boom")
	if p, err := Check(&kafka.Message{}, other, 4096); p != nil || err != other {
		t.Errorf("other route error: %v, %v", p, err)
	}
}

func TestDeadLetterRecord(t *testing.T) {
	r := router.New(router.Config{Topic: "im.events"}, router.Reserved{})
	e := binlog.Event{ID: 42, EventType: "message.created", ConversationID: 1001, SeqNo: 3, Payload: []byte(`{"a":`),
		Pos: binlog.Position{File: "bin.000002", Pos: 777, GTID: "0-1-5"}}
	m, _ := r.Route(&e, binlog.Position{File: "bin.000002", Pos: 900})
	p, _ := Check(&m, nil, 4096)
	d := DeadLetter(&m, p, dlq, 4096)
	h := headers(&d)
	if d.Topic != dlq || string(d.Key) != "1001" || string(d.Value) != `{"a":` {
		t.Fatalf("dead letter %s key %q value %q", d.Topic, d.Key, d.Value)
	}
	for k, v := range map[string]string{
		router.HeaderEventID: "42", router.HeaderSeqNo: "3", router.HeaderEventType: "message.created",
		router.HeaderBinlogPos: "bin.000002:777", router.HeaderTxnEnd: "bin.000002:900", router.HeaderGTID: "0-1-5",
		HeaderDLQReason: "invalid_json", HeaderDLQTopic: "im.events",
	} {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q", k, h[k], v)
		}
	}
	if !strings.Contains(h[HeaderDLQError], "not valid JSON") {
		t.Errorf("dlq_error %q", h[HeaderDLQError])
	}
	if _, ok := h[HeaderDLQPayloadBytes]; ok {
		t.Error("dlq_payload_bytes set although the value is kept")
	}
	if len(m.Headers) != 10 {
		t.Errorf("DeadLetter changed the original's headers: %d", len(m.Headers))
	}

	// Too large: no value, its size in a header.
	e.Payload = []byte(`"` + strings.Repeat("x", 5000) + `"`)
	m, _ = r.Route(&e, binlog.Position{})
	p, _ = Check(&m, nil, 4096)
	d = DeadLetter(&m, p, dlq, 4096)
	if h := headers(&d); len(d.Value) != 0 || h[HeaderDLQPayloadBytes] != "5002" || h[HeaderDLQReason] != "too_large" {
		t.Fatalf("too large: value %d bytes, headers %v", len(d.Value), h)
	}
	// Invalid JSON that fits, but not with the dead-letter headers: no value.
	e.Payload = []byte(strings.Repeat("x", 3700))
	m, _ = r.Route(&e, binlog.Position{})
	p, _ = Check(&m, nil, 4096)
	if p == nil || p.Reason != ReasonInvalidJSON {
		t.Fatalf("want invalid_json, got %+v", p)
	}
	d = DeadLetter(&m, p, dlq, 4096)
	if h := headers(&d); len(d.Value) != 0 || h[HeaderDLQPayloadBytes] != "3700" || estimate(&d) > 4096 {
		t.Fatalf("oversize dead letter: value %d bytes, headers %v", len(d.Value), h)
	}
}

// A dead letter of a mapped table names the row's table (dlq_table), from
// the Poison of CheckEvent or, for a record the broker rejected, from the
// record's WriterData; the single im table's carry none.
func TestDeadLetterTable(t *testing.T) {
	tbl := &binlog.Table{Schema: "shop", Name: "outbox_07"}
	m := kafka.Message{Topic: "t", Value: []byte("x"), WriterData: tbl}
	for name, c := range map[string]struct {
		m     kafka.Message
		p     *Poison
		table string
	}{
		"from the poison":     {kafka.Message{Topic: "t"}, &Poison{Reason: ReasonUndecodable, Err: errors.New("NULL key"), Table: "shop.outbox_01"}, "shop.outbox_01"},
		"from the record":     {m, &Poison{Reason: ReasonBrokerTooLarge, Err: errors.New("too large")}, "shop.outbox_07"},
		"the single im table": {kafka.Message{Topic: "t"}, &Poison{Reason: ReasonInvalidJSON, Err: errors.New("bad")}, ""},
	} {
		d := DeadLetter(&c.m, c.p, dlq, 4096)
		if got, ok := headers(&d)[HeaderDLQTable]; got != c.table || ok != (c.table != "") {
			t.Errorf("%s: dlq_table %q (set %v), want %q", name, got, ok, c.table)
		}
	}
}

// Fail policy: the complete transactions before the poison one are written
// and acknowledged, even from the same round; nothing of the poison
// transaction or after it is written.
func TestFailPolicyAcksTransactionsBefore(t *testing.T) {
	big := `"` + strings.Repeat("x", 5000) + `"`
	for _, c := range []struct {
		name    string
		poison  binlog.Event
		reason  Reason
		errLike error
	}{
		{"invalid json", ev(5, 1, `{"a":`), ReasonInvalidJSON, ErrInvalidJSON},
		{"too large", ev(5, 1, big), ReasonTooLarge, ErrRecordTooLarge},
		{"invalid topic", func() binlog.Event { e := ev(5, 1, `{}`); e.EventType = "a b"; return e }(), ReasonInvalidTopic, router.ErrTopic},
	} {
		t.Run(c.name, func(t *testing.T) {
			fk := &fakeKafka{}
			t1, t2 := txn(1000, ev(1, 1, `{}`), ev(2, 2, `{}`)), txn(2000, ev(3, 1, `{}`))
			t3, t4 := txn(3000, ev(4, 2, `{}`), c.poison, ev(6, 3, `{}`)), txn(4000, ev(7, 1, `{}`))
			err, acks, w := run(t, testConfig(PolicyFail), fk, t1, t2, t3, t4)
			var pe *PoisonError
			if !errors.As(err, &pe) {
				t.Fatalf("Run = %v, want a *PoisonError", err)
			}
			if pe.EventID != "5" || pe.Reason != c.reason || pe.Pos != t3.End || pe.Resume != t2.End || pe.Row != "bin.000001:500" {
				t.Errorf("PoisonError %+v", pe)
			}
			if !errors.Is(err, ErrPoison) || !errors.Is(err, c.errLike) || !IsFatal(err) {
				t.Errorf("%v: not ErrPoison / %v / fatal", err, c.errLike)
			}
			for _, want := range []string{"event 5", string(c.reason), "bin.000001:3000", "bin.000001:2000", "on-poison: dead-letter"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not name %q", err, want)
				}
			}
			if len(acks) == 0 || acks[len(acks)-1] != t2.End {
				t.Errorf("acks %v, want the last to be %v", acks, t2.End)
			}
			if got := ids(fk, "im.message.created"); got != "1,2,3" {
				t.Errorf("written %s, want 1,2,3", got)
			}
			if w.DeadLettered() != 0 {
				t.Error("dead letters under the fail policy")
			}
		})
	}
}

// A poison record in the very first transaction: nothing acknowledged.
func TestFailPolicyFirstTransaction(t *testing.T) {
	fk := &fakeKafka{}
	err, acks, _ := run(t, testConfig(PolicyFail), fk, txn(1000, ev(1, 1, `{}`), ev(2, 1, `nope`)), txn(2000, ev(3, 1, `{}`)))
	var pe *PoisonError
	if !errors.As(err, &pe) || !pe.Resume.IsZero() || !strings.Contains(err.Error(), "position this run started from") {
		t.Fatalf("Run = %v", err)
	}
	if len(acks) != 0 || len(fk.written) != 0 {
		t.Fatalf("acks %v, written %d", acks, len(fk.written))
	}
}

// Dead-letter policy: each poison record becomes a dead letter in its place,
// the rest goes on in order, everything is acknowledged.
func TestDeadLetterPolicy(t *testing.T) {
	big := `"` + strings.Repeat("x", 5000) + `"`
	badTopic := ev(5, 2, `{}`)
	badTopic.EventType = "a b"
	fk := &fakeKafka{}
	t1 := txn(1000, ev(1, 1, `{}`))
	t2 := txn(2000, ev(2, 1, `{}`), ev(3, 1, `{"a":`), ev(4, 2, big), badTopic, ev(6, 1, `{}`))
	t3 := txn(3000, ev(7, 2, `{}`))
	err, acks, w := run(t, testConfig(PolicyDeadLetter), fk, t1, t2, t3)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(acks) == 0 || acks[len(acks)-1] != t3.End {
		t.Fatalf("acks %v", acks)
	}
	var order []string
	for _, m := range fk.written {
		order = append(order, m.Topic+":"+header(&m, router.HeaderEventID))
	}
	want := "im.message.created:1,im.message.created:2,dlq.test:3,dlq.test:4,dlq.test:5,im.message.created:6,im.message.created:7"
	if got := strings.Join(order, ","); got != want {
		t.Fatalf("written\n %s\nwant\n %s", got, want)
	}
	if w.DeadLettered() != 3 {
		t.Errorf("DeadLettered = %d, want 3", w.DeadLettered())
	}
	reasons := map[string]string{"3": "invalid_json", "4": "too_large", "5": "invalid_topic"}
	topics := map[string]string{"3": "im.message.created", "4": "im.message.created", "5": "im.a b"}
	for _, m := range fk.written {
		if m.Topic != dlq {
			continue
		}
		h := headers(&m)
		id := h[router.HeaderEventID]
		if h[HeaderDLQReason] != reasons[id] || h[HeaderDLQTopic] != topics[id] || h[HeaderDLQError] == "" || h[router.HeaderTxnEnd] != "bin.000001:2000" {
			t.Errorf("dead letter %s headers %v", id, h)
		}
		if id == "4" && (len(m.Value) != 0 || h[HeaderDLQPayloadBytes] != "5002") {
			t.Errorf("too large dead letter: value %d, headers %v", len(m.Value), h)
		}
		if id == "3" && string(m.Value) != `{"a":` {
			t.Errorf("invalid json dead letter value %q", m.Value)
		}
	}
}

// The broker rejects a partition batch as too large: its records are sent
// one at a time in order; a record rejected alone is dead-lettered in its
// place; records only rejected as part of a batch are written.
func TestBrokerTooLargeDeadLetter(t *testing.T) {
	fk := &fakeKafka{limit: 1000}
	pl := func(n int) string { return `"` + strings.Repeat("y", n-2) + `"` }
	t1 := txn(1000, ev(1, 1, pl(300)), ev(2, 2, pl(300)))
	t2 := txn(2000, ev(3, 1, pl(1200)), ev(4, 2, pl(300)))
	t3 := txn(3000, ev(5, 1, pl(300)), ev(6, 2, pl(300)), ev(7, 2, pl(300)), ev(8, 3, pl(10)))
	cfg := testConfig(PolicyDeadLetter)
	cfg.BatchBytes = 100000
	err, acks, w := run(t, cfg, fk, t1, t2, t3)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(acks) == 0 || acks[len(acks)-1] != t3.End {
		t.Fatalf("acks %v", acks)
	}
	// Per partition (key), the order of what was written.
	per := map[string][]string{}
	for _, m := range fk.written {
		per[m.Topic+"/"+string(m.Key)] = append(per[m.Topic+"/"+string(m.Key)], header(&m, router.HeaderEventID))
	}
	for p, want := range map[string]string{"im.message.created/1": "1,5", "im.message.created/2": "2,4,6,7",
		"im.message.created/3": "8", dlq + "/1": "3"} {
		if got := strings.Join(per[p], ","); got != want {
			t.Errorf("partition %s: %s, want %s", p, got, want)
		}
	}
	if w.DeadLettered() != 1 {
		t.Errorf("DeadLettered = %d", w.DeadLettered())
	}
	for _, m := range fk.written {
		if h := headers(&m); m.Topic == dlq && (h[HeaderDLQReason] != "broker_too_large" || len(m.Value) != 0 || h[HeaderDLQPayloadBytes] != "1200") {
			t.Errorf("dead letter %v value %d", h, len(m.Value))
		}
	}
}

// Under the fail policy the broker-side culprit stops the resend: the
// transactions before its own are acknowledged, nothing after it in the
// round's order is sent again (partitions whose batch the broker accepted
// are written, as in any failed round).
func TestBrokerTooLargeFail(t *testing.T) {
	fk := &fakeKafka{limit: 1000}
	pl := func(n int) string { return `"` + strings.Repeat("y", n-2) + `"` }
	t1 := txn(1000, ev(1, 1, pl(300)), ev(2, 2, pl(300)))
	t2 := txn(2000, ev(3, 1, pl(1200)), ev(4, 2, pl(300)))
	t3 := txn(3000, ev(5, 1, pl(300)), ev(6, 2, pl(300)))
	cfg := testConfig(PolicyFail)
	cfg.BatchBytes = 100000
	err, acks, _ := run(t, cfg, fk, t1, t2, t3)
	var pe *PoisonError
	if !errors.As(err, &pe) || pe.EventID != "3" || pe.Reason != ReasonBrokerTooLarge || pe.Pos != t2.End || !IsFatal(err) {
		t.Fatalf("Run = %v", err)
	}
	if len(acks) != 1 || acks[0] != t1.End {
		t.Fatalf("acks %v, want [%v]", acks, t1.End)
	}
	// Conversation 2's batch was accepted; of conversation 1's, only what
	// precedes the culprit was sent again.
	if got := ids(fk, "im.message.created"); got != "2,4,6,1" {
		t.Fatalf("written %s, want 2,4,6,1", got)
	}
}

// A retryable failure while resending stops the round with a retryable
// *WriteError; nothing after it is sent.
func TestBrokerTooLargeResendRetryable(t *testing.T) {
	pl := func(n int) string { return `"` + strings.Repeat("y", n-2) + `"` }
	fk := &fakeKafka{limit: 1000}
	t1 := txn(1000, ev(1, 1, pl(600)), ev(2, 1, pl(600)), ev(3, 1, pl(10)))
	cfg := testConfig(PolicyDeadLetter)
	cfg.BatchBytes = 100000
	w := newWriter(cfg, router.New(router.Config{Topic: "im.{event_type}"}, router.Reserved{}), fk, zap.NewNop())
	// Fail event 2's resend with a transient error: the first round fails
	// as too large (1200 > 1000), then 1 is written and 2 fails.
	fk2 := &failAfter{fakeKafka: fk, after: 2, id: "2", err: kafka.NotEnoughReplicas}
	w.kw = fk2
	in := make(chan binlog.Txn, 1)
	in <- t1
	close(in)
	go func() {
		for range w.Acks() {
		}
	}()
	err := w.Run(context.Background(), in)
	var we *WriteError
	if !errors.As(err, &we) || we.EventID != "2" || IsFatal(err) {
		t.Fatalf("Run = %v, want a retryable WriteError for event 2", err)
	}
	if got := ids(fk, "im.message.created"); got != "1" {
		t.Fatalf("written %s, want 1", got)
	}
}

// failAfter fails the record with event id id, from the after-th call on.
type failAfter struct {
	*fakeKafka
	after int
	id    string
	err   error
}

func (f *failAfter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if f.calls+1 >= f.after && len(msgs) == 1 && header(&msgs[0], router.HeaderEventID) == f.id {
		f.calls++
		return kafka.WriteErrors{f.err}
	}
	return f.fakeKafka.WriteMessages(ctx, msgs...)
}

// A dead-letter write that fails stops with a retryable error naming the
// dead-letter topic; the dead-letter topic rejecting the value as too large
// gets the record without its value.
func TestDeadLetterWriteFailure(t *testing.T) {
	fk := &fakeKafka{fail: map[string]error{"2": kafka.UnknownTopicOrPartition}}
	err, acks, _ := run(t, testConfig(PolicyDeadLetter), fk, txn(1000, ev(1, 1, `{}`)), txn(2000, ev(2, 1, `x`)))
	var we *WriteError
	if !errors.As(err, &we) || we.Topic != dlq || IsFatal(err) || !strings.Contains(err.Error(), "dead letter (invalid_json)") {
		t.Fatalf("Run = %v", err)
	}
	if len(acks) != 1 || acks[0].Pos != 1000 {
		t.Fatalf("acks %v", acks)
	}

	fk = &fakeKafka{limit: 5}
	cfg := testConfig(PolicyDeadLetter)
	err, _, w := run(t, cfg, fk, txn(1000, ev(1, 1, `not json at all`)))
	if err != nil || w.DeadLettered() != 1 || len(fk.written) != 1 || len(fk.written[0].Value) != 0 {
		t.Fatalf("Run = %v, written %+v", err, fk.written)
	}
}

// frag is a fragment of the large transaction ending at commit (Txn.Partial
// when partial), read after the transaction ending at end.
func frag(end, commit uint32, partial bool, events ...binlog.Event) binlog.Txn {
	t := txn(end, events...)
	if partial {
		t.Partial, t.Commit = true, binlog.Position{File: "bin.000001", Pos: commit, GTID: "0-1-" + strconv.Itoa(int(commit))}
	} else {
		t.End = binlog.Position{File: "bin.000001", Pos: commit, GTID: "0-1-" + strconv.Itoa(int(commit))}
	}
	return t
}

// evs returns events from..to of conversations 1 to 3 with valid payloads,
// except poison (its id) with a payload that is not JSON.
func evs(from, to, poison uint64) []binlog.Event {
	var out []binlog.Event
	for id := from; id <= to; id++ {
		pl := `{}`
		if id == poison {
			pl = `{"a":`
		}
		out = append(out, ev(id, int64(id%3+1), pl))
	}
	return out
}

// Issue 29 item 4: under the fail policy nothing of the poison row's
// transaction (of its fragment, for a large transaction passed on in
// fragments) is written, even when it spans several rounds: the fragments
// before its own are written and the error says how many rows; under the
// dead-letter policy the row is dead-lettered and every other is written
// in order.
func TestFailPolicyLargeTransaction(t *testing.T) {
	ids1to := func(n uint64) string {
		var s []string
		for id := uint64(1); id <= n; id++ {
			s = append(s, strconv.FormatUint(id, 10))
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		name      string
		txns      []binlog.Txn
		poison    string
		written   string // event ids written, in order
		published int    // PoisonError.Published
		first     string
		last      string
		says      []string
	}{
		{"whole transaction over several rounds", []binlog.Txn{txn(1000, evs(1, 2, 0)...), txn(2000, evs(3, 20, 15)...), txn(3000, evs(21, 22, 0)...)},
			"15", "1,2", 0, "", "", []string{"nothing of its transaction was published", "skip the whole transaction (none of its rows is then published): cdc-outbox checkpoint set bin.000001:2000"}},
		{"first fragment", []binlog.Txn{txn(1000, evs(1, 2, 0)...), frag(1000, 5000, true, evs(3, 12, 9)...), frag(1000, 5000, true, evs(13, 22, 0)...), frag(1000, 5000, false, evs(23, 25, 0)...)},
			"9", "1,2", 0, "", "", []string{"nothing of its transaction was published", "transaction ending at bin.000001:5000"}},
		{"later fragment", []binlog.Txn{txn(1000, evs(1, 2, 0)...), frag(1000, 5000, true, evs(3, 12, 0)...), frag(1000, 5000, true, evs(13, 22, 19)...), frag(1000, 5000, false, evs(23, 25, 0)...)},
			"19", ids1to(12), 10, "3", "12", []string{"the 10 rows of its fragments before this row's (event 3 to event 12) were published, and are again at every restart",
				"skip the rest of the transaction (its rows after those 10 are then not published): cdc-outbox checkpoint set bin.000001:5000",
				"the checkpoint stays at the end of the transaction before it (bin.000001:1000"}},
		{"final part", []binlog.Txn{txn(1000, evs(1, 2, 0)...), frag(1000, 5000, true, evs(3, 12, 0)...), frag(1000, 5000, true, evs(13, 22, 0)...), frag(1000, 5000, false, evs(23, 30, 28)...)},
			"28", ids1to(22), 20, "3", "22", []string{"the 20 rows of its fragments"}},
		{"after a large transaction", []binlog.Txn{frag(0, 5000, true, evs(1, 10, 0)...), frag(0, 5000, false, evs(11, 12, 0)...), txn(6000, evs(13, 20, 17)...)},
			"17", ids1to(12), 0, "", "", []string{"nothing of its transaction was published"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(PolicyFail)
			cfg.BatchSize = 4 // every transaction or fragment spans rounds
			fk := &fakeKafka{}
			err, _, _ := run(t, cfg, fk, c.txns...)
			var pe *PoisonError
			if !errors.As(err, &pe) || pe.EventID != c.poison || pe.Published != c.published || pe.FirstID != c.first || pe.LastID != c.last {
				t.Fatalf("Run = %v (%+v), want a PoisonError for event %s, %d published (%s to %s)", err, pe, c.poison, c.published, c.first, c.last)
			}
			if got := ids(fk, "im.message.created"); got != c.written {
				t.Errorf("written %s, want %s", got, c.written)
			}
			for _, want := range c.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}

			// dead-letter: the poison row in its place, every other row in order.
			cfg.OnPoison = PolicyDeadLetter
			fk = &fakeKafka{}
			if err, _, _ := run(t, cfg, fk, c.txns...); err != nil {
				t.Fatalf("dead-letter: Run = %v", err)
			}
			var all []string
			for _, x := range c.txns {
				for _, e := range x.Events {
					all = append(all, e.EventID())
				}
			}
			var order []string
			for _, m := range fk.written {
				order = append(order, header(&m, router.HeaderEventID))
			}
			if got := strings.Join(order, ","); got != strings.Join(all, ",") || ids(fk, dlq) != c.poison {
				t.Errorf("dead-letter: written %s (dead-lettered %s), want %s with %s dead-lettered", got, ids(fk, dlq), strings.Join(all, ","), c.poison)
			}
		})
	}
}

// The error of a broker_too_large record says that what was sent with it
// may be published: it is found only by sending.
func TestPoisonErrorBrokerTooLarge(t *testing.T) {
	err := &PoisonError{EventID: "3", Reason: ReasonBrokerTooLarge, Pos: binlog.Position{File: "b.000001", Pos: 200}, Err: ErrRecordTooLarge}
	for _, want := range []string{"found only by sending it", "may have been published", "skip the whole transaction", "checkpoint set b.000001:200"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// With a format that encodes the value, the JSON check judges the payload
// column, not the record's value: StringConverter's Struct{...} of an
// envelope or an expanded payload is publishable, and an invalid JSON
// payload is poison although JsonConverter made a valid JSON string of it.
func TestCheckEventEncodedValue(t *testing.T) {
	cols := []mapping.Column{{Name: "id", DataType: "varchar"}, {Name: "aggregatetype", DataType: "varchar"}, {Name: "aggregateid", DataType: "varchar"},
		{Name: "payload", DataType: "json", Nullable: true}, {Name: "region", DataType: "varchar"}}
	r := router.New(router.Config{Topic: "im.events"}, router.Reserved{})
	dbz := func(format string, more func(*mapping.Config)) mapping.Config {
		c := mapping.Config{Preset: mapping.PresetDebezium, Format: format}
		if more != nil {
			more(&c)
		}
		return c
	}
	for _, c := range []struct {
		name    string
		cfg     mapping.Config
		payload string
		value   string
		want    Reason
	}{
		{"string, envelope fields", dbz(mapping.FormatString, func(c *mapping.Config) { c.EnvelopeFields = []string{"region"} }), `{"a": 1}`, `Struct{payload={"a":1},region=eu}`, ""},
		{"string, expanded", dbz(mapping.FormatString, func(c *mapping.Config) { c.ExpandJSONPayload = true }), `{"a": 1}`, `Struct{a=1}`, ""},
		{"json-plain, an invalid payload", dbz(mapping.FormatJSONPlain, nil), `{"a":`, `"{\"a\":"`, ReasonInvalidJSON},
		{"string, an invalid payload", dbz(mapping.FormatString, nil), `{"a":`, `{"a":`, ReasonInvalidJSON},
	} {
		m, err := mapping.Compile(c.cfg, "", "shop.outbox", cols)
		if err != nil {
			t.Fatal(err)
		}
		vals := make([][]byte, len(m.Cols))
		for name, v := range map[string]string{"id": "e1", "aggregatetype": "Order", "aggregateid": "k", "payload": c.payload, "region": "eu"} {
			if s := m.Slot(name); s >= 0 {
				vals[s] = []byte(v)
			}
		}
		e := binlog.Event{Table: &binlog.Table{Schema: "shop", Name: "outbox", Mapping: m}, Vals: vals, Payload: vals[m.Payload]}
		rec, rerr := r.Route(&e, binlog.Position{})
		p, err := CheckEvent(&e, &rec, rerr, 4096)
		if err != nil || string(rec.Value) != c.value {
			t.Fatalf("%s: value %s, error %v; want value %s", c.name, rec.Value, err, c.value)
		}
		if got := Reason(""); p != nil {
			got = p.Reason
			if got != c.want {
				t.Errorf("%s: poison %s (%v), want %q", c.name, got, p.Err, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%s: publishable, want %s", c.name, c.want)
		}
	}
}
