//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// Other schemas and tables in the same binlog, DDL and TRUNCATE on them, a
// table of the same name in another schema, and a big unrelated
// transaction pass by without effect: exactly the outbox rows arrive.
func TestUnrelatedTrafficPassesBy(t *testing.T) {
	e := newEnv(t)
	e.start()
	c := e.sql()
	defer c.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	other := "it_other_" + runID
	exec("CREATE DATABASE IF NOT EXISTS " + other)
	t.Cleanup(func() { c2 := e.sql(); c2.Execute("DROP DATABASE IF EXISTS " + other); c2.Close() })
	// Same table name as the outbox, other schema.
	exec(fmt.Sprintf("CREATE TABLE %s.`%s` LIKE %s.`%s`", other, e.outbox, mysqlDB, e.outbox))
	exec(fmt.Sprintf("CREATE TABLE %s.noise (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200))", other))

	w := e.writer()
	plan := workload.Generate(77, 0, 20, 600, 1, 30, 100)
	for i, txn := range plan.Txns {
		if err := w.Txn(txn, false); err != nil {
			t.Fatal(err)
		}
		switch i % 5 {
		case 0:
			exec(fmt.Sprintf("INSERT INTO %s.`%s` (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('message.created', 424242, 1, 1, 1, 1, '{}')", other, e.outbox))
		case 1:
			exec(fmt.Sprintf("ALTER TABLE %s.noise ADD COLUMN c%d INT NULL", other, i))
		case 2:
			exec(fmt.Sprintf("TRUNCATE TABLE %s.noise", other))
		case 3:
			// A big unrelated transaction: 20,000 rows in one INSERT … SELECT chain.
			exec("BEGIN")
			exec(fmt.Sprintf("INSERT INTO %s.noise (v) VALUES %s", other, strings.TrimSuffix(strings.Repeat("(REPEAT('n',150)),", 1000), ",")))
			for k := 0; k < 4; k++ {
				exec(fmt.Sprintf("INSERT INTO %s.noise (v) SELECT v FROM %s.noise", other, other))
			}
			exec("COMMIT")
		}
	}
	rep := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
	if rep.Records != plan.Total || rep.Duplicates != 0 {
		t.Fatalf("want exactly the %d outbox rows: %s", plan.Total, rep.String())
	}
}
