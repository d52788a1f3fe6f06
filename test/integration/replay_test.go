//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/redis/go-redis/v9"
)

// replayResult is one "cdc-outbox replay" run.
type replayResult struct {
	code   int
	stdout string
	stderr string
}

// replay runs cdc-outbox replay with e's configuration and args.
func (e *env) replay(args ...string) replayResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"replay", "--config", e.config(), "--progress", "1s"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run()
	r := replayResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
	e.t.Logf("replay %s: exit %d\nstdout:\n%s\nstderr (tail):\n%s", strings.Join(args, " "), r.code, r.stdout, tail(r.stderr, 8))
	return r
}

// replayTopic creates the topic e's topic + suffix (same partition count)
// and waits until its metadata is visible.
func (e *env) replayTopic(suffix string) string {
	e.t.Helper()
	topic := e.topic + suffix
	createTopic(e.t, topic, partitions)
	for deadline := time.Now().Add(30 * time.Second); ; {
		ids, err := sink.Partitions(context.Background(), sink.Config{Brokers: brokers}, topic)
		if err == nil && len(ids) == partitions {
			return topic
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("topic %s not visible: %v", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawCheckpoint returns the checkpoint key's stored bytes ("" when absent).
func (e *env) rawCheckpoint() string {
	e.t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	b, err := rdb.Get(context.Background(), e.key).Result()
	if err != nil && err != redis.Nil {
		e.t.Fatal(err)
	}
	return b
}

// pos parses a "file:pos" header.
func pos(t *testing.T, s string) binlog.Position {
	t.Helper()
	st, err := binlog.ParseStart(s)
	if err != nil || st.Kind != binlog.StartFilePos {
		t.Fatalf("bad position %q: %v", s, err)
	}
	return binlog.Position{File: st.File, Pos: st.Pos}
}

// checkReplayed checks that the replay topic holds exactly want (records of
// the live topic), each once, in per-conversation order, on the murmur2
// partition, with the live record's headers plus replayed=true and replay_id id.
func checkReplayed(t *testing.T, topic string, want []verify.Record, id string) {
	t.Helper()
	got := mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, topic))
	byID := map[string]verify.Record{}
	for _, r := range want {
		byID[r.EventID] = r
	}
	seen := map[string]bool{}
	lastSeq := map[string]int64{}
	for _, r := range got {
		orig, ok := byID[r.EventID]
		if !ok {
			t.Fatalf("replayed event %s (conversation %s seq %d, txn end %s) is outside the range", r.EventID, r.Key, r.SeqNo, r.Headers[router.HeaderTxnEnd])
		}
		if seen[r.EventID] {
			t.Fatalf("event %s replayed twice", r.EventID)
		}
		seen[r.EventID] = true
		if r.SeqNo <= lastSeq[r.Key] {
			t.Fatalf("conversation %s: seq %d after %d", r.Key, r.SeqNo, lastSeq[r.Key])
		}
		lastSeq[r.Key] = r.SeqNo
		if p := router.Partition([]byte(r.Key), partitions); r.Partition != p {
			t.Fatalf("conversation %s on partition %d, murmur2 says %d", r.Key, r.Partition, p)
		}
		if r.Headers[router.HeaderReplayed] != "true" || r.Headers[router.HeaderReplayID] != id {
			t.Fatalf("event %s: replayed=%q replay_id=%q, want true and %s", r.EventID, r.Headers[router.HeaderReplayed], r.Headers[router.HeaderReplayID], id)
		}
		for k, v := range orig.Headers {
			if r.Headers[k] != v {
				t.Fatalf("event %s: header %s = %q, live record has %q", r.EventID, k, r.Headers[k], v)
			}
		}
		if len(r.Headers) != len(orig.Headers)+2 || !bytes.Equal(r.Value, orig.Value) || r.Key != orig.Key {
			t.Fatalf("event %s differs from the live record: %v vs %v", r.EventID, r.Headers, orig.Headers)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("replay topic holds %d records, want %d", len(got), len(want))
	}
}

var replayIDRe = regexp.MustCompile(`(?m)^replay ([0-9a-f-]{36}): from `)

func replayID(t *testing.T, r replayResult) string {
	t.Helper()
	m := replayIDRe.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no replay id in the output")
	}
	return m[1]
}

// count returns the number after "<label>: " in the summary, or -1.
func count(out, label string) int {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(label) + `: (\d+)`).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A sub-range given as file:pos (binlog_txn_end headers of chosen records),
// replayed to another topic beside the running live publisher: exactly the
// events of the transactions ending after --from and at or before --to.
func TestReplayRange(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	w := e.writer()
	plan := workload.Generate(21, 0, 20, 600, 1, 10, 100)
	if err := produce(w, plan); err != nil {
		t.Fatal(err)
	}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	live := mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic))
	var ends []binlog.Position
	seenEnd := map[string]bool{}
	for _, r := range live {
		if h := r.Headers[router.HeaderTxnEnd]; !seenEnd[h] {
			seenEnd[h] = true
			ends = append(ends, pos(t, h))
		}
	}
	sort.Slice(ends, func(i, j int) bool { return binlog.ComparePos(ends[i], ends[j]) < 0 })
	from, to := ends[len(ends)/4], ends[3*len(ends)/4]
	var want []verify.Record
	for _, r := range live {
		end := pos(t, r.Headers[router.HeaderTxnEnd])
		if binlog.ComparePos(end, from) > 0 && binlog.ComparePos(end, to) <= 0 {
			want = append(want, r)
		}
	}
	topic := e.replayTopic(".replay")
	// Default server_id: source.server-id + ha.server-ids, beside the live publisher.
	r := e.replay("--from", from.FilePos(), "--to", to.FilePos(), "--topic", topic)
	if r.code != 0 {
		t.Fatalf("replay exit %d", r.code)
	}
	if n := count(r.stdout, "events"); n != len(want) {
		t.Fatalf("summary says %d events, want %d", n, len(want))
	}
	checkReplayed(t, topic, want, replayID(t, r))

	// The live publisher was not disturbed: still running, still publishing.
	select {
	case err := <-p.done:
		t.Fatalf("live publisher exited during the replay: %v", err)
	default:
	}
	more := workload.Generate(22, 0, 20, 50, 1, 5, 100) // conversations 1-20 again, seq_no from 1: a separate check
	for k := range more.Txns {
		for i := range more.Txns[k] {
			more.Txns[k][i].SeqNo += plan.Last[more.Txns[k][i].ConversationID]
		}
	}
	if err := produce(w, more); err != nil {
		t.Fatal(err)
	}
	last := map[int64]int64{}
	for c, s := range plan.Last {
		last[c] = s
	}
	for _, txn := range more.Txns {
		for _, row := range txn {
			last[row.ConversationID] = row.SeqNo
		}
	}
	requireOK(t, e.consume(verify.NewChecker(last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
}

// nextSecond sleeps past the start of the next wall-clock second and
// returns it: transactions committed before the call have binlog
// timestamps before it, those committed after the call at or after it.
func nextSecond() time.Time {
	s := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(s) + 150*time.Millisecond)
	return s
}

// Replay by time: three workloads a second apart; --from/--to times select
// the middle one, --from alone the last two. The live checkpoint is left
// byte for byte as it was.
func TestReplayByTime(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	w := e.writer()
	a := workload.Generate(23, 0, 10, 100, 1, 5, 100)
	b := workload.Generate(24, 100, 10, 100, 1, 5, 100)
	c := workload.Generate(25, 200, 10, 100, 1, 5, 100)
	if err := produce(w, a); err != nil {
		t.Fatal(err)
	}
	tb := nextSecond()
	if err := produce(w, b); err != nil {
		t.Fatal(err)
	}
	tc := nextSecond()
	if err := produce(w, c); err != nil {
		t.Fatal(err)
	}
	last := map[int64]int64{}
	for _, pl := range []*workload.Plan{a, b, c} {
		for k, v := range pl.Last {
			last[k] = v
		}
	}
	requireOK(t, e.consume(verify.NewChecker(last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	live := mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic))
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("live publisher exit %d", code)
	}
	cp := e.rawCheckpoint()
	if cp == "" {
		t.Fatal("no live checkpoint")
	}
	conv := func(lo, hi int64) []verify.Record {
		var out []verify.Record
		for _, r := range live {
			if k, _ := strconv.ParseInt(r.Key, 10, 64); k > lo && k <= hi {
				out = append(out, r)
			}
		}
		return out
	}

	topic := e.replayTopic(".replay")
	r := e.replay("--from", tb.Format(time.RFC3339), "--to", tc.Format(time.RFC3339), "--topic", topic, "--server-id", fmt.Sprint(serverIDs.Add(1)))
	if r.code != 0 {
		t.Fatalf("replay exit %d", r.code)
	}
	checkReplayed(t, topic, conv(100, 110), replayID(t, r))

	// Without --to: up to the binlog end at start (b and c).
	topic2 := e.replayTopic(".replay2")
	r = e.replay("--from", tb.Format(time.RFC3339), "--topic", topic2, "--server-id", fmt.Sprint(serverIDs.Add(1)))
	if r.code != 0 {
		t.Fatalf("replay exit %d", r.code)
	}
	checkReplayed(t, topic2, conv(100, 210), replayID(t, r))

	if got := e.rawCheckpoint(); got != cp {
		t.Fatalf("replay changed the live checkpoint:\nbefore %s\nafter  %s", cp, got)
	}
}

// --dry-run reports the counts of the range and publishes nothing.
func TestReplayDryRun(t *testing.T) {
	e := newEnv(t)
	e.start()
	w := e.writer()
	file, at := e.masterPos()
	from := binlog.Position{File: file, Pos: at}
	plan := workload.Generate(26, 0, 15, 300, 1, 8, 100)
	if err := produce(w, plan); err != nil {
		t.Fatal(err)
	}
	file, at = e.masterPos()
	to := binlog.Position{File: file, Pos: at}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))
	topic := e.replayTopic(".replay")
	r := e.replay("--from", from.FilePos(), "--to", to.FilePos(), "--topic", topic, "--dry-run", "--server-id", fmt.Sprint(serverIDs.Add(1)))
	if r.code != 0 {
		t.Fatalf("dry run exit %d", r.code)
	}
	if n := count(r.stdout, "events"); n != plan.Total {
		t.Fatalf("dry run counts %d events, want %d", n, plan.Total)
	}
	if n := count(r.stdout, "topic "+topic); n != plan.Total {
		t.Fatalf("dry run counts %d events for %s, want %d", n, topic, plan.Total)
	}
	if n := count(r.stdout, "transactions"); n != len(plan.Txns) {
		t.Fatalf("dry run counts %d transactions, want %d", n, len(plan.Txns))
	}
	if !strings.Contains(r.stdout, "result: dry run, nothing published") {
		t.Fatal("no dry-run result line")
	}
	// Without --topic the records would go to the routed topic.
	r = e.replay("--from", from.FilePos(), "--to", to.FilePos(), "--dry-run", "--server-id", fmt.Sprint(serverIDs.Add(1)))
	if n := count(r.stdout, "topic "+e.topic); r.code != 0 || n != plan.Total {
		t.Fatalf("dry run without --topic: exit %d, %d events for %s", r.code, n, e.topic)
	}
	if recs := mustPoll(t, verify.NewConsumer(sink.Config{Brokers: brokers}, topic)); len(recs) != 0 {
		t.Fatalf("dry run published %d records", len(recs))
	}
}

// Invalid ranges exit 2 before anything is published, each with a message
// naming the problem; a failing write exits 1 naming where to resume.
func TestReplayErrors(t *testing.T) {
	e := newEnv(t)
	// The missing topic is poison once the producer's retry budget is
	// spent: 2 s, not the 30 s default (the other cases stop before producing).
	t.Setenv("CDC_OUTBOX_KAFKA_DELIVERY_TIMEOUT", "2s")
	file, at := e.masterPos()
	here := fmt.Sprintf("%s:%d", file, at)
	if err := produce(e.writer(), workload.Generate(27, 0, 2, 3, 1, 3, 100)); err != nil {
		t.Fatal(err)
	}
	f2, at2 := e.masterPos()
	after := fmt.Sprintf("%s:%d", f2, at2)
	id := fmt.Sprint(serverIDs.Add(1))
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown file", []string{"--from", "mariadb-bin.999999:4"}, 2, "is not on the server (purged, or from another server); oldest available is "},
		{"unknown --to file", []string{"--from", here, "--to", "nosuch-bin.000001:4"}, 2, "oldest available is "},
		{"--to before --from", []string{"--from", after, "--to", here}, 2, "is not after start"},
		{"--from inside a transaction (at its Xid event)", []string{"--from", fmt.Sprintf("%s:%d", f2, at2-31)}, 2, "is not between two transactions"},
		{"--to at --from", []string{"--from", here, "--to", here}, 2, "is not after start"},
		{"--to in the future", []string{"--from", here, "--to", fmt.Sprintf("%s:%d", f2, at2+100000000)}, 2, "is past the end of"},
		{"time before the oldest binlog", []string{"--from", "1990-01-01T00:00:00Z"}, 2, "is before the oldest binlog the server has"},
		{"not a position", []string{"--from", "latest"}, 2, "want <file>:<pos>, gtid:<set> or an RFC 3339 time"},
		{"time without zone", []string{"--from", "2026-11-29T10:00:00"}, 2, "RFC 3339 with a zone"},
		{"no --from", nil, 2, `required flag(s) "from" not set`},
		{"the live publisher's server_id", []string{"--from", here, "--server-id", fmt.Sprint(e.serverID)}, 2, "other than the live publisher's"},
		{"missing topic: write error", []string{"--from", here, "--to", after, "--topic", e.topic + ".nosuch"}, 1, "resume with --from "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if !strings.Contains(strings.Join(args, " "), "--server-id") && len(args) > 0 {
				args = append(args, "--server-id", id)
			}
			r := e.replay(args...)
			if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
				t.Fatalf("exit %d, want %d with %q", r.code, c.code, c.want)
			}
		})
	}
}
