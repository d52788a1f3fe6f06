//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/redis/go-redis/v9"
)

// Archived binlogs: workloads A and B go into two binlog files, the
// server's binlogs are copied to a temporary directory and the server
// purges them; then (a) replay --binlog-files publishes exactly the events
// of A and B from the copies, in order, with no server connection, and
// (b) run, with a checkpoint before A (in a purged file) and
// source.archive set to the copies, publishes A and B from the archive,
// hands over to the server at the start of its oldest binlog and streams
// C: nothing lost, nothing twice.
//
// The purge: PURGE BINARY LOGS TO the file current after the FLUSH, i.e.
// only files older than the one the server writes. In CI every
// integration test runs sequentially on one stack, and every other test
// starts its publisher at "latest" or at positions it reads after it
// started (in the current file), and expects nothing from older files
// (TestReplayErrors only matches "oldest available is"), so removing the
// older files breaks none of them. On a stack shared with tests running
// concurrently, a publisher still reading an older file could lose its
// position: run this test on a private stack there (CDC_STACK_DIR, ports).
func TestArchiveReplayAndCatchUp(t *testing.T) {
	e := newEnv(t)
	c := e.sql()
	defer c.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	w := e.writer()
	from := e.binlogEnd()
	f0 := from.File
	a := workload.Generate(71, 0, 20, 1500, 1, 40, 200)
	if err := produce(w, a); err != nil {
		t.Fatal(err)
	}
	exec("FLUSH BINARY LOGS")
	b := workload.Generate(72, 100, 20, 1500, 1, 40, 200)
	if err := produce(w, b); err != nil {
		t.Fatal(err)
	}
	f1, p1 := e.masterPos()
	to := binlog.Position{File: f1, Pos: p1}
	exec("FLUSH BINARY LOGS")
	current, _ := e.masterPos()

	// Copy the server's binlogs (all but the current file are closed).
	r, err := c.Execute("SELECT @@log_bin_basename")
	if err != nil {
		t.Fatal(err)
	}
	basename, _ := r.GetString(0, 0)
	srcDir := filepath.Dir(basename)
	if _, err := os.Stat(srcDir); err != nil {
		// a server in a chroot (dev-stack's MySQL 9.7, MariaDB 11.8) sees another path
		srcDir = envOr("CDC_MYSQL_BINLOG_DIR", filepath.Join(envOr("CDC_STACK_DIR", "/tmp/cdc-outbox-stack"), "mariadb", "binlog"))
	}
	archive := t.TempDir()
	r, err = c.Execute("SHOW BINARY LOGS")
	if err != nil {
		t.Fatal(err)
	}
	var copied []string
	for i := 0; i < r.RowNumber(); i++ {
		name, _ := r.GetString(i, 0)
		if binlog.ComparePos(binlog.Position{File: name}, binlog.Position{File: f0}) < 0 {
			continue
		}
		copyFile(t, filepath.Join(srcDir, name), filepath.Join(archive, name))
		copied = append(copied, name)
	}
	t.Logf("archived %v from %s; range %s … %s; server now writes %s", copied, srcDir, from.FilePos(), to.FilePos(), current)
	// MariaDB keeps a file until its binlog checkpoint (the storage
	// engines' commits of its transactions are durable): retry a while.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		exec(fmt.Sprintf("PURGE BINARY LOGS TO '%s'", current))
		if e.sqlAvailable(f0) != nil && e.sqlAvailable(f1) != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s or %s still on the server after PURGE BINARY LOGS TO '%s'", f0, f1, current)
		}
	}

	ab := map[int64]int64{}
	for _, pl := range []*workload.Plan{a, b} {
		for k, v := range pl.Last {
			ab[k] = v
		}
	}

	// (a) replay --binlog-files: exactly A and B, in order, marked replayed.
	topic := e.replayTopic(".archive")
	rr := e.replay("--binlog-files", archive, "--from", from.FilePos(), "--to", to.FilePos(), "--topic", topic)
	if rr.code != 0 {
		t.Fatalf("replay --binlog-files exit %d", rr.code)
	}
	if n := count(rr.stdout, "events"); n != a.Total+b.Total {
		t.Fatalf("summary says %d events, want %d", n, a.Total+b.Total)
	}
	if !strings.Contains(rr.stdout, "(no server connection)") {
		t.Fatal("the summary does not name the file source")
	}
	id := replayID(t, rr)
	chk := verify.NewChecker(ab)
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, topic)
	rep := consumeTopic(t, chk, cons, time.Minute)
	requireOK(t, rep)
	if rep.Duplicates != 0 || rep.Records != a.Total+b.Total {
		t.Fatalf("replay topic: %d records, %d duplicates; want %d, 0", rep.Records, rep.Duplicates, a.Total+b.Total)
	}
	for _, rec := range mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, topic)) {
		if rec.Headers[router.HeaderReplayed] != "true" || rec.Headers[router.HeaderReplayID] != id {
			t.Fatalf("record %s: replayed=%q replay_id=%q", rec.EventID, rec.Headers[router.HeaderReplayed], rec.Headers[router.HeaderReplayID])
		}
	}

	// (b) run from a checkpoint in the purged files, source.archive set.
	cp, _ := json.Marshal(checkpoint.Checkpoint{Version: checkpoint.Version, File: from.File, Pos: from.Pos, GTIDSet: from.GTIDSet, Flavor: serverFlavor(), UpdatedAt: time.Now()})
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	if err := rdb.Set(context.Background(), e.key, cp, 0).Err(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CDC_OUTBOX_SOURCE_ARCHIVE", archive)
	p := e.start()
	if !logHas(p.log, "caught up from the archive") {
		t.Fatal("the publisher did not log the archive catch-up")
	}
	cc := workload.Generate(73, 200, 20, 1500, 1, 40, 200)
	if err := produce(w, cc); err != nil {
		t.Fatal(err)
	}
	all := map[int64]int64{}
	for k, v := range ab {
		all[k] = v
	}
	for k, v := range cc.Last {
		all[k] = v
	}
	rep = e.consume(verify.NewChecker(all), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute)
	requireOK(t, rep)
	// No crash happened: nothing may be published twice (the archive's
	// last transaction and the server's first are not both sent).
	if rep.Duplicates != 0 {
		t.Fatalf("%d records published twice", rep.Duplicates)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("publisher exit %d", code)
	}
	if got := e.checkpoint(); got == nil || binlog.ComparePos(got.Position(), binlog.Position{File: current, Pos: 4}) <= 0 {
		t.Fatalf("checkpoint after the run: %+v, want past %s:4", got, current)
	}
}

// sqlAvailable reports nil when the server lists file in SHOW BINARY LOGS.
func (e *env) sqlAvailable(file string) error {
	c := e.sql()
	defer c.Close()
	r, err := c.Execute("SHOW BINARY LOGS")
	if err != nil {
		return err
	}
	for i := 0; i < r.RowNumber(); i++ {
		if name, _ := r.GetString(i, 0); name == file {
			return nil
		}
	}
	return fmt.Errorf("%s not on the server", file)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatalf("copy binlog (the test needs the server's binlog directory on this host): %v", err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// consumeTopic polls cons into c until c is complete or timeout.
func consumeTopic(t *testing.T, c *verify.Checker, cons *verify.Consumer, timeout time.Duration) verify.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		recs, err := cons.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			t.Fatalf("consume: %v", err)
		}
		c.Add(recs...)
		if c.Complete() || ctx.Err() != nil {
			return c.Report()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
