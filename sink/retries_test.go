package sink

import (
	"testing"
	"time"
)

// Retries adds up the loops' own bounds (backoffDelay, concurrentDelay,
// txnRedos, leaderTries, leaderGap) under a configuration: a change to a
// loop's timing fails here (and in pipeline.TestRetriesTable, which pins
// docs/operations.md's figures), until the figures say it.
func TestRetries(t *testing.T) {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, c := range []struct {
		name string
		set  func(*Config)
		want Retries
	}{
		// 5 tries of 12 s and backoffs of 0.1, 0.4, 0.9 and 1 s (62.4 s) >
		// delivery-timeout 30 s + 1 s + 12 s; a coordinator call adds
		// 199 CONCURRENT_TRANSACTIONS waits of 2, 4, 8 and 10 ms (1.974 s);
		// a transaction 3 × (4 calls + a batch) + 0.1 + 0.4 s.
		{"defaults", func(*Config) {}, Retries{
			Request: 12 * time.Second, Batch: ms(62400), CoordinatorCall: ms(64374),
			Failure: ms(62400), FailureExactlyOnce: ms(64374),
			Transaction: ms(960188), Redo: ms(960188), Behind: ms(62400), LeaderWaits: ms(2700),
			ToFailure: ms(124800), ToFailureExactlyOnce: ms(1024562)}},
		// One try of 3 s, or delivery-timeout 0 + 1 s + a try.
		{"one attempt", func(c *Config) {
			c.MaxAttempts, c.DeliveryTimeout, c.DialTimeout, c.WriteTimeout = 1, 0, time.Second, 2*time.Second
		}, Retries{
			Request: 3 * time.Second, Batch: 4 * time.Second, CoordinatorCall: ms(4974),
			Failure: 4 * time.Second, FailureExactlyOnce: ms(4974),
			Transaction: ms(72188), Redo: ms(72188), Behind: 4 * time.Second, LeaderWaits: ms(2700),
			ToFailure: 8 * time.Second, ToFailureExactlyOnce: ms(77162)}},
		// 3 tries of 3 s and backoffs of 0.1 and 0.4 s (9.5 s) < 30 s + 1 s + 3 s.
		{"delivery-timeout", func(c *Config) {
			c.MaxAttempts, c.DialTimeout, c.WriteTimeout = 3, time.Second, 2*time.Second
		}, Retries{
			Request: 3 * time.Second, Batch: 34 * time.Second, CoordinatorCall: ms(11474),
			Failure: 34 * time.Second, FailureExactlyOnce: 34 * time.Second,
			Transaction: ms(240188), Redo: ms(240188), Behind: 34 * time.Second, LeaderWaits: ms(2700),
			ToFailure: 68 * time.Second, ToFailureExactlyOnce: ms(274188)}},
	} {
		cfg := DefaultConfig()
		c.set(&cfg)
		if got := cfg.Retries(); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}
