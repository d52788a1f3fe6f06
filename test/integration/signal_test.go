//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// A signal during the backfill drains it like run's live stream: the rows
// already read are all acknowledged before the process exits 0, the
// acknowledged count it logs is exactly what the topic holds, and nothing
// is stored as the checkpoint (the next start backfills again).
func TestBackfillSignalDrains(t *testing.T) {
	e := newEnv(t)
	e.batchSize = 20                            // small rounds: the backfill lasts long enough to be interrupted
	e.sourceExtra = "  buffer-bytes: 1048576\n" // and reads little ahead of the acknowledgements
	unsent := e.seedOutbox(5000, 200, 60000)
	p := e.launch("--backfill")
	e.waitLog(p, "backfill: consistent snapshot taken", time.Minute)
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic)
	var recs []verify.Record
	for deadline := time.Now().Add(time.Minute); len(recs) == 0; time.Sleep(20 * time.Millisecond) {
		rs, _ := cons.Poll(t.Context())
		recs = append(recs, rs...)
		if time.Now().After(deadline) {
			t.Fatal("no backfill record within a minute")
		}
	}
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit %d after SIGTERM during the backfill, want 0", code)
	}
	b, _ := os.ReadFile(p.log)
	if !bytes.Contains(b, []byte("signal received: stopping the backfill, flushing what was read")) {
		t.Fatalf("no drain logged:\n%s", tail(string(b), 6))
	}
	m := regexp.MustCompile(`(\d+) of (\d+) rows acknowledged`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("the stop does not say how many rows were acknowledged:\n%s", tail(string(b), 6))
	}
	acked, _ := strconv.Atoi(string(m[1]))
	if acked == 0 || acked >= len(unsent) {
		t.Fatalf("acknowledged %d of %d: the signal did not come during the backfill", acked, len(unsent))
	}
	got := e.readTopic(acked, 30*time.Second)
	ids := map[string]bool{}
	for _, r := range got {
		ids[r.EventID] = true
		if r.Headers["backfill"] != "true" {
			t.Fatalf("record %s without backfill=true", r.EventID)
		}
	}
	if len(ids) != acked {
		t.Fatalf("the topic holds %d events, the publisher acknowledged %d: in-flight writes were not drained (or more were written than acknowledged)", len(ids), acked)
	}
	if cp := e.checkpoint(); cp != nil {
		t.Fatalf("an interrupted backfill stored a checkpoint: %+v", cp)
	}
}

// A signal during a replay stops the reading, drains what was read and
// says up to where everything was published; the topic holds exactly the
// events of the range up to there.
func TestReplaySignalDrains(t *testing.T) {
	e := newEnv(t)
	e.batchSize = 20
	e.sourceExtra = "  buffer-bytes: 1048576\n" // the replay reads little ahead of the acknowledgements
	file, pos := e.masterPos()
	e.seedOutbox(9000, 200, 40000)
	target := e.replayTopic(".replay.signal")
	cmd := exec.Command(binary, "replay", "--config", e.config(), "--progress", "1s", "--from", fmt.Sprintf("%s:%d", file, pos), "--topic", target)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, target)
	n := 0
	for deadline := time.Now().Add(time.Minute); n == 0; time.Sleep(20 * time.Millisecond) {
		rs, _ := cons.Poll(t.Context())
		n += len(rs)
		if time.Now().After(deadline) {
			t.Fatal("no replayed record within a minute")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	t.Logf("replay stdout:\n%s", out.String())
	if code := cmd.ProcessState.ExitCode(); code != 1 || !bytes.Contains(out.Bytes(), []byte("result: INTERRUPTED; everything up to ")) {
		t.Fatalf("replay after SIGTERM: exit %d, want 1 and INTERRUPTED", code)
	}
	m := regexp.MustCompile(`(?m)^events: (\d+)$`).FindSubmatch(out.Bytes())
	if m == nil {
		t.Fatal("no events line")
	}
	read, _ := strconv.Atoi(string(m[1]))
	if read == 0 || read >= 40000 {
		t.Fatalf("%d events read: the signal did not come during the replay", read)
	}
	// Everything read was drained: the topic holds exactly the events read.
	rc := verify.NewConsumer(sink.Config{Brokers: brokers}, target)
	ids := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); len(ids) < read && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		rs, _ := rc.Poll(t.Context())
		for _, r := range rs {
			ids[r.EventID] = true
		}
	}
	if len(ids) != read {
		t.Fatalf("the topic holds %d events, the replay read %d: in-flight writes were not drained", len(ids), read)
	}
}
