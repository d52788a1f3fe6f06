package sink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
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

// The Writer's recovery deadlines are its configuration's Retries.
func TestWriterDeadlines(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxAttempts = 2
	w := newWriter(cfg, nil, newFakeRounds(false, false), nil)
	if r := cfg.Retries(); w.redoLimit != r.Redo || w.behindLimit != r.Behind {
		t.Errorf("redo within %s, behind within %s; want Retries' %s, %s", w.redoLimit, w.behindLimit, r.Redo, r.Behind)
	}
}

// Exactly-once, the redo of an aborted transaction of 5 rounds, each
// produced again in a transaction of its own that takes 100 ms: together
// they must end within the redo's one deadline (250 ms here), not one
// round's worst case each (Retries.Redo bounds the whole redo). Past it
// the Writer fails with a restartable *WriteError, and the rounds not
// produced again are not acknowledged.
func TestTxnRedoDeadline(t *testing.T) {
	f := newFakeRounds(true, false)
	f.fail["23"] = []error{kafka.NotEnoughReplicas} // round 3
	f.writeTakes = 100 * time.Millisecond
	txns := pairs(25) // 5 rounds
	ck := &ackCheck{f: f, txns: txns}
	w := fakeWriter(f, 30*time.Second, ck)
	w.redoLimit = 250 * time.Millisecond
	l := collectAcks(w)
	err := result(t, start(context.Background(), w, queued(txns, true)), 10*time.Second)
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "deadline (250ms") || IsFatal(err) {
		t.Fatalf("Run = %v, want a restartable *WriteError: the redo ran out of its deadline", err)
	}
	<-l.done
	for _, b := range ck.bad {
		t.Error(b)
	}
	if got := ck.acked(); got >= 25 || !f.logged("abort") {
		t.Errorf("%d transactions acknowledged, want fewer than 25 (the redo cut); log %v", got, f.log)
	}
}

// At-least-once, a round that failed with 4 rounds in flight behind it:
// those are waited for (their outcomes decide what is sent again) within
// one deadline together (Retries.Behind), not each its own retries: here
// they are never answered, and the Writer still fails, with the failed
// round's *WriteError, once the deadline passed.
func TestBehindDeadline(t *testing.T) {
	f := newFakeRounds(false, true)
	f.fail["1"] = []error{kafka.NotEnoughReplicas}
	txns := pairs(25) // 5 rounds
	ck := &ackCheck{f: f, txns: txns}
	w := fakeWriter(f, 0, ck)
	w.behindLimit = 100 * time.Millisecond
	l := collectAcks(w)
	done := start(context.Background(), w, queued(txns, true))
	awaitLog(t, f, "begin 5")
	f.answer(1)
	err := result(t, done, 10*time.Second)
	var we *WriteError
	if !errors.As(err, &we) || we.EventID != "1" || !errors.Is(err, kafka.NotEnoughReplicas) || IsFatal(err) {
		t.Fatalf("Run = %v, want a restartable *WriteError for event 1", err)
	}
	<-l.done
	if got := ck.acked(); got != 0 {
		t.Errorf("%d transactions acknowledged, want 0", got)
	}
}
