//go:build integration

package integration

import (
	"bytes"
	"context"
	jbin "encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/segmentio/kafka-go"
)

// debeziumOffsetFile writes an offset file in the exact format of the one
// Debezium 3.6.1.Final's embedded engine stored (testdata/debezium/
// mysql.offsets.dat, a Java-serialized HashMap<byte[], byte[]>), its value
// replaced by value: what Debezium would have stored on this server.
func debeziumOffsetFile(t *testing.T, value string) string {
	t.Helper()
	b, err := os.ReadFile("../../testdata/debezium/mysql.offsets.dat")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(`{"ts_sec"`))
	if i < 4 {
		t.Fatal("recorded offset file: no value")
	}
	n := int(jbin.BigEndian.Uint32(b[i-4:]))
	out := slices.Clone(b[:i-4])
	out = jbin.BigEndian.AppendUint32(out, uint32(len(value)))
	out = append(out, value...)
	out = append(out, b[i+n:]...)
	path := filepath.Join(t.TempDir(), "offsets.dat")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A takeover from Debezium loses nothing and republishes at most one
// transaction: rows A were published by Debezium, which stopped after the
// last of them and stored the offset it stores then (the BEGIN of the last
// transaction, 2 events and 1 row done: the form of the recorded file);
// rows B came after. checkpoint set --from-debezium on that offset file
// (synthesised in Debezium's exact format for this server's binlog: a
// recorded file names another server's) and a run publish exactly the last
// A transaction again and every B row once, in file mode (from the offset's
// file:pos) and in GTID mode (from its GTID set, which excludes the
// transaction Debezium was in).
func TestDebeziumTakeover(t *testing.T) {
	for _, mode := range []string{"file", "gtid"} {
		t.Run(mode, func(t *testing.T) { debeziumTakeover(t, mode, false) })
	}
	// A distributed worker's offsets topic: two records of the connector's
	// key, the newer wins.
	t.Run("topic", func(t *testing.T) { debeziumTakeover(t, "file", true) })
}

func debeziumTakeover(t *testing.T, mode string, viaTopic bool) {
	e := newEnv(t)
	e.positionMode = mode
	row := func(i int) string {
		return fmt.Sprintf("('message.created', %d, %d, %d, 1, 2, '{\"n\": %d}')", 9000+i%3, 70000+i, i, i)
	}
	var a []string
	for i := range 5 {
		a = append(a, row(i))
	}
	e.insertRaw(a[:4])
	lastStart := e.binlogEnd() // the last A transaction starts here
	// Debezium's restart GTID set: everything before that transaction.
	gtids := strings.ReplaceAll(e.executedGTIDs(), "\n", "")
	e.insertRaw(a[4:])
	// Debezium's pos: the transaction's BEGIN (MySQL: the Query after the
	// Gtid event; MariaDB: the Gtid event, which is its BEGIN).
	c := e.sql()
	r, err := c.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT 2", lastStart.File, lastStart.Pos))
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	begin := lastStart.Pos
	if isMySQL() {
		p, _ := r.GetUintByName(1, "Pos")
		begin = uint32(p)
	}
	value := fmt.Sprintf(`{"ts_sec":%d,"file":%q,"pos":%d,"gtids":%q,"row":1,"server_id":1,"event":2}`, time.Now().Unix(), lastStart.File, begin, gtids)
	offsets := debeziumOffsetFile(t, value)
	if viaTopic {
		offsets = "topic:" + e.topic + ".offsets"
		createTopic(t, strings.TrimPrefix(offsets, "topic:"), 1)
		w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: strings.TrimPrefix(offsets, "topic:"), RequiredAcks: kafka.RequireAll}
		key := []byte(`["golden",{"server":"golden"}]`)
		stale := fmt.Sprintf(`{"file":%q,"pos":4,"event":0,"row":0}`, lastStart.File)
		// A topic just created can answer Unknown Topic Or Partition until
		// its partition has a leader: retry that, nothing else.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			err := w.WriteMessages(context.Background(), kafka.Message{Key: key, Value: []byte(stale)}, kafka.Message{Key: key, Value: []byte(value)})
			if err == nil {
				break
			}
			if !errors.Is(err, kafka.UnknownTopicOrPartition) || time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
		w.Close()
	}
	var b []string
	for i := 5; i < 12; i++ {
		b = append(b, row(i))
	}
	e.insertRaw(b[:3])
	e.insertRaw(b[3:])
	end := e.binlogEnd()
	out, code := e.cli(nil, "checkpoint", "set", "--from-debezium", offsets)
	if code != 0 {
		t.Fatalf("checkpoint set --from-debezium: exit %d\n%s", code, out)
	}
	if want := fmt.Sprintf("published again: the transaction at %s:%d", lastStart.File, begin); !strings.Contains(out, want) {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
	e.start()
	pollTopic(t, e.topic, 1+len(b), time.Minute)
	// Everything up to the end is acknowledged: a record more (a second
	// copy) would be on the topic now.
	e.waitCheckpointPast(end, time.Minute)
	recs := pollTopic(t, e.topic, 1+len(b), 10*time.Second)
	var got []string
	for _, r := range recs {
		got = append(got, r.Headers["message_id"])
	}
	slices.Sort(got)
	want := []string{"70004"}
	for i := 5; i < 12; i++ {
		want = append(want, fmt.Sprint(70000+i))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("published message ids %v, want %v (the last Debezium transaction again, then every later row once)", got, want)
	}
}

// ensureTopic creates topic unless it exists.
func ensureTopic(t *testing.T, topic string, parts int) {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	res, err := cl.CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: parts, ReplicationFactor: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Errors[topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// The takeover from a real Debezium run: make debezium-golden runs this
// right after Debezium 3.6.1's embedded engine stopped on this server
// (CDC_DEBEZIUM_OFFSETS: its offset file; table dbz_golden_outbox holds the
// corpus it published, its offset at the BEGIN of the last corpus
// transaction). Rows are written after it; checkpoint set --from-debezium
// and run publish the last corpus row again (the one transaction Debezium
// was in) and every later row exactly once. Skipped without
// CDC_DEBEZIUM_OFFSETS (CI: TestDebeziumTakeover synthesises the offset).
func TestMySQLDebeziumRealTakeover(t *testing.T) {
	onlyMySQL(t, "Debezium's MySQL connector recorded the offset")
	offsets := os.Getenv("CDC_DEBEZIUM_OFFSETS")
	if offsets == "" {
		t.Skip("CDC_DEBEZIUM_OFFSETS not set: run by make debezium-golden right after Debezium stopped")
	}
	e := newEnv(t)
	e.outbox = "dbz_golden_outbox"
	e.sourceExtra = "  mapping: {preset: debezium, format: string}\n"
	agg := "Takeover" + runID
	for _, topic := range []string{"outbox.event.Order", "outbox.event." + agg} {
		ensureTopic(t, topic, goldenPartitions)
	}
	// Only what is published from now on counts.
	before := verify.NewConsumer(sink.Config{Brokers: brokers}, "outbox.event.Order")
	if _, err := before.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		id := fmt.Sprintf("takeover-%s-%d", runID, i)
		ids = append(ids, id)
		e.exec(fmt.Sprintf("INSERT INTO dbz_golden_outbox VALUES ('%s', '%s', 'k%d', 'Later', '{\"i\": %d}', 'eu', 0)", id, agg, i, i))
	}
	end := e.binlogEnd()
	out, code := e.cli(nil, "checkpoint", "set", "--from-debezium", offsets)
	if code != 0 {
		t.Fatalf("checkpoint set --from-debezium: exit %d\n%s", code, out)
	}
	t.Logf("%s", out)
	e.start()
	e.waitCheckpointPast(end, time.Minute)
	later := pollTopic(t, "outbox.event."+agg, len(ids), 10*time.Second)
	again, err := before.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range append(again, later...) {
		got = append(got, r.Headers["id"])
	}
	slices.Sort(got)
	want := append([]string{"0b6b5d2e-7f43-4b7e-9a63-3f2d7d4a0009"}, ids...)
	slices.Sort(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("published after the takeover: %v, want %v (the last corpus row again, every later row once)", got, want)
	}
}
