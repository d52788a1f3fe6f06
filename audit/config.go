package audit

import (
	"errors"
	"fmt"
	"time"
)

// Config is the audit: section of the configuration (off by default).
type Config struct {
	// Enabled runs the audit inside run, beside each source's publisher
	// (or run `cdc-outbox audit` as its own process, with the same section).
	Enabled bool `yaml:"enabled" env:"ENABLED" doc:"Run the continuous audit inside run, beside each source (with ha.enabled, run the audit command as one process instead)." rule:"not with ha.enabled"`
	// Lag is how long a range of ids waits after the checkpoint passed it
	// before it is audited, so that records still in flight (a transaction
	// committed with a lower id than a later one) are not reported: a
	// missing event is reported within about Lag + 3 × Interval of its
	// commit (a suspect is confirmed a round later).
	Lag time.Duration `yaml:"lag" env:"LAG" doc:"How long after the checkpoint passed a range of ids it is audited, so that records in flight are not reported missing." rule:"at least 1s"`
	// Interval is how often the audit reads Kafka and the table.
	Interval time.Duration `yaml:"interval" env:"INTERVAL" doc:"How often the audit reads the new records and audits what the checkpoint passed." rule:"at least 100ms"`
	// RowsPerSecond bounds the rows the audit reads per second (at most
	// RowsPerSecond × Interval a round, by primary key); the audit falls
	// behind, and says so (cdc_outbox_audit_behind_ids), rather than
	// exceeding it.
	RowsPerSecond int `yaml:"rows-per-second" env:"ROWS_PER_SECOND" doc:"Rows the audit reads from the outbox table per second at most (its database load); behind, it catches up at this pace." rule:"at least 1"`
	// Sample is the fraction of event ids whose row is read and compared
	// (0 < Sample ≤ 1; chosen by id, id mod 10000 < Sample × 10000, so that
	// a restart samples the same ids). Records are all read (order and
	// partition are checked for every key).
	Sample float64 `yaml:"sample" env:"SAMPLE" doc:"The fraction of ids whose row is read and compared, chosen by id; records are all read." rule:"greater than 0, at most 1"`
	// FromID: on a first start (no audit state in Redis), audit from
	// this id on, reading the topics from their beginning (the history
	// the topics still hold); 0 begins at the present (the tables'
	// largest ids and the topics' ends at start).
	FromID uint64 `yaml:"from-id" env:"FROM_ID" doc:"First start only: audit from this id on, reading the topics from their beginning; 0 begins at the present." rule:"-"`
	// KeyIdle is how many rounds a key's order and partition are
	// remembered after its last record (bounds memory).
	KeyIdle int `yaml:"key-idle-rounds" env:"KEY_IDLE_ROUNDS" doc:"Rounds a key's partition and order are remembered after its last record (bounds memory)." rule:"at least 1"`
}

// DefaultConfig returns the defaults: off; a minute's lag; a round every
// 10 s; 5000 ids a second; every id.
func DefaultConfig() Config {
	return Config{Lag: time.Minute, Interval: 10 * time.Second, RowsPerSecond: 5000, Sample: 1, KeyIdle: 360}
}

// Validate returns every problem, joined, each naming its setting.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("audit.%s: "+format, append([]any{key}, a...)...))
	}
	if c.Lag < time.Second {
		bad("lag", "%s: want at least 1s (records in flight would be reported missing)", c.Lag)
	}
	if c.Interval < 100*time.Millisecond {
		bad("interval", "%s: want at least 100ms", c.Interval)
	}
	if c.RowsPerSecond < 1 {
		bad("rows-per-second", "%d: want at least 1", c.RowsPerSecond)
	}
	if !(c.Sample > 0 && c.Sample <= 1) {
		bad("sample", "%v: want a fraction in (0, 1], e.g. 0.1 for one id in ten", c.Sample)
	}
	if c.KeyIdle < 1 {
		bad("key-idle-rounds", "%d: want at least 1", c.KeyIdle)
	}
	return errors.Join(errs...)
}

// span is the rows one round may read.
func (c *Config) span() uint64 {
	return max(uint64(float64(c.RowsPerSecond)*c.Interval.Seconds()), 1)
}
