//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// Issue 29 item 2: a GTID domain of the stored set deleted by the
// administrator (FLUSH BINARY LOGS DELETE_DOMAIN_ID=(N), after purging
// the files holding its transactions) with nothing after the stored
// transaction: the restart resumes with an info line, publishing what
// follows, instead of refusing the domain as one "the server never had";
// and again once no binlog names the domain any more. The domain is the
// test's own, but PURGE BINARY LOGS and DELETE_DOMAIN_ID act on the whole
// server: run it on a private server (CDC_STACK_DIR, CDC_MYSQL_PORT; see
// scripts/dev-stack.sh), or in CI's.
func TestGTIDDeletedDomainResumes(t *testing.T) {
	onlyMariaDB(t, "MariaDB GTID domains (FLUSH BINARY LOGS DELETE_DOMAIN_ID)")
	e := newEnv(t)
	e.positionMode = "gtid"
	domain := e.serverID // unique to the test
	p := e.start()
	e.exec(fmt.Sprintf("SET SESSION gtid_domain_id = %d", domain),
		fmt.Sprintf("INSERT INTO `%s` (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('message.created', 1, 1, 1, 1, 2, '{}')", e.outbox))
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	if recs := pollUntil(t, cons, 1, 30*time.Second); len(recs) != 1 {
		t.Fatalf("%d records of domain %d, want 1", len(recs), domain)
	}
	var stored string
	for deadline := time.Now().Add(30 * time.Second); !hasDomain(stored, int(domain)); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the checkpoint's GTID set %q does not reach domain %d", stored, domain)
		}
		if cp := e.checkpoint(); cp != nil {
			stored = cp.GTIDSet
		}
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// The administrator deletes the domain: its transactions' file purged
	// first (MariaDB refuses otherwise); the older files' Gtid_list still
	// name it.
	e.exec("FLUSH BINARY LOGS")
	cur, _ := e.masterPos()
	e.purgeTo(cur)
	e.exec(fmt.Sprintf("FLUSH BINARY LOGS DELETE_DOMAIN_ID=(%d)", domain))
	if state := e.variable("@@gtid_binlog_state"); hasDomain(state, int(domain)) {
		t.Fatalf("domain %d still in @@gtid_binlog_state %q", domain, state)
	}
	afterDelete, _ := e.masterPos()
	e.insertRaw([]string{row("'message.created'", "1", 2, `'{}'`)})

	p = e.start()
	if !logHas(p.log, "deleted from the server (FLUSH BINARY LOGS DELETE_DOMAIN_ID)") || logHas(p.log, "NOT published") {
		t.Fatal("the restart after the domain's deletion did not say it resumes with the deleted domain (or warned of a skip)")
	}
	if recs := pollUntil(t, cons, 1, 30*time.Second); len(recs) != 1 || recs[0].Headers["seq_no"] != "2" {
		t.Fatalf("after the deletion: %d records %v, want the row written after it", len(recs), recs)
	}
	_, gtid := e.insertRaw([]string{row("'message.created'", "1", 3, `'{}'`)})
	e.waitCheckpointGTID(gtid) // a checkpoint in a file opened after the deletion
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if cp := e.checkpoint(); cp == nil || cp.File < afterDelete {
		t.Fatalf("checkpoint %+v, want one in %s or later", cp, afterDelete)
	}

	// No binlog names the domain any more: the checkpoint, a position of
	// this server's binlogs, still resumes.
	e.purgeTo(afterDelete)
	p = e.start()
	if !logHas(p.log, "no binlog names it any more") {
		t.Fatal("the restart once no binlog names the domain did not say it resumes with the deleted domain")
	}
	e.insertRaw([]string{row("'message.created'", "1", 4, `'{}'`)})
	recs := pollUntil(t, cons, 2, 30*time.Second)
	if len(recs) != 2 || !strings.Contains(recs[0].Headers["seq_no"]+recs[1].Headers["seq_no"], "4") {
		t.Fatalf("after the purge: %d records %v, want rows 3 and 4", len(recs), recs)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
