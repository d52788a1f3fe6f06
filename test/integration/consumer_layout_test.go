//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/consumer"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"
)

// The consumer package on the publisher's real records of the debezium and
// generic presets (docs/consumer.md, "Layouts"): every row handled once,
// by its event id (a UUID for debezium), each key's rows in commit order,
// nothing refused as invalid. Debezium has no sequence number (offset
// order, gap detection off); the generic table publishes its order column
// as a header, which LayoutOf(the publisher's mapping) takes as the
// sequence number (in order: no gap, nothing late).
func TestConsumerLayouts(t *testing.T) {
	const rows, keys = 120, 5
	for _, c := range []struct {
		name   string
		table  func(e *env) string
		m      mapping.Config
		mYAML  string
		insert func(table string, i int) string // the i-th row (1-based): key k(i % keys), payload {"n": i}
	}{
		{name: "debezium",
			table: func(e *env) string { return e.debeziumOutbox("dbc_", "") },
			m:     mapping.Config{Preset: mapping.PresetDebezium},
			mYAML: "preset: debezium",
			insert: func(table string, i int) string {
				return fmt.Sprintf(`INSERT INTO %s (id, aggregatetype, aggregateid, type, payload) VALUES (UUID(), 'order', 'k%d', 'OrderCreated', '{"n": %d}')`, table, i%keys, i)
			}},
		{name: "generic",
			table: func(e *env) string {
				table := "gc_" + e.name
				e.exec("CREATE TABLE " + table + ` (id BIGINT AUTO_INCREMENT PRIMARY KEY, aggregate_type VARCHAR(64) NOT NULL,
					aggregate_id VARCHAR(64) NOT NULL, payload TEXT NOT NULL, create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
					version BIGINT NOT NULL)`)
				e.t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + table) })
				e.outbox = table
				return table
			},
			m:     mapping.Config{Preset: mapping.PresetGeneric, Order: "version", Headers: map[string]string{"version": "version"}},
			mYAML: "preset: generic\n    order: version\n    headers: {version: version}",
			insert: func(table string, i int) string {
				return fmt.Sprintf(`INSERT INTO %s (aggregate_type, aggregate_id, payload, version) VALUES ('account', 'k%d', '{"n": %d}', %d)`,
					table, i%keys, i, (i-1)/keys+1)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnvNamed(t, t.Name())
			table := c.table(e)
			e.sourceExtra = fmt.Sprintf("  mapping:\n    %s\n    topic: %s\n", c.mYAML, e.topic)
			layout := consumer.LayoutOf(c.m)
			if layout.HasSeqNo() != (c.name == "generic") {
				t.Fatalf("layout %s", layout)
			}
			var mu sync.Mutex
			ids := map[string]int{}
			order := map[string][]int{} // key → payload n in handling order
			var seqs []string
			c2, err := consumer.New(consumer.Config{Brokers: brokers, Topics: []string{e.topic}, Group: "it-" + e.name,
				MaxWait: 100 * time.Millisecond, Layout: layout},
				consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
					var p struct{ N int }
					if err := json.Unmarshal(r.Payload, &p); err != nil {
						return err
					}
					mu.Lock()
					defer mu.Unlock()
					ids[r.EventID]++
					order[r.Key] = append(order[r.Key], p.N)
					if r.Late {
						t.Errorf("%s late", r.EventID)
					}
					if layout.HasSeqNo() {
						seqs = append(seqs, fmt.Sprintf("%s:%d", r.Key, r.SeqNo))
					}
					return nil
				}), consumer.Options{
					OnInvalid: func(_ context.Context, m kafka.Message, err error) error {
						t.Errorf("invalid %d: %v", m.Offset, err)
						return nil
					},
					OnGap: func(_ context.Context, g consumer.Gap) error { t.Errorf("gap %s", g); return nil }})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var g errgroup.Group
			g.Go(func() error { return c2.Run(ctx) })
			p := e.start()
			for i := 1; i <= rows; i++ {
				e.exec(c.insert(table, i))
			}
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
				mu.Lock()
				n := len(ids)
				mu.Unlock()
				if n >= rows {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("handled %d of %d rows", n, rows)
				}
			}
			cancel()
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			p.stop(t, 30*time.Second)
			mu.Lock()
			defer mu.Unlock()
			// Every row's id once: the table's ids are the records' event ids.
			conn := e.sql()
			defer conn.Close()
			res, err := conn.Execute("SELECT CAST(id AS CHAR) FROM " + table)
			if err != nil {
				t.Fatal(err)
			}
			for i := range res.RowNumber() {
				id, _ := res.GetString(i, 0)
				if ids[id] != 1 {
					t.Errorf("row %s handled %d times", id, ids[id])
				}
			}
			if len(ids) != rows {
				t.Errorf("%d distinct event ids handled, want %d", len(ids), rows)
			}
			for k, ns := range order {
				for i := 1; i < len(ns); i++ {
					if ns[i] <= ns[i-1] {
						t.Errorf("key %s: row %d handled after row %d", k, ns[i], ns[i-1])
					}
				}
			}
			t.Logf("layout %s: %d rows once each over %d keys in commit order (sequence numbers checked: %d)", layout, len(ids), len(order), len(seqs))
		})
	}
}
