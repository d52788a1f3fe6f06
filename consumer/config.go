package consumer

import (
	"errors"
	"fmt"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
)

// TLS is the TLS of the connections to the brokers, the publisher's
// kafka.tls section (same fields and YAML keys; converted to the
// publisher's type, so that the two cannot drift apart).
type TLS struct {
	// Enabled turns TLS on (a SSL or SASL_SSL listener); the other fields
	// need it.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the CAs that sign the brokers' certificates;
	// empty: the system's trusted CAs.
	CAFile string `yaml:"ca-file"`
	// CertFile and KeyFile are the client certificate and key (PEM) for
	// brokers that require mutual TLS (ssl.client.auth=required).
	CertFile string `yaml:"cert-file"`
	KeyFile  string `yaml:"key-file"`
	// ServerName is the name the brokers' certificates must carry when it
	// is not the host of the address (an IP address, a load balancer).
	ServerName string `yaml:"server-name"`
	// InsecureSkipVerify accepts any certificate: encryption without
	// authentication, for tests only (New logs a warning).
	InsecureSkipVerify bool `yaml:"insecure-skip-verify"`
}

// SASL is the SASL login on the brokers, as the publisher's kafka.sasl
// section: PLAIN, SCRAM-SHA-256/512 (KIP-84), OAUTHBEARER (KIP-255, a
// token file or an OAuth token endpoint) or AWS_MSK_IAM.
type SASL = sink.SASL

// Isolation levels (Config.Isolation), as the Java client names them
// (isolation.level, KIP-98).
const (
	ReadUncommitted = "read_uncommitted"
	ReadCommitted   = "read_committed"
)

// Start offsets (Config.Start) for partitions the group has no committed
// offset for.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// Config configures a Consumer. Zero fields take DefaultConfig's values
// through WithDefaults.
type Config struct {
	// Brokers are bootstrap addresses, host:port.
	Brokers []string `yaml:"brokers"`
	// TLS and SASL secure every connection to the brokers (managed Kafka:
	// MSK, Confluent Cloud, Aiven), with the publisher's settings; their
	// errors name them as the publisher's kafka.tls and kafka.sasl. A
	// broker refusing the certificates or the login stops Run with a
	// *sink.SecurityError (errors.Is sink.ErrSecurity): a retry cannot
	// fix it.
	TLS  TLS  `yaml:"tls"`
	SASL SASL `yaml:"sasl"`
	// DialTimeout bounds each connection's dial, TLS handshake and SASL
	// login (default 10 s): a broker that accepts connections and never
	// answers (paused) is left after it, for the next one.
	DialTimeout time.Duration `yaml:"dial-timeout"`
	// Topics to read: the publisher's router.topic, or each topic its
	// {event_type} template produces.
	Topics []string `yaml:"topics"`
	// Layout says which headers (or the key) give each record's event id,
	// ordering key and sequence number: the publisher's mapping preset (im
	// by default, debezium, generic) or explicit headers; LayoutOf turns
	// the publisher's source.mapping into one.
	Layout Layout `yaml:"layout"`
	// Group is the Kafka consumer group id; offsets are committed under it.
	Group string `yaml:"group"`
	// Isolation is read_uncommitted (default) or read_committed
	// (isolation.level, KIP-98); use read_committed with a publisher in
	// exactly-once (transactional) mode: nothing past the last stable
	// offset is read and records of aborted transactions are never
	// handled. Transaction markers are skipped at both levels.
	Isolation string `yaml:"isolation"`
	// Start is where a partition without a committed offset starts:
	// earliest (default) or latest.
	Start string `yaml:"start"`
	// CommitInterval is how often handled offsets are committed (default 1 s).
	CommitInterval time.Duration `yaml:"commit-interval"`
	// QueueCapacity is the most records prefetched per partition (default
	// 100), beside the Fetch answer being queued (at most MaxBytes).
	QueueCapacity int `yaml:"queue-capacity"`
	// MaxBytes is the most bytes one Fetch answer returns per partition
	// (default 1 MiB; KIP-74: at least one batch, however large); a
	// request for n partitions of one leader asks for n × MaxBytes in
	// all, at most 50 MiB (the Java consumer's fetch.max.bytes).
	MaxBytes int `yaml:"max-bytes"`
	// MaxWait is how long a fetch waits for new records (default 500 ms).
	MaxWait time.Duration `yaml:"max-wait"`
	// Window is how many event ids each partition remembers for dedupe
	// (default 10000); older duplicates are found by the Store, if any.
	Window int `yaml:"window"`
	// Conversations is how many conversations' last seq_no each partition
	// remembers (default 100000); the least recently seen is forgotten first.
	Conversations int `yaml:"conversations"`
	// HandlerAttempts is how often a record is tried (handler or store)
	// before Run fails (default 5); backoff doubles from 100 ms to 5 s.
	HandlerAttempts int `yaml:"handler-attempts"`
	// SessionTimeout and RebalanceTimeout are the group timeouts (KIP-62;
	// defaults 10 s and 30 s); HeartbeatInterval defaults to 3 s.
	SessionTimeout    time.Duration `yaml:"session-timeout"`
	RebalanceTimeout  time.Duration `yaml:"rebalance-timeout"`
	HeartbeatInterval time.Duration `yaml:"heartbeat-interval"`
}

// DefaultConfig returns the defaults (Brokers, Topics and Group are
// required and have none).
func DefaultConfig() Config {
	return Config{
		Isolation:         ReadUncommitted,
		Start:             StartEarliest,
		CommitInterval:    time.Second,
		QueueCapacity:     100,
		MaxBytes:          1 << 20,
		MaxWait:           500 * time.Millisecond,
		Window:            10000,
		Conversations:     100000,
		HandlerAttempts:   5,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  30 * time.Second,
		HeartbeatInterval: 3 * time.Second,
		DialTimeout:       10 * time.Second,
	}
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	if c.Isolation == "" {
		c.Isolation = d.Isolation
	}
	if c.Start == "" {
		c.Start = d.Start
	}
	c.Layout = c.Layout.WithDefaults()
	setD(&c.CommitInterval, d.CommitInterval)
	set(&c.QueueCapacity, d.QueueCapacity)
	set(&c.MaxBytes, d.MaxBytes)
	setD(&c.MaxWait, d.MaxWait)
	set(&c.Window, d.Window)
	set(&c.Conversations, d.Conversations)
	set(&c.HandlerAttempts, d.HandlerAttempts)
	setD(&c.SessionTimeout, d.SessionTimeout)
	setD(&c.RebalanceTimeout, d.RebalanceTimeout)
	setD(&c.HeartbeatInterval, d.HeartbeatInterval)
	setD(&c.DialTimeout, d.DialTimeout)
	return c
}

// Validate names every invalid field, all errors joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("consumer.%s: "+format, append([]any{field}, args...)...))
	}
	if len(c.Brokers) == 0 {
		bad("brokers", "required: at least one host:port")
	}
	if len(c.Topics) == 0 {
		bad("topics", "required: the publisher's topic(s)")
	}
	for i, t := range c.Topics {
		if t == "" {
			bad("topics", "entry %d is empty", i)
		}
	}
	if c.Group == "" {
		bad("group", "required: a consumer group id")
	}
	c.Layout.validate(bad)
	if c.Isolation != ReadUncommitted && c.Isolation != ReadCommitted {
		bad("isolation", "%q: want %s or %s", c.Isolation, ReadUncommitted, ReadCommitted)
	}
	if c.Start != StartEarliest && c.Start != StartLatest {
		bad("start", "%q: want %s or %s", c.Start, StartEarliest, StartLatest)
	}
	pos := func(field string, v int) {
		if v <= 0 {
			bad(field, "%d: must be positive", v)
		}
	}
	posD := func(field string, v time.Duration) {
		if v <= 0 {
			bad(field, "%s: must be positive", v)
		}
	}
	pos("queue-capacity", c.QueueCapacity)
	pos("max-bytes", c.MaxBytes)
	pos("window", c.Window)
	pos("conversations", c.Conversations)
	pos("handler-attempts", c.HandlerAttempts)
	posD("commit-interval", c.CommitInterval)
	posD("max-wait", c.MaxWait)
	posD("session-timeout", c.SessionTimeout)
	posD("rebalance-timeout", c.RebalanceTimeout)
	posD("heartbeat-interval", c.HeartbeatInterval)
	posD("dial-timeout", c.DialTimeout)
	if err := sink.ValidateSecurity(secure.TLS(c.TLS), c.SASL); err != nil {
		errs = append(errs, fmt.Errorf("consumer.tls / consumer.sasl (the publisher's kafka.tls and kafka.sasl): %w", err))
	}
	if c.HeartbeatInterval > 0 && c.SessionTimeout > 0 && c.HeartbeatInterval >= c.SessionTimeout {
		bad("heartbeat-interval", "%s: must be below session-timeout (%s)", c.HeartbeatInterval, c.SessionTimeout)
	}
	return errors.Join(errs...)
}

func (c *Config) isolation() kafka.IsolationLevel {
	if c.Isolation == ReadCommitted {
		return kafka.ReadCommitted
	}
	return kafka.ReadUncommitted
}

func (c *Config) startOffset() int64 {
	if c.Start == StartLatest {
		return kafka.LastOffset
	}
	return kafka.FirstOffset
}
