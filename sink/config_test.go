package sink

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

func TestDefaultConfigValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	// BatchBytes must stay within the broker's default message.max.bytes.
	if c.BatchBytes > 1048588 {
		t.Errorf("default batch-bytes %d exceeds the broker default message.max.bytes 1048588", c.BatchBytes)
	}
	// Poison records stop the publisher unless dead-lettering is chosen.
	if c.OnPoison != PolicyFail || c.DeadLetterTopic != "cdc-outbox.dead-letter" {
		t.Errorf("default on-poison %q, dead-letter-topic %q", c.OnPoison, c.DeadLetterTopic)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want []string // line prefixes of the joined error; none: valid
	}{
		{name: "defaults", mod: func(*Config) {}},
		{name: "several brokers", mod: func(c *Config) { c.Brokers = []string{"k1:9092", "k2:9092", "[::1]:9092"} }},
		{name: "minimum batch", mod: func(c *Config) { c.BatchSize, c.BatchBytes, c.MaxAttempts = 1, 1024, 1 }},
		{name: "empty compression is none", mod: func(c *Config) { c.Compression = "" }},
		{name: "gzip", mod: func(c *Config) { c.Compression = "gzip" }},
		{name: "snappy", mod: func(c *Config) { c.Compression = "snappy" }},
		{name: "lz4", mod: func(c *Config) { c.Compression = "lz4" }},
		{name: "zstd", mod: func(c *Config) { c.Compression = "zstd" }},
		{name: "no brokers", mod: func(c *Config) { c.Brokers = nil }, want: []string{"kafka.brokers: required"}},
		{name: "broker without port", mod: func(c *Config) { c.Brokers = []string{"k1:9092", "k2"} }, want: []string{`kafka.brokers: "k2": want host:port`}},
		{name: "two bad brokers", mod: func(c *Config) { c.Brokers = []string{"a", "b"} }, want: []string{`kafka.brokers: "a"`, `kafka.brokers: "b"`}},
		{name: "batch size zero", mod: func(c *Config) { c.BatchSize = 0 }, want: []string{"kafka.batch-size: 0: want at least 1"}},
		{name: "batch bytes too small", mod: func(c *Config) { c.BatchBytes = 1023 }, want: []string{"kafka.batch-bytes: 1023: want at least 1024"}},
		{name: "write timeout zero", mod: func(c *Config) { c.WriteTimeout = 0 }, want: []string{"kafka.write-timeout: 0s: want > 0"}},
		{name: "write timeout negative", mod: func(c *Config) { c.WriteTimeout = -time.Second }, want: []string{"kafka.write-timeout: -1s: want > 0"}},
		{name: "max attempts zero", mod: func(c *Config) { c.MaxAttempts = 0 }, want: []string{"kafka.max-attempts: 0: want at least 1"}},
		{name: "bad compression", mod: func(c *Config) { c.Compression = "brotli" }, want: []string{`kafka.compression: "brotli": want none, gzip, snappy, lz4 or zstd`}},
		{name: "compression is case-sensitive", mod: func(c *Config) { c.Compression = "GZIP" }, want: []string{`kafka.compression: "GZIP"`}},
		{name: "transaction per round", mod: func(c *Config) { c.Delivery, c.TransactionInterval = DeliveryExactlyOnce, 0 }},
		{name: "transaction interval at its bound", mod: func(c *Config) { c.Delivery, c.TransactionInterval = DeliveryExactlyOnce, 30*time.Second }},
		{name: "transaction interval negative", mod: func(c *Config) { c.TransactionInterval = -time.Millisecond },
			want: []string{"kafka.transaction-interval: -1ms: want 0 (a transaction per round) to 30s (the transaction timeout is 1m0s)"}},
		{name: "transaction interval over half the timeout", mod: func(c *Config) { c.TransactionInterval = 31 * time.Second },
			want: []string{"kafka.transaction-interval: 31s: want 0"}},
		{name: "dead-letter policy", mod: func(c *Config) { c.OnPoison = PolicyDeadLetter }},
		{name: "fail policy without a dead-letter topic", mod: func(c *Config) { c.DeadLetterTopic = "" }},
		{name: "custom dead-letter topic", mod: func(c *Config) { c.OnPoison, c.DeadLetterTopic = PolicyDeadLetter, "im.dlq-v1_x" }},
		{name: "unknown policy", mod: func(c *Config) { c.OnPoison = "skip" }, want: []string{`kafka.on-poison: "skip": want fail or dead-letter`}},
		{name: "empty policy", mod: func(c *Config) { c.OnPoison = "" }, want: []string{`kafka.on-poison: "": want fail or dead-letter`}},
		{name: "dead-letter without topic", mod: func(c *Config) { c.OnPoison, c.DeadLetterTopic = PolicyDeadLetter, "" },
			want: []string{"kafka.dead-letter-topic: required with on-poison: dead-letter"}},
		{name: "invalid dead-letter topic", mod: func(c *Config) { c.DeadLetterTopic = "dead letters" },
			want: []string{`kafka.dead-letter-topic: "dead letters": not a valid Kafka topic name: character ' ' at 4`}},
		{name: "dead-letter topic template", mod: func(c *Config) { c.DeadLetterTopic = "dlq.{event_type}" },
			want: []string{`kafka.dead-letter-topic: "dlq.{event_type}"`}},
		{
			name: "all problems joined",
			mod:  func(c *Config) { *c = Config{Compression: "x", DeadLetterTopic: ".."} },
			want: []string{"kafka.brokers:", "kafka.batch-size:", "kafka.batch-bytes:", "kafka.write-timeout:", "kafka.dial-timeout:", "kafka.max-attempts:", "kafka.compression:",
				"kafka.on-poison:", "kafka.dead-letter-topic:"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.mod(&cfg)
			err := cfg.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %v", c.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(c.want) {
				t.Fatalf("Validate() gave %d errors, want %d:\n%v", len(lines), len(c.want), err)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %d = %q, want prefix %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestCompression(t *testing.T) {
	cases := []struct {
		name string
		want compress.Compression // 0: no codec
	}{
		{"", 0}, {"none", 0},
		{"gzip", compress.Gzip}, {"snappy", compress.Snappy}, {"lz4", compress.Lz4}, {"zstd", compress.Zstd},
	}
	for _, c := range cases {
		codec, err := compression(c.name)
		if err != nil {
			t.Errorf("compression(%q): %v", c.name, err)
			continue
		}
		if c.want == 0 {
			if codec != nil {
				t.Errorf("compression(%q) = %v, want no codec", c.name, codec)
			}
			continue
		}
		if codec == nil || codec.Code() != int8(c.want) {
			t.Errorf("compression(%q) = %v, want %v", c.name, codec, c.want)
		}
	}
}

// kafkaTotalSize is kafka-go v0.4.51's (*Message).totalSize (message.go),
// which Writer.WriteMessages compares against BatchBytes and writeBatch.add
// sums per batch:
//
//	size()       = 4 + 1 + 1 + sizeofBytes(Key) + sizeofBytes(Value) + timestampSize
//	             = crc + magic + attributes + (4+len(key)) + (4+len(value)) + 8
//	headerSize() = varArrayLen(len(Headers), varStringLen(h.Key) + varBytesLen(h.Value))
//
// where varXLen(b) = varIntLen(len(b)) + len(b) and varIntLen is the length
// of the zig-zag varint.
func kafkaTotalSize(m *kafka.Message) int64 {
	size := int64(4+1+1) + int64(4+len(m.Key)) + int64(4+len(m.Value)) + 8
	h := int64(varIntLen(int64(len(m.Headers))))
	for _, hd := range m.Headers {
		h += int64(varIntLen(int64(len(hd.Key))) + len(hd.Key) + varIntLen(int64(len(hd.Value))) + len(hd.Value))
	}
	return size + h
}

// varIntLen is kafka-go's write.go varIntLen.
func varIntLen(i int64) int {
	u := uint64((i << 1) ^ (i >> 63))
	n := 0
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n + 1
}

func TestVarIntLen(t *testing.T) {
	// Zig-zag: n encodes as 2n, so 7 bits hold 0..63.
	for _, c := range []struct {
		n    int64
		want int
	}{{0, 1}, {63, 1}, {64, 2}, {8191, 2}, {8192, 3}, {1 << 20, 4}, {1<<27 - 1, 4}, {1 << 27, 5}} {
		if got := varIntLen(c.n); got != c.want {
			t.Errorf("varIntLen(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestEstimateIsUpperBoundOfKafkaSize(t *testing.T) {
	sizes := []int{0, 1, 63, 64, 127, 128, 8191, 8192, 65535, 65536, 1<<20 - 1, 1 << 20}
	buf := make([]byte, 1<<20)
	headerSizes := []int{0, 1, 8, 63, 64, 300, 8192}
	for nh := 0; nh <= 20; nh++ {
		for _, ks := range sizes {
			for _, vs := range sizes {
				for _, hs := range headerSizes {
					m := kafka.Message{Topic: "im.events", Key: buf[:ks], Value: buf[:vs], Time: time.Unix(1, 0)}
					for i := 0; i < nh; i++ {
						// Header keys and values of various lengths, including
						// empty ones (the per-header overhead dominates).
						key := strings.Repeat("k", (i*7+hs)%97)
						m.Headers = append(m.Headers, kafka.Header{Key: key, Value: buf[:(hs+i)%len(buf)]})
					}
					exact := kafkaTotalSize(&m)
					floor := int64(ks + vs + 49)
					for _, h := range m.Headers {
						floor += int64(len(h.Key) + len(h.Value))
					}
					got := estimate(&m)
					if got < exact || got < floor {
						t.Fatalf("estimate = %d < kafka-go totalSize %d (floor %d) for key %d, value %d, %d headers of ~%d bytes",
							got, exact, floor, ks, vs, nh, hs)
					}
				}
			}
		}
	}
}

// A message exactly at batch-bytes by estimate is accepted by kafka-go's
// own size check, and sums of estimates bound the sums kafka-go batches by.
func TestEstimateRoundFitsKafkaBatch(t *testing.T) {
	msgs := []kafka.Message{
		{Key: []byte("1001"), Value: make([]byte, 700), Headers: []kafka.Header{{Key: "event_id", Value: []byte("42")}, {Key: "event_type", Value: []byte("message.created")}}},
		{Key: []byte("1002"), Value: make([]byte, 0)},
		{Value: make([]byte, 300_000), Headers: make([]kafka.Header, 20)},
	}
	var est, exact int64
	for i := range msgs {
		est += estimate(&msgs[i])
		exact += kafkaTotalSize(&msgs[i])
	}
	if est < exact {
		t.Errorf("sum of estimates %d < kafka-go batch bytes %d", est, exact)
	}
}

func TestIsFatal(t *testing.T) {
	tooLarge := &WriteError{EventID: "1", Topic: "t", Err: fmt.Errorf("%w: 2000000 bytes > kafka.batch-bytes 1000000", ErrRecordTooLarge)}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"record too large", ErrRecordTooLarge, true},
		{"record too large in a WriteError", tooLarge, true},
		{"record too large wrapped again", fmt.Errorf("pipeline: %w", tooLarge), true},
		{"invalid topic", kafka.InvalidTopic, true},
		{"invalid topic in a WriteError", &WriteError{Err: kafka.InvalidTopic}, true},
		{"poison record", &PoisonError{EventID: "1", Reason: ReasonInvalidJSON, Err: ErrInvalidJSON}, true},
		{"poison record wrapped", fmt.Errorf("pipeline: %w", &PoisonError{Reason: ReasonInvalidTopic, Err: errors.New("x")}), true},
		{"dead-letter write, unknown topic", &WriteError{Topic: "cdc-outbox.dead-letter", Err: kafka.UnknownTopicOrPartition}, false},
		{"topic authorization", &WriteError{Err: kafka.TopicAuthorizationFailed}, true},
		{"cluster authorization", kafka.ClusterAuthorizationFailed, true},
		{"SASL authentication", kafka.SASLAuthenticationFailed, true},
		{"unsupported version", kafka.UnsupportedVersion, true},
		{"leader not available", kafka.LeaderNotAvailable, false},
		{"leader not available in a WriteError", &WriteError{Err: kafka.LeaderNotAvailable}, false},
		{"not leader for partition", kafka.NotLeaderForPartition, false},
		{"request timed out", kafka.RequestTimedOut, false},
		{"not enough replicas", kafka.NotEnoughReplicas, false},
		{"unknown topic (auto-creation may be pending)", kafka.UnknownTopicOrPartition, false},
		{"network", &WriteError{Err: io.ErrUnexpectedEOF}, false},
		{"context", &WriteError{Err: errors.New("context deadline exceeded")}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := IsFatal(c.err); got != c.want {
				t.Errorf("IsFatal(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

func TestWriteErrorMessage(t *testing.T) {
	err := error(&WriteError{EventID: "42", Topic: "im.events", Err: kafka.LeaderNotAvailable})
	for _, want := range []string{"event 42", "topic im.events", "Leader Not Available"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not contain %q", err.Error(), want)
		}
	}
	if !errors.Is(err, kafka.LeaderNotAvailable) {
		t.Error("WriteError does not unwrap to its cause")
	}
}
