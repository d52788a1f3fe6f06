package consumer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

// in is one fed record: conversation, seq_no, event id, and whether it is
// a replay (replayed=true, replay_id).
type in struct {
	conv, seq int64
	id        uint64
	replayed  bool
}

// msgs turns the records into the publisher's messages at offsets 0, 1, ….
func msgs(recs []in) []kafka.Message {
	out := make([]kafka.Message, len(recs))
	for i, r := range recs {
		h := []kafka.Header{
			{Key: HeaderEventID, Value: []byte(strconv.FormatUint(r.id, 10))},
			{Key: HeaderEventType, Value: []byte("message.created")},
			{Key: HeaderMessageID, Value: []byte(strconv.FormatInt(r.conv*1_000_000+r.seq, 10))},
			{Key: HeaderSeqNo, Value: []byte(strconv.FormatInt(r.seq, 10))},
			{Key: HeaderSenderID, Value: []byte("1")},
			{Key: HeaderReceiverID, Value: []byte("2")},
			{Key: HeaderCreatedAt, Value: []byte("2026-12-01 09:00:00")},
			{Key: HeaderBinlogPos, Value: []byte("bin.000001:" + strconv.Itoa(400+i))},
			{Key: HeaderTxnEnd, Value: []byte("bin.000001:" + strconv.Itoa(500+i))},
		}
		if r.replayed {
			h = append(h, kafka.Header{Key: HeaderReplayed, Value: []byte("true")}, kafka.Header{Key: HeaderReplayID, Value: []byte("r-1")})
		}
		out[i] = kafka.Message{Topic: "t", Partition: 0, Offset: int64(i), Key: []byte(strconv.FormatInt(r.conv, 10)),
			Value: []byte(fmt.Sprintf(`{"seq":%d}`, r.seq)), Headers: h}
	}
	return out
}

// seqs is 1..n of conversation conv with ids base+1..base+n.
func seqs(conv int64, from, to int64, base uint64, replayed bool) []in {
	var out []in
	for s := from; s <= to; s++ {
		out = append(out, in{conv: conv, seq: s, id: base + uint64(s), replayed: replayed})
	}
	return out
}

func cat(parts ...[]in) []in { return slices.Concat(parts...) }

type handled struct {
	conv, seq int64
	late      bool
}

func TestPartitionOrderDedupeGaps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		window    int
		feed      []in
		want      []handled // what the handler gets, in order
		gaps      []Gap     // After, Next, Key only
		dups      int
		late      int
		replayDup int // duplicates among replayed=true records
	}{
		{name: "in order", feed: seqs(1, 1, 5, 100, false),
			want: []handled{{1, 1, false}, {1, 2, false}, {1, 3, false}, {1, 4, false}, {1, 5, false}}},
		{name: "duplicates right after and later", feed: []in{{1, 1, 101, false}, {1, 2, 102, false}, {1, 2, 102, false}, {1, 3, 103, false}, {1, 1, 101, false}},
			want: []handled{{1, 1, false}, {1, 2, false}, {1, 3, false}}, dups: 2},
		{name: "publisher resend after kill -9: the tail again",
			feed: cat(seqs(1, 1, 4, 100, false), seqs(1, 3, 4, 100, false), seqs(1, 5, 6, 100, false)),
			want: []handled{{1, 1, false}, {1, 2, false}, {1, 3, false}, {1, 4, false}, {1, 5, false}, {1, 6, false}}, dups: 2},
		{name: "replayed range already handled: deduped",
			feed: cat(seqs(1, 1, 6, 100, false), seqs(1, 2, 4, 100, true), seqs(1, 7, 7, 100, false)),
			want: []handled{{1, 1, false}, {1, 2, false}, {1, 3, false}, {1, 4, false}, {1, 5, false}, {1, 6, false}, {1, 7, false}},
			dups: 3, replayDup: 3},
		{name: "gap reported, then handled",
			feed: cat(seqs(1, 1, 2, 100, false), seqs(1, 5, 6, 100, false)),
			want: []handled{{1, 1, false}, {1, 2, false}, {1, 5, false}, {1, 6, false}},
			gaps: []Gap{{Key: "1", After: 2, Next: 5}}},
		{name: "gap filled by a replay: late records, the sequence goes on",
			feed: cat(seqs(1, 1, 2, 100, false), seqs(1, 5, 5, 100, false), seqs(1, 3, 5, 100, true), seqs(1, 6, 6, 100, false)),
			want: []handled{{1, 1, false}, {1, 2, false}, {1, 5, false}, {1, 3, true}, {1, 4, true}, {1, 6, false}},
			gaps: []Gap{{Key: "1", After: 2, Next: 5}}, late: 2, dups: 1, replayDup: 1},
		{name: "interleaved conversations, a gap in one only",
			feed: []in{{1, 1, 101, false}, {2, 1, 201, false}, {1, 2, 102, false}, {2, 3, 203, false}, {1, 3, 103, false}, {2, 4, 204, false}},
			want: []handled{{1, 1, false}, {2, 1, false}, {1, 2, false}, {2, 3, false}, {1, 3, false}, {2, 4, false}},
			gaps: []Gap{{Key: "2", After: 1, Next: 3}}},
		{name: "first record seen is the baseline: no gap",
			feed: seqs(3, 40, 42, 300, false),
			want: []handled{{3, 40, false}, {3, 41, false}, {3, 42, false}}},
		{name: "duplicate older than the window, no store: handled late, never lost",
			window: 2, feed: cat(seqs(1, 1, 4, 100, false), seqs(1, 1, 1, 100, true)),
			want: []handled{{1, 1, false}, {1, 2, false}, {1, 3, false}, {1, 4, false}, {1, 1, true}}, late: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []handled
			var gaps []Gap
			h := HandlerFunc(func(_ context.Context, r *Record) error {
				got = append(got, handled{r.ConversationID, r.SeqNo, r.Late})
				return nil
			})
			c, err := New(Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g", Window: tc.window}, h, Options{
				OnGap: func(_ context.Context, g Gap) error {
					gaps = append(gaps, Gap{Key: g.Key, After: g.After, Next: g.Next})
					return nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			p := c.newPartition("t", 0)
			feed := msgs(tc.feed)
			for _, m := range feed {
				if err := p.process(context.Background(), m); err != nil {
					t.Fatalf("offset %d: %v", m.Offset, err)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("handled\n %v\nwant\n %v", got, tc.want)
			}
			if !slices.Equal(gaps, tc.gaps) {
				t.Errorf("gaps %v, want %v", gaps, tc.gaps)
			}
			if d := p.done.Load(); d != int64(len(feed)) {
				t.Errorf("done = %d, want %d (every record processed)", d, len(feed))
			}
			check := func(name string, got float64, want int) {
				t.Helper()
				if int(got) != want {
					t.Errorf("%s = %v, want %d", name, got, want)
				}
			}
			check("duplicates", testutil.ToFloat64(c.metrics.records.WithLabelValues("t", "duplicate")), tc.dups)
			check("late", testutil.ToFloat64(c.metrics.records.WithLabelValues("t", "late")), tc.late)
			check("replayed duplicates", testutil.ToFloat64(c.metrics.replayed.WithLabelValues("t", "duplicate")), tc.replayDup)
			check("gaps", testutil.ToFloat64(c.metrics.gaps.WithLabelValues("t")), len(tc.gaps))
			var missing int64
			for _, g := range tc.gaps {
				missing += g.Missing()
			}
			check("gap missing", testutil.ToFloat64(c.metrics.missing.WithLabelValues("t")), int(missing))
		})
	}
}

// A record that is not the publisher's is counted and skipped (no
// OnInvalid), or handed to OnInvalid.
func TestPartitionInvalidRecord(t *testing.T) {
	var n int
	c, _ := New(Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g"},
		HandlerFunc(func(context.Context, *Record) error { n++; return nil }), Options{})
	p := c.newPartition("t", 0)
	bad := kafka.Message{Topic: "t", Offset: 0, Key: []byte("7"), Value: []byte("{}")}
	if err := p.process(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	if n != 0 || p.done.Load() != 1 || testutil.ToFloat64(c.metrics.records.WithLabelValues("t", "invalid")) != 1 {
		t.Fatalf("handled %d, done %d", n, p.done.Load())
	}
	var got error
	c, _ = New(Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g"},
		HandlerFunc(func(context.Context, *Record) error { return nil }),
		Options{OnInvalid: func(_ context.Context, _ kafka.Message, err error) error { got = err; return errors.New("stop") }})
	p = c.newPartition("t", 0)
	if err := p.process(context.Background(), bad); err == nil || !errors.Is(got, ErrInvalidRecord) {
		t.Fatalf("process %v, OnInvalid got %v", err, got)
	}
	var re *RecordError
	if !errors.As(got, &re) || re.Header != HeaderEventID {
		t.Fatalf("want a RecordError naming event_id, got %v", got)
	}
}

// A failing handler is retried; after HandlerAttempts the record stays
// undone and the error names it.
func TestPartitionHandlerRetries(t *testing.T) {
	calls := 0
	c, _ := New(Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g", HandlerAttempts: 3},
		HandlerFunc(func(context.Context, *Record) error {
			calls++
			if calls < 3 {
				return errors.New("downstream busy")
			}
			return nil
		}), Options{})
	p := c.newPartition("t", 0)
	m := msgs(seqs(1, 1, 2, 100, false))
	if err := p.process(context.Background(), m[0]); err != nil || calls != 3 || p.done.Load() != 1 {
		t.Fatalf("err %v calls %d done %d", err, calls, p.done.Load())
	}
	calls = -10 // fails every attempt from now on
	err := p.process(context.Background(), m[1])
	var he *HandlerError
	if !errors.As(err, &he) || he.Attempts != 3 || he.Offset != 1 || he.EventID != "102" {
		t.Fatalf("want HandlerError after 3 attempts at offset 1, got %v", err)
	}
	if p.done.Load() != 1 {
		t.Fatalf("done = %d: the failed record must not be done", p.done.Load())
	}
}

// OnGap's error stops the partition with a GapError, the record not done.
func TestPartitionGapError(t *testing.T) {
	c, _ := New(Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g"},
		HandlerFunc(func(context.Context, *Record) error { return nil }),
		Options{OnGap: func(context.Context, Gap) error { return errors.New("strict") }})
	p := c.newPartition("t", 0)
	feed := msgs([]in{{1, 1, 1, false}, {1, 3, 3, false}})
	if err := p.process(context.Background(), feed[0]); err != nil {
		t.Fatal(err)
	}
	var ge *GapError
	if err := p.process(context.Background(), feed[1]); !errors.As(err, &ge) || ge.Gap.Missing() != 1 {
		t.Fatalf("want GapError, got %v", err)
	}
	if p.done.Load() != 1 {
		t.Fatalf("done = %d", p.done.Load())
	}
}

// With a RedisStore (on a private redis-server), duplicates are found after
// the window forgot them and by a new Consumer (a restart): each event is
// handled once overall.
func TestPartitionRedisStore(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: startRedis(t)})
	defer rdb.Close()
	store := NewRedisStore(rdb, "test:seen:", time.Minute)
	var got []handled
	h := HandlerFunc(func(_ context.Context, r *Record) error {
		got = append(got, handled{r.ConversationID, r.SeqNo, r.Late})
		return nil
	})
	feed := msgs(cat(seqs(1, 1, 5, 100, false), seqs(1, 1, 5, 100, true)))
	c, _ := New(Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g", Window: 2}, h, Options{Store: store})
	p := c.newPartition("t", 0)
	for _, m := range feed {
		if err := p.process(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	// A restarted consumer (empty window and sequence state) gets all again.
	c2, _ := New(Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g"}, h, Options{Store: store})
	p2 := c2.newPartition("t", 0)
	for _, m := range feed {
		if err := p2.process(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	want := []handled{{1, 1, false}, {1, 2, false}, {1, 3, false}, {1, 4, false}, {1, 5, false}}
	if !slices.Equal(got, want) {
		t.Fatalf("handled %v, want %v", got, want)
	}
	if d := testutil.ToFloat64(c.metrics.replayed.WithLabelValues("t", "duplicate")); d != 5 {
		t.Fatalf("replayed duplicates %v, want 5", d)
	}
	ttl, err := rdb.PTTL(context.Background(), "test:seen:101").Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL of a marked id: %v %v", ttl, err)
	}
	// Stopping while the handler runs (ctx cancelled, the handler still
	// succeeds): the record is marked anyway, so the next owner skips it.
	ctx, cancel := context.WithCancel(context.Background())
	stopping := HandlerFunc(func(context.Context, *Record) error { cancel(); return nil })
	c4, _ := New(Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g"}, stopping, Options{Store: store})
	p4 := c4.newPartition("t", 0)
	if err := p4.process(ctx, msgs([]in{{9, 1, 901, false}})[0]); err != nil {
		t.Fatal(err)
	}
	if seen, err := store.Seen(context.Background(), "901"); err != nil || !seen || p4.done.Load() != 1 {
		t.Fatalf("handled during shutdown: marked %v (%v), done %d", seen, err, p4.done.Load())
	}
	// Store down: Seen fails, retried, then a StoreError.
	rdb.Close()
	c3, _ := New(Config{Brokers: []string{"x:1"}, Topics: []string{"t"}, Group: "g", HandlerAttempts: 2}, h, Options{Store: store})
	var se *StoreError
	if err := c3.newPartition("t", 0).process(context.Background(), feed[0]); !errors.As(err, &se) || se.Op != "seen" {
		t.Fatalf("want StoreError(seen), got %v", err)
	}
}

// startRedis runs a private redis-server (from the dev stack's packages)
// on a free loopback port for the test; skipped when none is installed.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed (scripts/dev-stack.sh up installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if i > 200 {
			t.Fatalf("redis-server did not listen on %s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
