package config

import (
	"strings"
	"testing"
	"time"
)

// latency-budget derives source.linger and kafka.transaction-interval
// unless the file or the environment sets them; every source entry
// inherits the top level's unless it sets the key itself.
func TestLatencyBudgetDerives(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name, yaml string
		env        map[string]string
		// want: the budget, linger and transaction interval of the top
		// level, then of each source entry
		want [][3]time.Duration
	}{
		{"defaults", "", nil, [][3]time.Duration{{15 * ms, 3 * ms, 100 * ms}}},
		{"a budget", "latency-budget: 100ms\n", nil, [][3]time.Duration{{100 * ms, 10 * ms, 100 * ms}}},
		{"a long budget", "latency-budget: 2s\n", nil, [][3]time.Duration{{2 * time.Second, 10 * ms, 2 * time.Second}}},
		{"linger given", "latency-budget: 100ms\nsource: {linger: 1ms}\n", nil, [][3]time.Duration{{100 * ms, ms, 100 * ms}}},
		{"linger 0 given", "latency-budget: 100ms\nsource: {linger: 0s}\n", nil, [][3]time.Duration{{100 * ms, 0, 100 * ms}}},
		{"interval given", "latency-budget: 2s\nkafka: {transaction-interval: 50ms}\n", nil, [][3]time.Duration{{2 * time.Second, 10 * ms, 50 * ms}}},
		{"budget and linger from the environment", "", map[string]string{"CDC_OUTBOX_LATENCY_BUDGET": "50ms", "CDC_OUTBOX_SOURCE_LINGER": "2ms"},
			[][3]time.Duration{{50 * ms, 2 * ms, 100 * ms}}},
		{"sources inherit unless they set it", "latency-budget: 20ms\nsources:\n  - name: a\n  - name: b\n    source: {linger: 7ms}\n", nil,
			[][3]time.Duration{{20 * ms, 4 * ms, 100 * ms}, {20 * ms, 4 * ms, 100 * ms}, {20 * ms, 7 * ms, 100 * ms}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := Load(writeConfig(t, c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got := [][3]time.Duration{{cfg.Kafka.LatencyBudget, cfg.Source.Linger, cfg.Kafka.TransactionInterval}}
			for _, e := range cfg.Sources {
				got = append(got, [3]time.Duration{e.Kafka.LatencyBudget, e.Source.Linger, e.Kafka.TransactionInterval})
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d sections, want %d", len(got), len(c.want))
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("section %d: budget, linger, transaction interval = %v, want %v", i, got[i], c.want[i])
				}
			}
			if c.yaml == "" && c.env == nil {
				d := Default()
				if d.Source.Linger != cfg.Source.Linger || d.Kafka.TransactionInterval != cfg.Kafka.TransactionInterval || d.Kafka.LatencyBudget != cfg.Kafka.LatencyBudget {
					t.Errorf("Default() = linger %s, interval %s, budget %s; Load of nothing: %s, %s, %s", d.Source.Linger, d.Kafka.TransactionInterval,
						d.Kafka.LatencyBudget, cfg.Source.Linger, cfg.Kafka.TransactionInterval, cfg.Kafka.LatencyBudget)
				}
			}
		})
	}
}

func TestLatencyBudgetRange(t *testing.T) {
	for _, v := range []string{"0s", "500us", "11s", "-1ms"} {
		clearEnv(t)
		cfg, err := Load(writeConfig(t, "latency-budget: "+v+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "latency-budget: ") || !strings.Contains(err.Error(), "want 1ms to 10s") {
			t.Errorf("latency-budget %s: Validate() = %v, want a latency-budget range error", v, err)
		}
	}
}
