package sink

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
)

// undecodable is an event the binlog reader could not decode (a NULL
// payload): Err is set, the id and position are known.
func undecodable(id uint64, conv int64) binlog.Event {
	e := ev(id, conv, "")
	e.Payload = nil
	e.Err = fmt.Errorf("%w: column payload: NULL (row event at bin.000001:%d)", binlog.ErrDecode, id*100)
	return e
}

// A row the reader could not decode stops the publisher under fail, with
// its event id, row position and transaction end, after acknowledging the
// transactions before it.
func TestUndecodableRowFail(t *testing.T) {
	fk := &fakeKafka{}
	err, acks, _ := run(t, testConfig(PolicyFail), fk, txn(150, ev(1, 1, `{}`)), txn(250, undecodable(2, 1)), txn(350, ev(3, 1, `{}`)))
	var pe *PoisonError
	if !errors.As(err, &pe) || pe.Reason != ReasonUndecodable || !errors.Is(err, binlog.ErrDecode) {
		t.Fatalf("err = %v, want a PoisonError (undecodable) wrapping binlog.ErrDecode", err)
	}
	if pe.EventID != "2" || pe.Row != "bin.000001:200" || pe.Pos.Pos != 250 {
		t.Errorf("poison error names event %s row %s end %s, want 2, bin.000001:200, bin.000001:250", pe.EventID, pe.Row, pe.Pos)
	}
	if !strings.Contains(err.Error(), "checkpoint set bin.000001:250") {
		t.Errorf("the error does not name the way past (checkpoint set to the transaction's end): %v", err)
	}
	if len(acks) != 1 || acks[0].Pos != 150 || ids(fk, "im.message.created") != "1" {
		t.Errorf("acks %v, written %q", acks, ids(fk, "im.message.created"))
	}
}

// Under dead-letter, an undecodable row becomes a dead letter in its place
// and publishing goes on.
func TestUndecodableRowDeadLetter(t *testing.T) {
	fk := &fakeKafka{}
	err, acks, w := run(t, testConfig(PolicyDeadLetter), fk, txn(150, ev(1, 1, `{}`)), txn(250, undecodable(2, 1)), txn(350, ev(3, 1, `{}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(fk, dlq); got != "2" {
		t.Fatalf("dead letters %q, want 2", got)
	}
	if got := ids(fk, "im.message.created"); got != "1,3" {
		t.Fatalf("records %q, want 1,3", got)
	}
	for _, m := range fk.written {
		if m.Topic == dlq {
			h := headers(&m)
			if h[HeaderDLQReason] != string(ReasonUndecodable) || !strings.Contains(h[HeaderDLQError], "column payload: NULL") || h[router.HeaderTxnEnd] != "bin.000001:250" {
				t.Errorf("dead letter headers %v", h)
			}
		}
	}
	if w.DeadLettered() != 1 || len(acks) == 0 || acks[len(acks)-1].Pos != 350 {
		t.Errorf("dead lettered %d, acks %v", w.DeadLettered(), acks)
	}
}

// An event_type whose topic is the dead-letter topic is poison (the
// router, built with it reserved, refuses it): no normal record is written
// to the dead-letter topic.
func TestEventTypeNamingTheDeadLetterTopic(t *testing.T) {
	for _, policy := range []string{PolicyFail, PolicyDeadLetter} {
		cfg := testConfig(policy)
		cfg.DeadLetterTopic = "im.dlq"
		fk := &fakeKafka{}
		e := ev(2, 1, `{}`)
		e.EventType = "dlq"
		err, _, _ := run(t, cfg, fk, txn(150, ev(1, 1, `{}`)), txn(250, e))
		for _, m := range fk.written {
			if m.Topic == "im.dlq" && headers(&m)[HeaderDLQReason] == "" {
				t.Errorf("%s: a normal record was written to the dead-letter topic: %v", policy, headers(&m))
			}
		}
		var pe *PoisonError
		switch policy {
		case PolicyFail:
			if !errors.As(err, &pe) || pe.Reason != ReasonInvalidTopic || pe.EventID != "2" || !strings.Contains(err.Error(), "it is kafka.dead-letter-topic") {
				t.Errorf("fail: err = %v, want an invalid_topic poison error naming the dead-letter topic", err)
			}
		case PolicyDeadLetter:
			if err != nil || ids(fk, "im.dlq") != "2" {
				t.Errorf("dead-letter: err %v, dead letters %q", err, ids(fk, "im.dlq"))
			}
		}
	}
}

// The records of a transaction passed on in fragments carry its own end
// (Txn.Commit) as binlog_txn_end, and a poison error in a fragment names
// it, while the acknowledged position stays at the previous
// transaction's end until the final part.
func TestFragmentsNameTheirOwnTransaction(t *testing.T) {
	own := binlog.Position{File: "bin.000001", Pos: 900, GTID: "0-1-26", GTIDSet: "0-1-26"}
	prev := binlog.Position{File: "bin.000001", Pos: 150, GTID: "0-1-25"}
	frag := binlog.Txn{Events: []binlog.Event{ev(2, 1, `{}`), ev(3, 1, `{}`)}, End: prev, Commit: own, Partial: true}
	last := binlog.Txn{Events: []binlog.Event{ev(4, 1, `{}`)}, End: own}
	fk := &fakeKafka{}
	err, acks, _ := run(t, testConfig(PolicyFail), fk, txn(150, ev(1, 1, `{}`)), frag, last)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range fk.written {
		h := headers(&m)
		want := "bin.000001:900"
		if h[router.HeaderEventID] == "1" {
			want = "bin.000001:150"
		}
		if h[router.HeaderTxnEnd] != want {
			t.Errorf("event %s: binlog_txn_end %s, want %s", h[router.HeaderEventID], h[router.HeaderTxnEnd], want)
		}
	}
	if acks[len(acks)-1].Pos != 900 {
		t.Errorf("acks %v", acks)
	}
	for _, a := range acks {
		if a.Pos != 150 && a.Pos != 900 {
			t.Errorf("acknowledged %s: inside the transaction", a)
		}
	}

	bad := frag
	bad.Events = []binlog.Event{ev(2, 1, `{}`), ev(3, 1, `{"a":`)}
	err, _, _ = run(t, testConfig(PolicyFail), &fakeKafka{}, txn(150, ev(1, 1, `{}`)), bad, last)
	var pe *PoisonError
	if !errors.As(err, &pe) || pe.Pos != own || !strings.Contains(err.Error(), "transaction ending at bin.000001:900 gtid=0-1-26") {
		t.Fatalf("err = %v, want a poison error naming the transaction's own end %s", err, own)
	}
	if pe.Resume.Pos != 150 {
		t.Errorf("resume %s, want the previous transaction's end", pe.Resume)
	}
}
