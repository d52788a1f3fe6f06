//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/pipeline"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// goldenPartitions is the partition count testdata/debezium's partitions
// were computed for (test/debezium Record.PARTITIONS).
const goldenPartitions = 6

// goldenRecord is one line of testdata/debezium/*.jsonl: what Debezium
// 3.6.1.Final's Outbox Event Router and a Connect worker's converter made
// of a corpus row (make debezium-golden).
type goldenRecord struct {
	ID        string      `json:"id"`
	Topic     string      `json:"topic"`
	Partition int         `json:"partition"`
	Key       *string     `json:"key"`
	Value     *string     `json:"value"`
	Headers   [][2]string `json:"headers"`
}

// corpusStatements returns testdata/debezium/corpus.sql's statements with
// {table} replaced, the CREATE TABLE first (the Java recorder reads it the
// same way).
func corpusStatements(t *testing.T, table string) []string {
	t.Helper()
	b, err := os.ReadFile("../../testdata/debezium/corpus.sql")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "--") {
			continue
		}
		out = append(out, strings.ReplaceAll(strings.TrimSuffix(l, ";"), "{table}", table))
	}
	return out
}

func readGolden(t *testing.T, name string) []goldenRecord {
	t.Helper()
	f, err := os.Open("../../testdata/debezium/" + name + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r goldenRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, r)
	}
	return out
}

// The debezium preset reproduces what Debezium 3.6.1.Final's Outbox Event
// Router wrote for the corpus on MySQL (testdata/debezium/mysql.*.jsonl,
// recorded by make debezium-golden): for each router configuration and
// each converter (StringConverter, JsonConverter with schemas.enable true
// and false), the topic, the partition (murmur2 of the key bytes over
// goldenPartitions, or the partition column), the key bytes, the value
// bytes and the headers, in order. The rows are the corpus inserted here
// and read by the real binlog reader and router (the bytes the producer
// sends); not compared: Debezium's __debezium.context.* headers (its
// worker's names and a random run id) and cdc-outbox's own headers
// (event_id, binlog_pos, binlog_txn_end, gtid). The goldens are from MySQL:
// the Debezium MariaDB connector is not served by the registry here, and
// the MySQL connector 3.x refuses MariaDB.
func TestMySQLDebeziumGolden(t *testing.T) {
	onlyMySQL(t, "the golden files are Debezium's MySQL connector's output")
	table := "dbzg_" + runID
	stmts := corpusStatements(t, table)
	c, err := client.Connect(mysqlAddr, mysqlUser, mysqlPass, mysqlDB)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Execute(stmts[0]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := client.Connect(mysqlAddr, mysqlUser, mysqlPass, mysqlDB); err == nil {
			c.Execute("DROP TABLE IF EXISTS " + table)
			c.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := config.Default()
	base.Source.Addr, base.Source.User, base.Source.Password = mysqlAddr, mysqlUser, mysqlPass
	base.Source.Schema, base.Source.Table = mysqlDB, table
	base.Source.ServerID = serverIDs.Add(32) - 31
	srv, err := binlog.Connect(ctx, base.Source, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	from, err := srv.Latest()
	if err != nil {
		t.Fatal(err)
	}
	from.GTID = ""
	c.Execute("SET NAMES utf8mb4")
	for _, s := range stmts[1:] {
		if _, err := c.Execute(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	rows := len(stmts) - 1

	deb := func(f string, more func(*mapping.Config)) mapping.Config {
		m := mapping.Config{Preset: mapping.PresetDebezium, Format: f}
		if more != nil {
			more(&m)
		}
		return m
	}
	type router_ struct {
		name    string
		mapping func(format string) mapping.Config
		sorted  bool // the headers are compared in name order (additional: cdc-outbox adds them in name order, not placement order)
	}
	// Debezium's task names the envelope's value schema after the first
	// record it routed (aggregatetype Order), for every record.
	const envelopeName = "golden.im.dbz_golden_outbox.Order.Value"
	for _, rc := range []router_{
		{"default", func(f string) mapping.Config { return deb(f, nil) }, false},
		{"tombstone", func(f string) mapping.Config {
			return deb(f, func(m *mapping.Config) { m.TombstoneOnEmptyPayload = true })
		}, false},
		// table.fields.additional.placement type:header:eventType,
		// region:envelope:region, aggregatetype:header, shard:partition
		{"additional", func(f string) mapping.Config {
			return deb(f, func(m *mapping.Config) {
				m.Headers = map[string]string{"eventType": "type", "aggregatetype": "aggregatetype"}
				m.Partition = "shard"
				m.EnvelopeFields = []string{"region"}
				if f == mapping.FormatJSONSchemas {
					m.EnvelopeSchemaName = envelopeName
				}
			})
		}, true},
		// route.by.field region, route.topic.replacement
		// outbox.${routedByValue}.events, table.field.event.key type
		{"routing", func(f string) mapping.Config {
			return deb(f, func(m *mapping.Config) {
				m.Topic = "outbox.{region}.events"
				m.Key = []string{"type"}
			})
		}, false},
		// table.field.event.key shard (an INT column: Connect type int32)
		{"intkey", func(f string) mapping.Config {
			return deb(f, func(m *mapping.Config) { m.Key = []string{"shard"} })
		}, false},
		// table.expand.json.payload
		{"expand", func(f string) mapping.Config {
			return deb(f, func(m *mapping.Config) { m.ExpandJSONPayload = true })
		}, false},
		// route.topic.regex (?<kind>Ord)(?<rest>.*), route.topic.replacement
		// events.${rest}.$1: Order renamed, Customer not matched
		{"regex", func(f string) mapping.Config {
			return deb(f, func(m *mapping.Config) {
				m.TopicColumn = "aggregatetype"
				m.TopicRegex, m.TopicReplacement = "(?<kind>Ord)(?<rest>.*)", "events.${rest}.$1"
			})
		}, false},
		// table.fields.additional.placement shard:envelope:shardNo,
		// type:envelope; route.tombstone.on.empty.payload
		{"envelope", func(f string) mapping.Config {
			return deb(f, func(m *mapping.Config) {
				m.EnvelopeFields = []string{"shard:shardNo", "type"}
				m.TombstoneOnEmptyPayload = true
				if f == mapping.FormatJSONSchemas {
					m.EnvelopeSchemaName = envelopeName
				}
			})
		}, false},
	} {
		for _, format := range []string{mapping.FormatString, mapping.FormatJSONSchemas, mapping.FormatJSONPlain} {
			name := "mysql." + rc.name + "." + format
			t.Run(rc.name+"/"+format, func(t *testing.T) {
				cfg := base
				cfg.Source.Mapping = rc.mapping(format)
				if err := cfg.Source.Mapping.Validate("source.mapping"); err != nil {
					t.Fatal(err)
				}
				got := readRouted(ctx, t, cfg, srv, from, rows)
				want := readGolden(t, name)
				if len(want) != rows {
					t.Fatalf("%s: %d golden records, want %d", name, len(want), rows)
				}
				for i, w := range want {
					compareGolden(t, name, w, got[i], rc.sorted)
				}
			})
		}
	}
}

// readRouted reads n events of cfg's table from the binlog at from with the
// real reader and routes them: the records the producer would send.
func readRouted(ctx context.Context, t *testing.T, cfg config.Config, srv *binlog.Server, from binlog.Position, n int) []kafka.Message {
	t.Helper()
	tables, _, cols, err := pipeline.Checked(cfg, srv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := binlog.NewReader(cfg.Source, srv.Flavor(), cols, from, zap.NewNop())
	r.SetTables(tables)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	rt := router.New(cfg.Router, router.Reserved{})
	var out []kafka.Message
	for txn := range r.Txns() {
		for i := range txn.Events {
			e := &txn.Events[i]
			if e.Err != nil {
				t.Fatalf("event %d: %v", len(out), e.Err)
			}
			m, err := rt.Route(e, txn.End)
			if err != nil {
				t.Fatalf("route: %v", err)
			}
			out = append(out, m)
		}
		if len(out) >= n {
			cancel()
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(out) != n {
		t.Fatalf("%d records, want %d", len(out), n)
	}
	return out
}

// ownHeaders are the headers cdc-outbox adds to every record.
var ownHeaders = map[string]bool{router.HeaderEventID: true, router.HeaderBinlogPos: true, router.HeaderTxnEnd: true, router.HeaderGTID: true}

// compareGolden compares a record with Debezium's; sorted: the headers
// in name order (cdc-outbox adds a mapping's headers in name order, not in
// Debezium's placement order).
func compareGolden(t *testing.T, name string, w goldenRecord, m kafka.Message, sorted bool) {
	t.Helper()
	if m.Topic != w.Topic {
		t.Errorf("%s %s: topic %q, Debezium %q", name, w.ID, m.Topic, w.Topic)
	}
	bal := router.Balancer()
	parts := make([]int, goldenPartitions)
	for i := range parts {
		parts[i] = i
	}
	// Debezium's partition placement sets the value as it is (6 on a
	// topic of 6 partitions fails the send); cdc-outbox takes it modulo
	// the partition count.
	if p := bal.Balance(m, parts...); p != w.Partition%goldenPartitions {
		t.Errorf("%s %s: partition %d of %d, Debezium %d", name, w.ID, p, goldenPartitions, w.Partition)
	}
	eq := func(what string, got []byte, want *string) {
		if (got == nil) != (want == nil) || want != nil && !bytes.Equal(got, []byte(*want)) {
			t.Errorf("%s %s: %s\n got %s\nwant %s", name, w.ID, what, show(got), showp(want))
		}
	}
	eq("key", m.Key, w.Key)
	eq("value", m.Value, w.Value)
	var got, want []string
	for _, h := range m.Headers {
		if !ownHeaders[h.Key] {
			got = append(got, h.Key+"="+string(h.Value))
		}
	}
	for _, h := range w.Headers {
		if !strings.HasPrefix(h[0], "__debezium.context.") {
			want = append(want, h[0]+"="+h[1])
		}
	}
	if sorted {
		slices.Sort(got)
		slices.Sort(want)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s %s: headers %q, Debezium %q", name, w.ID, got, want)
	}
}

func show(b []byte) string {
	if b == nil {
		return "<null>"
	}
	return trunc(string(b))
}

func showp(s *string) string {
	if s == nil {
		return "<null>"
	}
	return trunc(*s)
}

func trunc(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// A NULL payload under format string reaches Kafka as a tombstone (a null
// value, not an empty one), through the producer and the broker, as under
// a Debezium worker with StringConverter; an empty JSON object stays "{}".
func TestMappingDebeziumTombstone(t *testing.T) {
	e := newEnv(t)
	table := "dbzt_" + e.name
	agg := "tomb" + runID
	createTopic(t, "outbox.event."+agg, 1)
	e.exec("CREATE TABLE " + table + ` (id VARCHAR(36) NOT NULL PRIMARY KEY, aggregatetype VARCHAR(255) NOT NULL,
		aggregateid VARCHAR(255) NOT NULL, type VARCHAR(255) NOT NULL, payload JSON NULL)`)
	t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + table) })
	e.outbox = table
	e.sourceExtra = "  mapping: {preset: debezium, format: string}\n"
	e.start()
	e.exec("INSERT INTO "+table+" VALUES ('t1', '"+agg+"', 'k', 'Deleted', NULL)",
		"INSERT INTO "+table+" VALUES ('t2', '"+agg+"', 'k', 'Touched', '{}')")
	// franz-go tells a null value (nil) from an empty one ([]byte{}).
	recs := consumeRecords(t, "outbox.event."+agg, 2)
	if string(recs[0].Key) != "k" || recs[0].Value != nil || string(recs[1].Value) != "{}" {
		t.Fatalf("values %q (nil %v), %q; want a tombstone (null), then {}", recs[0].Value, recs[0].Value == nil, recs[1].Value)
	}
}

// Debezium's route.topic.regex/replacement and envelope placement through
// the running publisher, the sink's checks and the broker: the row's
// aggregatetype OrderEvent goes to evt.<kind> and its value is
// StringConverter's text of the struct (not JSON, yet no poison record:
// the JSON check judges the payload column); NoMatch keeps its name.
func TestMappingDebeziumEnvelopeRegex(t *testing.T) {
	e := newEnv(t)
	table := "dbze_" + e.name
	kind := "env" + runID
	createTopic(t, "evt."+kind, 1)
	e.exec("CREATE TABLE " + table + ` (id VARCHAR(36) NOT NULL PRIMARY KEY, aggregatetype VARCHAR(255) NOT NULL,
		aggregateid VARCHAR(255) NOT NULL, type VARCHAR(255) NOT NULL, payload JSON NULL, region VARCHAR(32) NOT NULL)`)
	t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + table) })
	e.outbox = table
	e.sourceExtra = "  mapping: {preset: debezium, format: string, topic-column: aggregatetype, topic-regex: '(?<kind>.*)Event'," +
		" topic-replacement: 'evt.${kind}', envelope-fields: [region, 'type:eventType']}\n"
	e.start()
	e.exec("INSERT INTO "+table+" VALUES ('r1', '"+kind+"Event', 'k', 'Created', '{\"a\":1}', 'eu')",
		"INSERT INTO "+table+" VALUES ('r2', '"+kind+"Event', 'k', 'Deleted', NULL, 'us')")
	recs := consumeRecords(t, "evt."+kind, 2)
	if got := string(recs[0].Value); got != `Struct{payload={"a":1},region=eu,eventType=Created}` {
		t.Errorf("value %s", got)
	}
	if got := string(recs[1].Value); got != `Struct{region=us,eventType=Deleted}` {
		t.Errorf("NULL payload: value %s, want the struct without payload (no tombstone: the value is a struct)", got)
	}
}

// consumeRecords reads topic from its start until it has n records (a
// minute at most) and fails the test unless it got exactly n.
func consumeRecords(t *testing.T, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n && ctx.Err() == nil {
		recs = append(recs, cl.PollFetches(ctx).Records()...)
	}
	if len(recs) != n {
		t.Fatalf("%d records on %s, want %d", len(recs), topic, n)
	}
	return recs
}
