//go:build integration

package integration

import (
	"bytes"
	"context"
	bin "encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"
)

// insertRaw commits one transaction inserting rows into e's outbox, each
// given as the SQL values of (event_type, conversation_id, message_id,
// seq_no, sender_id, receiver_id, payload), in statements of at most 500
// rows; it returns the server's binlog end and @@last_gtid right after the
// commit (the transaction's own end: nothing else writes meanwhile).
func (e *env) insertRaw(rows []string) (end filePos, gtid string) {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	q := func(s string) {
		if _, err := c.Execute(s); err != nil {
			e.t.Fatalf("%.200s: %v", s, err)
		}
	}
	var before string // MySQL: the executed set, to name the transaction's own GTID
	if isMySQL() {
		r, err := binlogStatus(c)
		if err != nil {
			e.t.Fatal(err)
		}
		before, _ = r.GetStringByName(0, "Executed_Gtid_Set")
	}
	q("BEGIN")
	for len(rows) > 0 {
		n := min(len(rows), 500)
		q(fmt.Sprintf("INSERT INTO `%s` (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES %s",
			e.outbox, strings.Join(rows[:n], ",")))
		rows = rows[n:]
	}
	q("COMMIT")
	r, err := binlogStatus(c)
	if err != nil {
		e.t.Fatal(err)
	}
	if isMySQL() {
		after, _ := r.GetStringByName(0, "Executed_Gtid_Set")
		g, err := c.Execute("SELECT GTID_SUBTRACT(?, ?)", after, before)
		if err != nil {
			e.t.Fatal(err)
		}
		gtid, _ = g.GetString(0, 0)
	} else {
		g, err := c.Execute("SELECT @@last_gtid")
		if err != nil {
			e.t.Fatal(err)
		}
		gtid, _ = g.GetString(0, 0)
	}
	f, _ := r.GetString(0, 0)
	p, _ := r.GetUint(0, 1)
	return filePos{file: f, pos: uint32(p)}, gtid
}

// waitExit waits for the publisher to exit on its own and returns its code.
func (p *publisher) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("publisher still running after %s", timeout)
	}
	return -1
}

func row(typ string, conv string, seq int, payload string) string {
	return fmt.Sprintf("(%s, %s, %d, %d, 1, 2, %s)", typ, conv, seq, seq, payload)
}

// Issue 12 item 3: a NULL payload, a BIGINT UNSIGNED conversation_id of
// 2^63 and more, an empty event_type with a template topic and an
// event_type naming the dead-letter topic do not block the pipeline under
// kafka.on-poison: dead-letter: the unsigned row is published keyed by its
// decimal value, the others are dead-lettered, and what follows is
// published.
func TestPoisonRowsDoNotBlock(t *testing.T) {
	e := newEnv(t)
	e.exec(fmt.Sprintf("ALTER TABLE `%s` MODIFY payload LONGTEXT NULL, MODIFY conversation_id BIGINT UNSIGNED NOT NULL", e.outbox))
	dlq := e.deadLetterPolicy()
	mc := e.topic + ".message.created"
	createTopic(t, mc, 3)
	t.Setenv("CDC_OUTBOX_ROUTER_TOPIC", e.topic+".{event_type}")
	p := e.start()
	for _, r := range []string{
		row("'message.created'", "1", 1, `'{}'`),
		row("'message.created'", "1", 2, "NULL"),
		row("'message.created'", "9223372036854775813", 1, `'{}'`),
		row("''", "1", 3, `'{}'`),
		row("'dlq'", "1", 4, `'{}'`), // topic e.topic+".dlq": the dead-letter topic
		row("'message.created'", "1", 5, `'{}'`),
	} {
		e.insertRaw([]string{r})
	}
	recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, mc), 3, time.Minute)
	got := map[string]string{}
	for _, r := range recs {
		got[r.Key] += r.Headers["seq_no"] + ","
	}
	if fmt.Sprint(got) != fmt.Sprint(map[string]string{"1": "1,5,", "9223372036854775813": "1,"}) {
		t.Fatalf("published (key: seq_nos) %v, want 1: 1,5 and 9223372036854775813: 1", got)
	}
	dead := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, dlq), 3, 30*time.Second)
	reasons := map[string]string{}
	for _, r := range dead {
		reasons[r.Headers["seq_no"]] = r.Headers["dlq_reason"]
		if r.Headers["event_id"] == "" || r.Headers["binlog_pos"] == "" || r.Headers["binlog_txn_end"] == "" {
			t.Errorf("dead letter without event id or positions: %v", r.Headers)
		}
	}
	if fmt.Sprint(reasons) != fmt.Sprint(map[string]string{"2": "undecodable", "3": "invalid_topic", "4": "invalid_topic"}) {
		t.Fatalf("dead letters (seq_no: reason) %v", reasons)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}

// Issue 12 items 3 and 4: under kafka.on-poison: fail a NULL payload stops
// the publisher with an error naming the event id, the row position, the
// transaction's own end and GTID and the command that skips it.
func TestPoisonNullPayloadFail(t *testing.T) {
	e := newEnv(t)
	e.exec(fmt.Sprintf("ALTER TABLE `%s` MODIFY payload LONGTEXT NULL", e.outbox))
	p := e.start()
	e.insertRaw([]string{row("'message.created'", "1", 1, `'{}'`)})
	end, gtid := e.insertRaw([]string{row("'message.created'", "1", 2, "NULL")})
	if code := p.waitExit(t, time.Minute); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	ids := e.eventIDs()
	for _, want := range []string{
		"poison record (undecodable): event " + ids["1/2"],
		"column payload: NULL",
		fmt.Sprintf("transaction ending at %s:%d gtid=%s", end.file, end.pos, gtid),
		fmt.Sprintf("cdc-outbox checkpoint set %s:%d", end.file, end.pos),
	} {
		if !logHas(p.log, want) {
			t.Errorf("the log does not say %q", want)
		}
	}
}

// Issue 12 item 4: the records of a transaction sent in fragments (more
// than 2,000 rows) all carry that transaction's own end and GTID as
// binlog_txn_end and gtid, and a poison row in a later fragment names it;
// binlog_pos is where the row event starts (an event boundary).
func TestFragmentedTransactionPositions(t *testing.T) {
	e := newEnv(t)
	e.textPayload()
	p := e.start()
	e.insertRaw([]string{row("'message.created'", "1", 1, `'{}'`)})
	var rows []string
	for i := 0; i < 4500; i++ { // fragments of 2,000 rows: the poison row is in the second, not the final part
		pl := `'{"n":` + fmt.Sprint(i) + `}'`
		if i == 2300 {
			pl = `'{not json'`
		}
		rows = append(rows, row("'message.created'", fmt.Sprint(2+i%7), 2+i, pl))
	}
	end, gtid := e.insertRaw(rows)
	if code := p.waitExit(t, time.Minute); code != 1 {
		t.Fatalf("exit code %d, want 1 (poison, fail policy)", code)
	}
	want := fmt.Sprintf("transaction ending at %s:%d gtid=%s", end.file, end.pos, gtid)
	if !logHas(p.log, want) {
		t.Errorf("the poison error does not name the transaction's own end: want %q", want)
	}
	// The first fragment (2,000 rows) was written before the poison row
	// was met (not acknowledged): its records name the transaction's end.
	recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2001, 30*time.Second)
	if len(recs) < 2001 {
		t.Fatalf("%d records, want the first row and the first fragment's 2,000", len(recs))
	}
	wrong := 0
	c := e.sql()
	defer c.Close()
	checked := map[string]bool{}
	for _, r := range recs {
		if r.Headers["seq_no"] == "1" && r.Key == "1" {
			continue
		}
		if r.Headers["binlog_txn_end"] != fmt.Sprintf("%s:%d", end.file, end.pos) || r.Headers["gtid"] != gtid {
			wrong++
		}
		if bp := r.Headers["binlog_pos"]; !checked[bp] && len(checked) < 20 {
			checked[bp] = true
			fp := parseFilePos(t, bp)
			res, err := c.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT 1", fp.file, fp.pos))
			if err != nil {
				t.Fatalf("binlog_pos %s is not an event boundary: %v", bp, err)
			}
			if typ, _ := res.GetStringByName(0, "Event_type"); !strings.Contains(typ, "rows") {
				t.Errorf("binlog_pos %s: the event there is %s, want the rows event", bp, typ)
			}
		}
	}
	if wrong > 0 {
		t.Fatalf("%d of %d records of the fragmented transaction do not carry its end %s:%d and gtid %s", wrong, len(recs)-1, end.file, end.pos, gtid)
	}
}

// binlogPath returns the path of the server's binlog file (the server runs
// on this machine: the dev stack; one in a chroot, dev-stack's MySQL 9.7
// and MariaDB 11.8, names its directory inside the root, the stack's env
// names it outside: CDC_MYSQL_BINLOG_DIR).
func (e *env) binlogPath(file string) string {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	r, err := c.Execute("SELECT @@log_bin_basename")
	if err != nil {
		e.t.Fatal(err)
	}
	base, _ := r.GetString(0, 0)
	dir := filepath.Dir(base)
	if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
		dir = envOr("CDC_MYSQL_BINLOG_DIR", dir)
	}
	return filepath.Join(dir, file)
}

// masterStatus returns the server's current binlog end (SHOW BINARY LOG
// STATUS: MySQL 9 removed SHOW MASTER STATUS).
func (e *env) masterStatus() filePos {
	e.t.Helper()
	f, p := e.masterPos()
	return filePos{file: f, pos: p}
}

// Issue 12 item 5: the live stream verifies binlog event checksums. One
// flipped bit inside an outbox row event of the server's binlog file (on
// disk, before the reader reads it) stops a publisher started before it
// with a fatal error naming the position, instead of publishing the
// corrupt row.
func TestLiveStreamChecksumMismatch(t *testing.T) {
	e := newEnv(t)
	before := e.masterStatus()
	const marker = "checksum-victim-7f3a"
	end, _ := e.insertRaw([]string{row("'message.created'", "1", 1, `'{"m":"`+marker+`"}'`)})
	e.exec("FLUSH BINARY LOGS") // later writes go to a new file
	path := e.binlogPath(end.file)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(data, []byte(marker))
	if at < int(before.pos) || at > int(end.pos) {
		t.Fatalf("marker at %d, not inside the transaction %d..%d of %s", at, before.pos, end.pos, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	flip := func() {
		if _, err := f.WriteAt([]byte{data[at] ^ 0x01}, int64(at)); err != nil {
			t.Fatal(err)
		}
	}
	flip()
	t.Cleanup(func() { // restore the byte: other tests read this file
		if _, err := f.WriteAt(data[at:at+1], int64(at)); err != nil {
			t.Error(err)
		}
		f.Close()
	})
	p := e.launch("--start", fmt.Sprintf("%s:%d", before.file, before.pos))
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	poll := func() []verify.Record { // a new topic's leader may not be known yet: retry
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		recs, _ := cons.Poll(ctx)
		return recs
	}
	var code int
	for deadline := time.Now().Add(time.Minute); ; {
		if recs := poll(); len(recs) > 0 {
			t.Fatalf("the corrupt row was published: %s", recs[0].Value)
		}
		select {
		case err := <-p.done:
			p.done <- err
			code = p.cmd.ProcessState.ExitCode()
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("publisher neither published nor stopped within a minute")
			}
			continue
		}
		break
	}
	if recs := poll(); len(recs) > 0 {
		t.Fatalf("the corrupt row was published: %s", recs[0].Value)
	}
	if code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	b, _ := os.ReadFile(p.log)
	m := regexp.MustCompile(`binlog event checksum mismatch in the event starting at (\S+:\d+)`).FindSubmatch(b)
	if m == nil || !strings.HasPrefix(string(m[1]), before.file+":") {
		t.Fatalf("the log does not report a checksum mismatch with the event's position:\n%s", tail(string(b), 5))
	}
	// The event named is the rows event holding the flipped byte (MariaDB
	// 11.4+ writes no end_log_pos inside a transaction: the position is
	// counted from the transaction's start).
	named := parseFilePos(t, string(m[1]))
	var start int // the event holding the damaged byte: walk the file's events by their size fields
	for off := 4; off+13 <= len(data) && off <= at; off += int(bin.LittleEndian.Uint32(data[off+9:])) {
		start = off
	}
	if typ := replication.EventType(data[start+4]); int(named.pos) != start || !strings.Contains(typ.String(), "RowsEvent") {
		t.Fatalf("the event named starts at %d, the damaged byte %d is in the %s event starting at %d", named.pos, at, typ, start)
	}
	t.Logf("%s", tail(string(b), 1))
}

// gtidState returns a server variable such as @@gtid_binlog_pos.
func (e *env) variable(name string) string {
	e.t.Helper()
	c := e.sql()
	defer c.Close()
	r, err := c.Execute("SELECT " + name)
	if err != nil {
		e.t.Fatal(err)
	}
	v, _ := r.GetString(0, 0)
	return v
}

// waitCheckpointGTID waits until the stored checkpoint's last GTID is gtid.
func (e *env) waitCheckpointGTID(gtid string) {
	e.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cp := e.checkpoint(); cp != nil && cp.GTID == gtid {
			return
		}
	}
	e.t.Fatalf("the checkpoint did not reach gtid %s within 30 s: %+v", gtid, e.checkpoint())
}

// hasDomain reports whether a MariaDB GTID set has domain d.
func hasDomain(set string, d int) bool {
	for _, g := range strings.Split(set, ",") {
		if strings.HasPrefix(strings.TrimSpace(g), fmt.Sprintf("%d-", d)) {
			return true
		}
	}
	return false
}

// Issue 12 item 2: a MariaDB GTID domain known only from history (its
// transactions purged; only the oldest file's Gtid_list names it) is kept
// in the stored GTID set with start: earliest and start: <file>:<pos>, and
// does not block the resume; one entry per domain.
func TestGTIDHistoryDomain(t *testing.T) {
	onlyMariaDB(t, "MariaDB GTID domains (gtid_domain_id, Gtid_list history)")
	e := newEnv(t)
	e.positionMode = "gtid"
	e.exec("SET SESSION gtid_domain_id = 5",
		fmt.Sprintf("INSERT INTO `%s` (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('history', 9, 9, 9, 1, 2, '{}')", e.outbox))
	e.exec("FLUSH BINARY LOGS")
	cur, _ := e.masterPos()
	e.purgeTo(cur)
	if state := e.variable("@@gtid_binlog_state"); !hasDomain(state, 5) {
		t.Fatalf("gtid_binlog_state %s lacks domain 5", state)
	}
	seq := 0
	publish := func(p *publisher) {
		t.Helper()
		seq++
		_, gtid := e.insertRaw([]string{row("'message.created'", "1", seq, `'{}'`)})
		e.waitCheckpointGTID(gtid)
		if recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), seq, 30*time.Second); len(recs) < seq {
			t.Fatalf("%d records, want %d", len(recs), seq)
		}
	}
	check := func(what string) {
		t.Helper()
		cp := e.checkpoint()
		if cp == nil || !hasDomain(cp.GTIDSet, 5) || !hasDomain(cp.GTIDSet, 0) {
			t.Fatalf("%s: stored checkpoint %+v: its GTID set lacks domain 5 (history) or 0", what, cp)
		}
		seen := map[string]bool{}
		for _, g := range strings.Split(cp.GTIDSet, ",") {
			d := strings.SplitN(g, "-", 2)[0]
			if seen[d] {
				t.Fatalf("%s: GTID set %s has two entries for domain %s", what, cp.GTIDSet, d)
			}
			seen[d] = true
		}
	}
	restart := func(what string) {
		t.Helper()
		p := e.start()
		publish(p)
		check(what + ", after a restart")
		if code := p.stop(t, 30*time.Second); code != 0 {
			t.Fatalf("%s: exit %d", what, code)
		}
	}

	// start: earliest (the oldest file, whose Gtid_list names domain 5).
	p := e.start("--start", "earliest")
	publish(p)
	check("start earliest")
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	restart("start earliest")

	// start: <file>:<pos> past the file's start, on a new key.
	e.key += ":filepos"
	f, pos := e.masterPos()
	p = e.start("--start", fmt.Sprintf("%s:%d", f, pos))
	check("start file:pos (first checkpoint)")
	publish(p)
	check("start file:pos")
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	restart("start file:pos")
}

// Issue 12 item 2: a failover to a promoted replica set up from a backup
// (its gtid_slave_pos taken from the primary's gtid_binlog_pos, so a
// domain known to the primary only from history is in the replica's
// gtid_slave_pos but never in its binlog) resumes from the stored GTID
// set, instead of being refused as "GTID domain unknown to the server".
func TestGTIDFailoverHistoryDomain(t *testing.T) {
	onlyMariaDB(t, "MariaDB GTID domains (gtid_domain_id, Gtid_list history)")
	e := newEnv(t)
	e.positionMode = "gtid"
	const history = "77-1-3" // the old primary's history domain
	old := e.variable("@@gtid_slave_pos")
	if hasDomain(e.variable("@@gtid_binlog_state"), 77) {
		t.Skip("domain 77 is in this server's binlog; the test needs a domain it knows only from gtid_slave_pos")
	}
	slave := history
	if old != "" {
		slave = old + "," + history
	}
	e.exec(fmt.Sprintf("SET GLOBAL gtid_slave_pos = '%s'", slave))
	t.Cleanup(func() { e.exec(fmt.Sprintf("SET GLOBAL gtid_slave_pos = '%s'", old)) })
	e.insertRaw([]string{row("'message.created'", "1", 1, `'{}'`)})
	// The checkpoint the old primary's publisher stored: this server's
	// position (the replica replicated it) plus the history domain.
	e.saveCheckpoint(checkpoint.Checkpoint{File: "primary-bin.000042", Pos: 4242, Flavor: "mariadb",
		GTIDSet: e.variable("@@gtid_binlog_pos") + "," + history})
	p := e.start()
	_, gtid := e.insertRaw([]string{row("'message.created'", "1", 2, `'{}'`)})
	recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 1, 30*time.Second)
	if len(recs) != 1 || recs[0].Headers["seq_no"] != "2" {
		t.Fatalf("after the failover: %d records %v, want the one row written after it", len(recs), recs)
	}
	e.waitCheckpointGTID(gtid)
	if cp := e.checkpoint(); cp == nil || !strings.Contains(cp.GTIDSet, history) {
		t.Errorf("the history domain was dropped from the stored set: %+v", cp)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// Issue 12 item 3: a time-based replay (--from <time>) whose scan for the
// start passes a row that cannot be decoded (NULL payload, before the
// range) does not fail: the scan reads commit times, not rows.
func TestReplayByTimePastNullRow(t *testing.T) {
	e := newEnv(t)
	e.exec(fmt.Sprintf("ALTER TABLE `%s` MODIFY payload LONGTEXT NULL", e.outbox))
	e.exec("FLUSH BINARY LOGS") // the scan starts at the newest file opened before --from
	e.insertRaw([]string{row("'message.created'", "1", 1, "NULL")})
	from := nextSecond()
	e.insertRaw([]string{row("'message.created'", "1", 2, `'{}'`), row("'message.created'", "2", 1, `'{}'`)})
	topic := e.replayTopic(".replay")
	r := e.replay("--from", from.Format(time.RFC3339), "--topic", topic, "--server-id", fmt.Sprint(serverIDs.Add(1)))
	if r.code != 0 {
		t.Fatalf("replay --from %s: exit %d", from.Format(time.RFC3339), r.code)
	}
	if recs := pollUntil(t, verify.NewConsumer(sink.Config{Brokers: brokers}, topic), 2, 30*time.Second); len(recs) != 2 {
		t.Fatalf("%d records replayed, want the 2 rows after --from", len(recs))
	}
}

// Issue 12 item 2: a checkpoint stored before the GTID history was kept
// (its set lacks a domain known only from the oldest file's Gtid_list) is
// completed from the server's state at its position, after which the
// resume check no longer reports a purge.
func TestCompleteGTIDSetOldCheckpoint(t *testing.T) {
	onlyMariaDB(t, "MariaDB GTID domains (gtid_domain_id, Gtid_list history)")
	e := newEnv(t)
	e.exec("SET SESSION gtid_domain_id = 6",
		fmt.Sprintf("INSERT INTO `%s` (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('history', 9, 9, 9, 1, 2, '{}')", e.outbox))
	e.exec("FLUSH BINARY LOGS")
	cur, _ := e.masterPos()
	e.purgeTo(cur)
	end, gtid := e.insertRaw([]string{row("'message.created'", "1", 1, `'{}'`)})
	cfg := binlog.DefaultConfig()
	cfg.Addr, cfg.User, cfg.Password, cfg.Schema, cfg.Table, cfg.PositionMode = mysqlAddr, mysqlUser, mysqlPass, mysqlDB, e.outbox, binlog.ModeGTID
	srv, err := binlog.Connect(context.Background(), cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// The old checkpoint: this server's position, the history domain left out.
	var set []string
	for _, g := range strings.Split(e.variable("@@gtid_binlog_pos"), ",") {
		if !strings.HasPrefix(g, "6-") {
			set = append(set, g)
		}
	}
	old := binlog.Position{File: end.file, Pos: end.pos, GTID: gtid, GTIDSet: strings.Join(set, ",")}
	if pg, err := srv.CheckResume(old); err != nil || pg == nil {
		t.Fatalf("the old checkpoint %s: CheckResume = %+v, %v; want a purge of domain 6 reported (the case to fix)", old.GTIDSet, pg, err)
	}
	done, err := srv.CompleteGTIDSet(old)
	if err != nil || !hasDomain(done.GTIDSet, 6) {
		t.Fatalf("CompleteGTIDSet = %+v, %v: want domain 6 added", done, err)
	}
	if pg, err := srv.CheckResume(done); err != nil || pg != nil {
		t.Fatalf("completed %s: CheckResume = %+v, %v; want no purge", done.GTIDSet, pg, err)
	}
	// Another server's position (a sequence number this file does not
	// have there) is left as it is.
	other := old
	other.GTIDSet = "0-1-999999"
	if got, err := srv.CompleteGTIDSet(other); err != nil || got.GTIDSet != other.GTIDSet {
		t.Fatalf("CompleteGTIDSet(another server's set) = %+v, %v", got, err)
	}
}
