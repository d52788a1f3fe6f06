//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/sink"
)

// check runs run's validation of the mapping (one function,
// pipeline.Checked) and checks the topics the mapping routes to, not the
// unused router.topic: (c) a good debezium mapping over rows whose
// aggregatetype routes to an existing topic exits 0; (b) a row whose
// value routes to a topic that does not exist exits 1 naming the topic
// and the template; (a) a mapping naming a column the table lacks exits
// 1 naming the setting, the column and the fix, and run refuses it with
// the same message (exit 1). With a sources list, each source's mapping
// and topics are checked under its own "source" line.
func TestCheckMapping(t *testing.T) {
	e := newEnv(t)
	table := "cm_" + e.name
	if len(table) > 64 {
		table = table[:64]
	}
	present, missing := "chk"+runID, "chkgone"+runID
	createTopic(t, "outbox.event."+present, partitions)
	e.exec("CREATE TABLE " + table + ` (
		id VARCHAR(36) NOT NULL PRIMARY KEY,
		aggregatetype VARCHAR(255) NOT NULL,
		aggregateid VARCHAR(255) NOT NULL,
		type VARCHAR(255) NOT NULL,
		payload JSON)`)
	t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + table) })
	e.outbox = table
	e.exec(fmt.Sprintf("INSERT INTO %s VALUES (UUID(), '%s', '1', 'OrderCreated', '{}'), (UUID(), '%s', '2', 'OrderCreated', '{}')", table, present, present))
	full := mysqlDB + "." + table
	template := "source.mapping topic template outbox.event.{aggregatetype} of table " + full

	// (c) a good mapping.
	e.sourceExtra = "  mapping: {preset: debezium}\n"
	out, code := e.cli(nil, "check")
	for _, want := range []string{
		"OK    outbox       table " + full + " fits its mapping (source.mapping): id id, key aggregateid, payload payload, topic template outbox.event.{aggregatetype}",
		"OK    topic        outbox.event." + present + " (" + template + ") exists, ",
		"result: OK",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("check of a good mapping: exit %d, want 0 with %q:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, e.topic) {
		t.Fatalf("check of a mapping checked the unused router.topic %s:\n%s", e.topic, out)
	}

	// (b) a value routing to a topic that does not exist.
	e.exec(fmt.Sprintf("INSERT INTO %s VALUES (UUID(), '%s', '3', 'OrderCreated', '{}')", table, missing))
	out, code = e.cli(nil, "check")
	want := "FAIL  topic        outbox.event." + missing + " (" + template + ") does not exist: create it"
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "OK    topic        outbox.event."+present) {
		t.Fatalf("check of a template routing to a missing topic: exit %d, want 1 with %q:\n%s", code, want, out)
	}

	// (a) a mapping naming a column the table lacks: check and run refuse it alike.
	e.sourceExtra = "  mapping: {preset: debezium, key: [customer_id]}\n"
	out, code = e.cli(nil, "check")
	want = "source.mapping: mapping: table " + full + ", column customer_id (key): the table has no such column (it has id, aggregatetype, aggregateid, type, payload); add the column to the table, or map key to one of its columns in the mapping"
	if code != 1 || !strings.Contains(out, "FAIL  outbox       "+want) {
		t.Fatalf("check of a mapping naming a missing column: exit %d, want 1 with %q:\n%s", code, want, out)
	}
	p := e.launch()
	err := <-p.done
	p.done <- err // for launch's cleanup
	if c := p.cmd.ProcessState.ExitCode(); c != 1 || !logHas(p.log, want) {
		b, _ := os.ReadFile(p.log)
		t.Fatalf("run with a mapping naming a missing column: exit %d, want 1 logging %q:\n%s", c, want, tail(string(b), 10))
	}

	// Two sources sharing the top-level mapping: s0 reads the debezium
	// table (its missing topic fails), s1 an im table (its columns fail).
	other := newEnvNamed(t, t.Name()+"_1")
	e.configText = sourcesConfig([]*env{e, other}, "  mapping: {preset: debezium}\n", "")
	out, code = e.cli(nil, "check")
	s0, s1, _ := strings.Cut(out, "source s1\n")
	want0 := "FAIL  topic        outbox.event." + missing + " (" + template + ") does not exist"
	want1 := "FAIL  outbox       source.mapping: mapping: table " + mysqlDB + "." + other.outbox + ", column aggregateid (key): the table has no such column"
	if code != 1 || !strings.Contains(s0, "source s0\n") || !strings.Contains(s0, want0) || !strings.Contains(s1, want1) || strings.Contains(s1, want0) {
		t.Fatalf("check of two sources: exit %d, want 1 with %q under s0 and %q under s1:\n%s", code, want0, want1, out)
	}
}

// check's mirror line: a checkpoint.mirror-topic that does not exist is
// OK when the brokers accept its creation (asked with a validate-only
// CreateTopics: check creates nothing); one the brokers refuse (a name
// colliding with an existing topic's, "." against "_") is a FAIL naming
// checkpoint.mirror-topic and the fixes, and run stops at start with the
// same error.
func TestCheckMirrorTopic(t *testing.T) {
	e := newEnv(t)
	absent := e.topic + ".mirror"
	out, code := e.cli([]string{"CDC_OUTBOX_CHECKPOINT_MIRROR_TOPIC=" + absent}, "check")
	want := "OK    mirror       checkpoint.mirror-topic " + absent + " does not exist yet; run creates it at start"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("check with an absent mirror topic: exit %d, want 0 with %q:\n%s", code, want, out)
	}
	if _, err := sink.Partitions(context.Background(), sink.Config{Brokers: brokers}, absent); err == nil {
		t.Fatalf("check created %s", absent)
	}

	createTopic(t, e.topic+".taken", 1)
	colliding := e.topic + "_taken"
	out, code = e.cli([]string{"CDC_OUTBOX_CHECKPOINT_MIRROR_TOPIC=" + colliding}, "check")
	want = "checkpoint.mirror-topic " + colliding + " does not exist and cannot be created ("
	if code != 1 || !strings.Contains(out, "FAIL  mirror       sink: checkpoint mirror topic: "+want) || !strings.Contains(out, "set checkpoint.mirror-topic: \"\"") {
		t.Fatalf("check with a mirror topic the brokers refuse: exit %d, want 1 with %q:\n%s", code, want, out)
	}
	t.Setenv("CDC_OUTBOX_CHECKPOINT_MIRROR_TOPIC", colliding)
	p := e.launch()
	err := <-p.done
	p.done <- err
	if c := p.cmd.ProcessState.ExitCode(); c != 1 || !logHas(p.log, want) {
		b, _ := os.ReadFile(p.log)
		t.Fatalf("run with a mirror topic the brokers refuse: exit %d, want 1 logging %q:\n%s", c, want, tail(string(b), 10))
	}
}
