//go:build integration

package integration

import (
	"bytes"
	"context"
	jbin "encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
		if err := w.WriteMessages(context.Background(), kafka.Message{Key: key, Value: []byte(stale)}, kafka.Message{Key: key, Value: []byte(value)}); err != nil {
			t.Fatal(err)
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
