package pipeline

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/config"
)

// docTable returns the rows (cells trimmed) of the markdown tables of
// section title ("## title") of docs/operations.md, keyed by the first cell,
// the header rows left out.
func docTable(t *testing.T, title string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n## "+title+"\n")
	if i < 0 {
		t.Fatalf("docs/operations.md has no section %q", title)
	}
	text = text[i+1:]
	if j := strings.Index(text[3:], "\n## "); j >= 0 {
		text = text[:j+3]
	}
	rows := map[string][]string{}
	header := true
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			header = true // the next table's first row is its header
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for k := range cells {
			cells[k] = strings.TrimSpace(cells[k])
		}
		if header || strings.HasPrefix(cells[0], "---") {
			header = false
			continue
		}
		rows[cells[0]] = cells
	}
	return rows
}

// The table of docs/operations.md, "Retries and timeouts", states the
// worst cases that Retries computes from the default configuration: a
// changed default, bound or loop fails here until the table says it.
func TestRetriesTable(t *testing.T) {
	b := Retries(config.Default())
	want := map[string]time.Duration{
		"one Kafka request":                                      b.Request,
		"per batch":                                              b.Batch,
		"per coordinator call (exactly-once)":                    b.CoordinatorCall,
		"per transaction redo (exactly-once)":                    b.Redo,
		"rounds in flight behind a failed round (at-least-once)": b.Behind,
		"leader lookups at start":                                b.LeaderWaits,
		"source silent":                                          b.SourceSilence,
		"one Redis command":                                      b.RedisCommand,
		"periodic checkpoint write":                              0, // never stops the pipeline: "—"
		"final checkpoint write":                                 b.FinalWrite,
		"mirror copy":                                            b.MirrorCopy,
		"per pipeline restart":                                   b.RestartBackoff,
		"lease renew":                                            b.LeaseLoss,
		"per HA term":                                            b.HandOver,
		"shutdown drain":                                         b.Drain,
		"a pipeline restart: Kafka unreachable, at-least-once": b.KafkaToRestart,
		"a pipeline restart: Kafka unreachable, exactly-once":  b.KafkaToRestartExactlyOnce,
		"a pipeline restart: the source silent":                b.SourceToRestart,
		"a lease loss: Redis unreachable":                      b.RedisToLeaseLoss,
	}
	rows := docTable(t, "Retries and timeouts")
	for name, d := range want {
		row, ok := rows[name]
		if !ok {
			t.Errorf("the table has no row %q (worst case %s)", name, d)
			continue
		}
		cell := row[len(row)-1]
		if d == 0 {
			if cell != "—" {
				t.Errorf("%s: the table says %q, want —", name, cell)
			}
			continue
		}
		got, err := time.ParseDuration(strings.ReplaceAll(cell, " ", ""))
		if err != nil {
			t.Errorf("%s: worst case %q: %v", name, cell, err)
			continue
		}
		if got != d.Round(100*time.Millisecond) {
			t.Errorf("%s: the table says %s, the defaults give %s", name, cell, d)
		}
	}
	for name := range rows {
		if _, ok := want[name]; !ok {
			t.Errorf("the table's row %q is not pinned by this test (add it to Retries)", name)
		}
	}
}

// The totals add up their loops (sink.TestRetries checks the Kafka
// side's), and follow the settings.
func TestRetries(t *testing.T) {
	cfg := config.Default()
	cfg.Kafka.MaxAttempts, cfg.Kafka.DeliveryTimeout = 1, 0
	cfg.Kafka.DialTimeout, cfg.Kafka.WriteTimeout = time.Second, 2*time.Second
	b := Retries(cfg)
	if b.Retries != cfg.Kafka.Retries() {
		t.Errorf("Kafka's loops %+v, want sink's %+v", b.Retries, cfg.Kafka.Retries())
	}
	// One try of 3 s, or delivery-timeout 0 + 1 s + a try; the rounds
	// behind it as long again.
	if b.Batch != 4*time.Second || b.KafkaToRestart != 8*time.Second+b.FinalWrite+b.RestartBackoff {
		t.Errorf("Batch = %s, KafkaToRestart = %s; want 4s, 8s + %s + %s", b.Batch, b.KafkaToRestart, b.FinalWrite, b.RestartBackoff)
	}
	if b.KafkaToRestartExactlyOnce != max(b.Batch, b.CoordinatorCall)+b.Redo+b.FinalWrite+b.RestartBackoff ||
		b.SourceToRestart != cfg.Source.ReadTimeout+b.FinalWrite+b.RestartBackoff {
		t.Errorf("totals %+v", b)
	}
	cfg.HA.TTL, cfg.HA.Margin = 20*time.Second, 0
	if b := Retries(cfg); b.RedisToLeaseLoss != 16*time.Second {
		t.Errorf("lease-ttl 20s: lease loss after %s, want 16s", b.RedisToLeaseLoss)
	}
}
