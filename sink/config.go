package sink

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/cdc-outbox/cdc-outbox/router"
)

// Config configures the Kafka producer.
type Config struct {
	// Brokers are the bootstrap brokers, host:port.
	Brokers []string `yaml:"brokers" env:"BROKERS" doc:"The bootstrap brokers." rule:"at least one host:port"`
	// BatchSize is the most records sent in one produce round.
	BatchSize int `yaml:"batch-size" env:"BATCH_SIZE" doc:"The most records sent in one produce round." rule:"at least 1"`
	// BatchBytes is the most bytes sent in one produce round, and the
	// largest record accepted. Keep it at or below the broker's
	// message.max.bytes (1048588 by default) and the topics' max.message.bytes.
	BatchBytes int64 `yaml:"batch-bytes" env:"BATCH_BYTES" doc:"The most bytes sent in one produce round, and the largest record accepted; keep it at or below the broker's message.max.bytes." rule:"at least 1024"`
	// WriteTimeout bounds one produce request.
	WriteTimeout time.Duration `yaml:"write-timeout" env:"WRITE_TIMEOUT" doc:"Bound on one produce request." rule:"> 0"`
	// Idempotent makes the producer idempotent (KIP-98, as the Java
	// client's enable.idempotence=true): the broker writes each batch
	// once and in order whatever the retries, and up to 5 rounds may be
	// in flight. The brokers must allow IDEMPOTENT_WRITE on the cluster
	// (the default without ACLs). On by default.
	Idempotent bool `yaml:"idempotent" env:"IDEMPOTENT" doc:"Use the idempotent producer (KIP-98): each batch written once and in order whatever the retries; false for brokers or ACLs that refuse IDEMPOTENT_WRITE." rule:"true with delivery exactly-once"`
	// Delivery is the delivery guarantee: DeliveryAtLeastOnce
	// ("at-least-once", the default: the idempotent producer; a restart
	// publishes the records after the checkpoint again) or
	// DeliveryExactlyOnce ("exactly-once": the produce rounds go into Kafka
	// transactions, KIP-98, and a restart resumes after the last committed
	// one, so that a consumer reading with isolation.level=read_committed
	// sees each event once; see docs/delivery.md). Exactly-once needs
	// Idempotent and Kafka 3.6 or later (KIP-890 partition verification);
	// one transaction is open at a time, holding up to MaxInFlight rounds
	// in flight (TransactionInterval).
	Delivery string `yaml:"delivery" env:"DELIVERY" doc:"at-least-once (a restart publishes the records after the checkpoint again) or exactly-once (Kafka transactions, for read_committed consumers; docs/delivery.md)." rule:"at-least-once, exactly-once or empty (at-least-once)"`
	// TransactionInterval is how long a Kafka transaction of exactly-once
	// delivery stays open for more rounds while rounds keep coming (as
	// Kafka Streams' commit.interval.ms): a round begun once it is this
	// old commits the transaction first (when the transaction ends on a
	// whole binlog transaction; forced after TransactionTimeout/4). A
	// Writer that ran dry (nothing gathered nor queued, no round in
	// flight) commits once the previous commit is CommitSpacing old (this
	// interval, at least Split(LatencyBudget).Gap): at once at a trickle,
	// at most once per interval at a steady rate (with LatencyBudget 0,
	// at once); a shutdown commits at once. The records of
	// a round are acknowledged to the checkpoint only after the commit of
	// its transaction. 0: one round per transaction. Default
	// Split(latency-budget).TransactionInterval (100 ms up to a 100 ms
	// budget, else the budget); at most TransactionTimeout/2 (30 s).
	TransactionInterval time.Duration `yaml:"transaction-interval" env:"TRANSACTION_INTERVAL" doc:"How long a Kafka transaction of exactly-once delivery stays open for more produce rounds, and so the least time between two commits at a steady rate (a read_committed consumer sees a record up to this much after its append; at a trickle at once); derived from latency-budget unless set (100ms up to a 100ms budget, else the budget); 0: a commit per round (at most one per latency-budget gap)." rule:"0 to 30s"`
	// LatencyBudget is the configuration's top-level latency-budget (set
	// by package config, not a key of this section): the Writer starts a
	// round less than half full at most once per Split(LatencyBudget).Gap
	// (budget.go). 0: each round as soon as the previous one is answered
	// (the cadence before the budget; tests and the raw produce bench).
	// Validated with the top-level key (config.Config.Validate).
	LatencyBudget time.Duration `yaml:"-"`
	// TransactionalID is the Kafka transactional.id of exactly-once
	// delivery; "" derives it from the checkpoint key
	// (DefaultTransactionalID). Two publishers with the same id fence each
	// other (the newer one wins: PRODUCER_FENCED stops the older), so it
	// must be unique per source and stable across restarts.
	TransactionalID string `yaml:"transactional-id" env:"TRANSACTIONAL_ID" doc:"The transactional.id of exactly-once delivery, unique per source and stable across restarts; empty: derived from checkpoint.key." rule:"only with delivery exactly-once; at most 249 characters, no NUL or newline"`
	// txnID is the transactional id in use: set only by Transactional,
	// for the publisher's own Writer (tools such as replay and dead-letter
	// republish never take over the publisher's id).
	txnID string
	// DialTimeout bounds connecting to a broker, its API version
	// handshake and a metadata request: how long a dead or paused broker
	// can hold the producer before the next broker is tried.
	DialTimeout time.Duration `yaml:"dial-timeout" env:"DIAL_TIMEOUT" doc:"Bound on connecting to a broker (with its handshake and a metadata request) before the next broker is tried, in run and in every command; a broker that accepts connections and answers nothing fails naming this key (a produce or transaction request: kafka.write-timeout)." rule:"> 0"`
	// MaxAttempts and DeliveryTimeout bound the retries of a batch that
	// failed with a retriable error: it is sent again until it was tried
	// MaxAttempts times and DeliveryTimeout passed since its first try
	// (as the Java client's delivery.timeout.ms); then the pipeline stops
	// and restarts from the last checkpoint, which sends again, as
	// duplicates, records written after it. DeliveryTimeout (30 s by
	// default) outlasts a broker failure on a cluster: Kafka fences a dead
	// or paused broker after broker.session.timeout.ms (9 s by default)
	// and moves its partitions' leadership, and the Producer follows. 0
	// bounds the retries by MaxAttempts alone.
	MaxAttempts     int           `yaml:"max-attempts" env:"MAX_ATTEMPTS" doc:"How many times a batch that failed with a retriable error is tried before the pipeline restarts from the checkpoint." rule:"at least 1"`
	DeliveryTimeout time.Duration `yaml:"delivery-timeout" env:"DELIVERY_TIMEOUT" doc:"How long a failed batch is retried (with max-attempts) before the pipeline restarts from the checkpoint; 0: max-attempts alone." rule:">= 0"`
	// Compression is none, gzip, snappy, lz4 or zstd.
	Compression string `yaml:"compression" env:"COMPRESSION" doc:"The record batches' compression." rule:"none, gzip, snappy, lz4, zstd or empty (none)"`
	// AllowAutoTopicCreation lets the broker create missing topics
	// (with its default partition count).
	AllowAutoTopicCreation bool `yaml:"allow-auto-topic-creation" env:"ALLOW_AUTO_TOPIC_CREATION" doc:"Let the broker create missing topics with its default settings." rule:"-"`
	// OnPoison is what to do with a poison record (see Check): PolicyFail
	// ("fail", the default) stops the publisher with an error naming the
	// event; PolicyDeadLetter ("dead-letter") writes a record to
	// DeadLetterTopic in its place and carries on.
	OnPoison string `yaml:"on-poison" env:"ON_POISON" doc:"What a poison record (invalid JSON, too large, invalid or missing topic) does: fail stops the publisher, dead-letter writes it to dead-letter-topic and carries on (docs/poison.md)." rule:"fail or dead-letter"`
	// DeadLetterTopic receives the dead-letter records under PolicyDeadLetter.
	// Create it like the other topics; it must differ from router.topic,
	// the mappings' topics and checkpoint.mirror-topic (config checks),
	// and no record is routed to it (router.CheckTopic).
	DeadLetterTopic string `yaml:"dead-letter-topic" env:"DEAD_LETTER_TOPIC" doc:"The topic receiving poison records under on-poison dead-letter." rule:"a valid topic name; required with on-poison dead-letter; not a topic records are routed to, nor checkpoint.mirror-topic"`
	// MissingTopic is what a record for a topic that does not exist is:
	// MissingTopicPoison ("poison", the default), a poison record
	// (missing_topic) under OnPoison once the topic is still missing after
	// MaxAttempts and DeliveryTimeout; MissingTopicCreate ("create"), the
	// publisher creates it as TopicCreation says (refused: the publisher
	// stops with the broker's reason). See docs/poison.md.
	MissingTopic string `yaml:"missing-topic" env:"MISSING_TOPIC" doc:"A record for a topic that does not exist: poison (a missing_topic poison record once it is still missing after the retries) or create (the publisher creates it as topic-creation says)." rule:"poison, create or empty (poison)"`
	// TopicCreation: partitions, replication factor and configs of the
	// topics created under MissingTopicCreate.
	TopicCreation TopicCreation `yaml:"topic-creation" envPrefix:"TOPIC_CREATION_" doc:"The topics created under missing-topic create."`
	// TLS and SASL secure every Kafka connection of every command
	// (security.go): producer, metadata and the partition readers.
	TLS  secure.TLS `yaml:"tls" envPrefix:"TLS_" doc:"TLS for every Kafka connection of every command (SSL and SASL_SSL listeners)."`
	SASL SASL       `yaml:"sasl" envPrefix:"SASL_" doc:"SASL login for every Kafka connection of every command."`
}

// Poison policies accepted in Config.OnPoison.
const (
	PolicyFail       = "fail"
	PolicyDeadLetter = "dead-letter"
)

// DefaultDeadLetterTopic is the default Config.DeadLetterTopic.
const DefaultDeadLetterTopic = "cdc-outbox.dead-letter"

// DefaultTransactionInterval is the default Config.TransactionInterval.
const DefaultTransactionInterval = 100 * time.Millisecond

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Brokers:         []string{"127.0.0.1:9092"},
		BatchSize:       2000,
		BatchBytes:      1000000,
		WriteTimeout:    10 * time.Second,
		MaxAttempts:     5,
		DeliveryTimeout: 30 * time.Second,
		Compression:     "none",
		Idempotent:      true,
		DialTimeout:     2 * time.Second,
		Delivery:        DeliveryAtLeastOnce,

		TransactionInterval: Split(DefaultLatencyBudget).TransactionInterval,
		LatencyBudget:       DefaultLatencyBudget,

		OnPoison:        PolicyFail,
		DeadLetterTopic: DefaultDeadLetterTopic,

		MissingTopic:  MissingTopicPoison,
		TopicCreation: TopicCreation{Partitions: -1, ReplicationFactor: -1},
	}
}

// Validate checks the configuration and returns all problems joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("kafka.%s: %s", field, fmt.Sprintf(format, a...)))
	}
	if len(c.Brokers) == 0 {
		bad("brokers", "required: at least one host:port")
	}
	for _, b := range c.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" {
			bad("brokers", "%q: want host:port", b)
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			bad("brokers", "%q: bad port", b)
		}
	}
	if c.BatchSize < 1 {
		bad("batch-size", "%d: want at least 1", c.BatchSize)
	}
	if c.BatchBytes < 1024 {
		bad("batch-bytes", "%d: want at least 1024", c.BatchBytes)
	}
	if c.WriteTimeout <= 0 {
		bad("write-timeout", "%s: want > 0", c.WriteTimeout)
	}
	if c.DialTimeout <= 0 {
		bad("dial-timeout", "%s: want > 0", c.DialTimeout)
	}
	if c.MaxAttempts < 1 {
		bad("max-attempts", "%d: want at least 1", c.MaxAttempts)
	}
	if c.DeliveryTimeout < 0 {
		bad("delivery-timeout", "%s: want 0 (max-attempts alone) or more", c.DeliveryTimeout)
	}
	switch c.Delivery {
	case "", DeliveryAtLeastOnce:
	case DeliveryExactlyOnce:
		if !c.Idempotent {
			bad("delivery", "%s needs kafka.idempotent: true (a transactional producer is idempotent)", c.Delivery)
		}
	default:
		bad("delivery", "%q: want %s or %s", c.Delivery, DeliveryAtLeastOnce, DeliveryExactlyOnce)
	}
	if c.TransactionInterval < 0 || c.TransactionInterval > TransactionTimeout/2 {
		bad("transaction-interval", "%s: want 0 (a transaction per round) to %s (the transaction timeout is %s)", c.TransactionInterval, TransactionTimeout/2, TransactionTimeout)
	}
	if c.TransactionalID != "" && c.Delivery != DeliveryExactlyOnce {
		bad("transactional-id", "%q: only used with kafka.delivery: exactly-once (delivery is %s): remove it, or set kafka.delivery: exactly-once", c.TransactionalID, cmp.Or(c.Delivery, DeliveryAtLeastOnce))
	}
	if len(c.TransactionalID) > 249 || strings.ContainsAny(c.TransactionalID, "\x00\n") {
		bad("transactional-id", "%q: want at most 249 characters, no NUL or newline", c.TransactionalID)
	}
	if _, err := compression(c.Compression); err != nil {
		bad("compression", "%v", err)
	}
	switch c.OnPoison {
	case PolicyFail, PolicyDeadLetter:
	default:
		bad("on-poison", "%q: want %s or %s", c.OnPoison, PolicyFail, PolicyDeadLetter)
	}
	if c.DeadLetterTopic == "" {
		if c.OnPoison == PolicyDeadLetter {
			bad("dead-letter-topic", "required with on-poison: %s", PolicyDeadLetter)
		}
	} else if err := router.ValidTopic(c.DeadLetterTopic); err != nil {
		bad("dead-letter-topic", "%q: %v", c.DeadLetterTopic, err)
	}
	switch c.MissingTopic {
	case "", MissingTopicPoison, MissingTopicCreate:
	default:
		bad("missing-topic", "%q: want %s or %s", c.MissingTopic, MissingTopicPoison, MissingTopicCreate)
	}
	if tc := c.TopicCreation; tc.Partitions < -1 {
		bad("topic-creation.partitions", "%d: want -1 (the broker's num.partitions) or at least 1", tc.Partitions)
	}
	if tc := c.TopicCreation; tc.ReplicationFactor < -1 || tc.ReplicationFactor > 32767 {
		bad("topic-creation.replication-factor", "%d: want -1 (the broker's default.replication.factor) or 1 to 32767", tc.ReplicationFactor)
	}
	for k := range c.TopicCreation.Configs {
		if k == "" {
			bad("topic-creation.configs", "a config with an empty name")
		}
	}
	c.validateSecurity(bad, &errs)
	return errors.Join(errs...)
}

// Redacted returns a copy safe to print: passwords and client secrets
// masked (the *-file settings, paths, are kept).
func (c Config) Redacted() Config {
	mask := func(s *string) {
		if *s != "" {
			*s = "***"
		}
	}
	mask(&c.SASL.Password)
	mask(&c.SASL.ClientSecret)
	mask(&c.SASL.AWSSecretAccessKey)
	mask(&c.SASL.AWSSessionToken)
	return c
}

// dialTimeout is kafka.dial-timeout, its default for a Config not loaded
// (zero): the bound of every broker's dial and handshake, and of the
// metadata requests, in the publisher and the one-shot commands alike.
func (c Config) dialTimeout() time.Duration {
	if c.DialTimeout <= 0 {
		return DefaultConfig().DialTimeout
	}
	return c.DialTimeout
}
