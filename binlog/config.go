package binlog

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/cdc-outbox/cdc-outbox/mapping"
)

// Flavors accepted in Config.Flavor.
const (
	FlavorMySQL   = "mysql"
	FlavorMariaDB = "mariadb"
)

// Position modes accepted in Config.PositionMode.
const (
	ModeFile = "file" // resume by binlog file:pos (single server)
	ModeGTID = "gtid" // resume by GTID set (survives failover to another server)
)

// Config configures the connection to the source server and what to read.
type Config struct {
	// Flavor is "mysql", "mariadb" or empty to detect it from VERSION().
	Flavor string `yaml:"flavor" env:"FLAVOR" doc:"The server's flavour; empty detects it from VERSION()." rule:"mysql, mariadb or empty"`
	// Addr is the server's host:port.
	Addr string `yaml:"addr" env:"ADDR" doc:"The MySQL or MariaDB server." rule:"host:port with a numeric port"`
	// User and Password of the publisher's MySQL user; see schema/grants-*.sql.
	User     string `yaml:"user" env:"USER" doc:"The publisher's MySQL user (its grants: schema/grants-*.sql)." rule:"required (not by replay --binlog-files)"`
	Password string `yaml:"password" env:"PASSWORD" secret:"password-file" doc:"The user's password." rule:"not with password-file"`
	// PasswordFile holds the password instead (a Kubernetes Secret mounted
	// as a file), read at each connection; not with Password.
	PasswordFile string `yaml:"password-file" env:"PASSWORD_FILE" doc:"A file holding the password instead (a mounted Secret), read at each connection." rule:"a readable file; not with password"`
	// SSLMode is disabled, preferred (the default, also when empty),
	// required, verify-ca or verify-identity (tls.go), for the replication
	// stream and every SQL connection alike.
	SSLMode string `yaml:"ssl-mode" env:"SSL_MODE" doc:"TLS for the replication stream and every SQL connection: disabled, preferred (TLS when the server offers it), required, verify-ca or verify-identity." rule:"disabled, preferred, required, verify-ca, verify-identity or empty (preferred)"`
	// SSLCA is the PEM file of the CA that signed the server's certificate
	// (verify-ca, verify-identity); SSLCert and SSLKey a client certificate
	// and key for servers that require one (REQUIRE X509).
	SSLCA   string `yaml:"ssl-ca" env:"SSL_CA" doc:"PEM file of the CA that signed the server's certificate." rule:"a readable PEM file; refused with ssl-mode disabled, preferred or empty"`
	SSLCert string `yaml:"ssl-cert" env:"SSL_CERT" doc:"Client certificate (PEM) for a user created REQUIRE X509." rule:"with ssl-key; not with ssl-mode disabled"`
	SSLKey  string `yaml:"ssl-key" env:"SSL_KEY" doc:"The client certificate's private key (PEM)." rule:"with ssl-cert; a readable PEM file"`
	// SSLServerName is the name verify-identity checks when it is not the
	// host of source.addr.
	SSLServerName string `yaml:"ssl-server-name" env:"SSL_SERVER_NAME" doc:"The name verify-identity checks when it is not the host of source.addr." rule:"refused with ssl-mode disabled, preferred or empty"`
	// AllowPublicKeyRetrieval lets a login without TLS fetch the server's
	// RSA public key for caching_sha2_password's full authentication
	// (pubkey.go); off, such a login fails with ErrPublicKeyRetrieval.
	AllowPublicKeyRetrieval bool `yaml:"allow-public-key-retrieval" env:"ALLOW_PUBLIC_KEY_RETRIEVAL" doc:"Lets a login without TLS fetch the server's RSA public key for caching_sha2_password, unauthenticated." rule:"only with ssl-mode disabled, preferred or empty"`
	// ServerID is the replica server_id the publisher registers with. It must
	// differ from the source's and from every other replica's.
	ServerID uint32 `yaml:"server-id" env:"SERVER_ID" doc:"The replica server_id the publisher registers with, unused by the server and its other replicas (under ha: the first of ha.server-ids ids)." rule:"1 or more; sources on one server need ranges that do not overlap"`
	// ServerIDFrom and ServerIDCount: the range of server_ids this
	// source's publishers register with (under leases: source.server-id
	// and ha.server-ids, ServerID being the term's own), set by the ha
	// supervisor, not the file; a range holding the source's own
	// @@server_id is refused at start. Count 0 or 1: ServerID alone.
	ServerIDFrom  uint32 `yaml:"-"`
	ServerIDCount int    `yaml:"-"`
	// Schema and Table name the outbox table (when Tables is empty; Schema
	// is also the default schema of Tables' entries).
	Schema string `yaml:"schema" env:"SCHEMA" doc:"The database holding the outbox table, and the default schema of source.tables entries." rule:"required"`
	Table  string `yaml:"table" env:"TABLE" doc:"The outbox table, when source.tables is not set." rule:"required unless source.tables is set; not given beside source.tables"`
	// Mapping says how the table's rows become records (docs/mapping.md);
	// the default is the im preset, today's im_event_outbox layout.
	Mapping mapping.Config `yaml:"mapping" doc:"How the table's rows become records (docs/mapping.md); empty: the im preset."`
	// Tables, when set, are the outbox tables of this source instead of
	// Table: tables or patterns over "schema.table", each with its
	// mapping (default Mapping), all read from the one binlog stream with
	// one checkpoint.
	Tables []TableConfig `yaml:"tables" doc:"Several outbox tables, names or patterns, read from the one binlog stream with one checkpoint, instead of source.table." rule:"each entry: table or pattern, not both"`
	// PositionMode is "file" (default) or "gtid".
	PositionMode string `yaml:"position-mode" env:"POSITION_MODE" doc:"How the position is kept: file (binlog file:pos, one server) or gtid (survives a failover to another server)." rule:"file or gtid"`
	// Start is where to start when no checkpoint exists: "latest",
	// "earliest", "<file>:<pos>" or "gtid:<set>". Required on first run.
	Start string `yaml:"start" env:"START" doc:"Where the first run starts when no checkpoint exists: latest, earliest, file:pos or gtid:set." rule:"required by run; a gtid: start needs position-mode gtid"`
	// OnPurged decides what a resume from a purged position does: "fail"
	// (default, also when empty), "earliest" or "latest" (see purged.go,
	// docs/operations.md).
	OnPurged string `yaml:"on-purged" env:"ON_PURGED" doc:"What a resume from a purged binlog position does: fail, earliest or latest (docs/operations.md)." rule:"fail, earliest, latest or empty (fail)"`
	// HeartbeatPeriod asks the server for a heartbeat event when the binlog
	// is idle (MASTER_HEARTBEAT_PERIOD), so that a dead connection is noticed.
	HeartbeatPeriod time.Duration `yaml:"heartbeat-period" env:"HEARTBEAT_PERIOD" doc:"How often an idle server sends a heartbeat event, so that a dead connection is noticed." rule:"at least 100ms"`
	// ReadTimeout bounds the wait for the next event; must exceed
	// HeartbeatPeriod. It also bounds the waits of every SQL connection
	// (Dial, conn.go).
	ReadTimeout time.Duration `yaml:"read-timeout" env:"READ_TIMEOUT" doc:"How long to wait for the next event before the connection counts as dead; also bounds each SQL connection's handshake (and, with ssl-mode preferred, the read of the server's greeting that tells whether it offers TLS, at most 10 s), and each statement's wait for an answer unless the server, asked on a second connection, still runs it (a long DELETE of prune, a scan of verify wait on); a server that holds the packets: every command then fails naming this key." rule:"more than heartbeat-period"`
	// Linger: after a read of the binlog stream that found it drained
	// (with less than 64 KiB read since the previous pause), wait this
	// long before reading again, so that the transactions committed
	// meanwhile are read, published and acknowledged as one batch (as
	// Kafka's linger.ms, KIP-1030). It adds at most Linger to the commit
	// → publish latency of a trickle and divides the publisher's
	// wake-ups; a backlog is read without pauses. 0 reads at once.
	// Default 3ms (the pause is exact: a timerfd on Linux); at most 50ms.
	Linger time.Duration `yaml:"linger" env:"LINGER" doc:"Pause after a read that drained the stream, so that the transactions committed meanwhile are published together; 0 reads at once." rule:"0 to 50ms"`
	// ServerIDWait is how long start-up waits for a registration with the
	// same server_id to go away (the dump thread of a killed publisher
	// lingers until the server's next write to it) before failing.
	ServerIDWait time.Duration `yaml:"server-id-wait" env:"SERVER_ID_WAIT" doc:"How long start-up waits for an old registration with the same server_id (a killed publisher's) to go away." rule:">= 0"`
	// TxnBuffer is the number of transactions buffered between the reader
	// and the sink.
	TxnBuffer int `yaml:"txn-buffer" env:"TXN_BUFFER" doc:"Transactions buffered between the binlog reader and the Kafka writer." rule:"at least 1"`
	// BufferBytes bounds the memory of transactions read but not yet
	// acknowledged by Kafka (payload bytes plus about 128 bytes per event).
	// Large transactions are passed on in fragments, so memory stays
	// bounded whatever their size.
	BufferBytes int64 `yaml:"buffer-bytes" env:"BUFFER_BYTES" doc:"Memory bound, in bytes, of the transactions read but not yet acknowledged by Kafka." rule:"at least 1048576 (1 MiB)"`
	// Archive is a directory or glob of archived binlog files (copies of
	// the server's binlogs): run catches up from them when its resume
	// position was purged from the server (docs/operations.md).
	Archive string `yaml:"archive" env:"ARCHIVE" doc:"A directory or glob of archived binlog files that run catches up from when its resume position was purged from the server." rule:"-"`
	// SchemaFile holds the outbox table's CREATE TABLE (schema/*.sql), for
	// binlog files whose table maps carry no column names.
	SchemaFile string `yaml:"schema-file" env:"SCHEMA_FILE" doc:"The outbox table's CREATE TABLE, for binlog files whose table maps carry no column names." rule:"-"`
	// Backfill: at the first start (no checkpoint), publish the outbox rows
	// matching BackfillWhere from a consistent snapshot, then stream the
	// binlog from the snapshot's position (run --backfill; docs/operations.md).
	Backfill bool `yaml:"backfill" env:"BACKFILL" doc:"At the first start (no checkpoint), publish the rows matching backfill-where from a consistent snapshot, then stream the binlog from there." rule:"-"`
	// BackfillWhere selects the rows to backfill: those the polling
	// dispatcher had not sent (an SQL condition on the outbox table).
	BackfillWhere string `yaml:"backfill-where" env:"BACKFILL_WHERE" doc:"The SQL condition on the outbox table selecting the rows to backfill." rule:"-"`
}

// DefaultBackfillWhere selects the rows the polling dispatcher had not sent.
const DefaultBackfillWhere = "status IN ('PENDING','FAILED','SENDING')"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Addr:            "127.0.0.1:3306",
		ServerID:        5701,
		Table:           "im_event_outbox",
		PositionMode:    ModeFile,
		HeartbeatPeriod: 5 * time.Second,
		ReadTimeout:     30 * time.Second,
		Linger:          3 * time.Millisecond,
		ServerIDWait:    20 * time.Second,
		TxnBuffer:       256,
		BufferBytes:     16 << 20,
		BackfillWhere:   DefaultBackfillWhere,
	}
}

// Validate checks the configuration and returns all problems joined, each
// naming its field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("source.%s: %s", field, fmt.Sprintf(format, a...)))
	}
	switch c.Flavor {
	case "", FlavorMySQL, FlavorMariaDB:
	default:
		bad("flavor", "%q: want mysql, mariadb or empty to detect", c.Flavor)
	}
	if host, port, err := net.SplitHostPort(c.Addr); err != nil || host == "" {
		bad("addr", "%q: want host:port", c.Addr)
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		bad("addr", "%q: bad port", c.Addr)
	}
	if c.User == "" {
		bad("user", "required")
	}
	if c.ServerID == 0 {
		bad("server-id", "required: a replica server_id unused by the source and other replicas")
	}
	if c.Schema == "" {
		bad("schema", "required: the database holding the outbox table")
	}
	if c.Table == "" && len(c.Tables) == 0 {
		bad("table", "required (or source.tables)")
	}
	if err := c.Mapping.Validate("source.mapping"); err != nil {
		errs = append(errs, err)
	}
	for i, t := range c.Tables {
		field := fmt.Sprintf("tables[%d]", i)
		switch {
		case t.Table == "" && t.Pattern == "":
			bad(field, "set table (a name) or pattern (a regexp over schema.table, e.g. im\\.im_event_outbox_[0-9]+)")
		case t.Table != "" && t.Pattern != "":
			bad(field, "set table or pattern, not both")
		case t.Pattern != "":
			if _, err := regexp.Compile(t.Pattern); err != nil {
				bad(field+".pattern", "%q: %v", t.Pattern, err)
			}
		}
		if err := t.Mapping.Validate("source." + field + ".mapping"); err != nil {
			errs = append(errs, err)
		}
	}
	switch c.PositionMode {
	case ModeFile, ModeGTID:
	default:
		bad("position-mode", "%q: want file or gtid", c.PositionMode)
	}
	st, err := ParseStart(c.Start)
	if err != nil {
		bad("start", "%v", err)
	} else if st.Kind == StartGTID && c.PositionMode != ModeGTID {
		bad("start", "a GTID start needs position-mode: gtid")
	}
	if c.HeartbeatPeriod < 100*time.Millisecond {
		bad("heartbeat-period", "%s: want at least 100ms", c.HeartbeatPeriod)
	}
	if c.Linger < 0 || c.Linger > 50*time.Millisecond {
		bad("linger", "%s: want 0 (read at once) to 50ms", c.Linger)
	}
	if c.ReadTimeout <= c.HeartbeatPeriod {
		bad("read-timeout", "%s: must exceed heartbeat-period (%s)", c.ReadTimeout, c.HeartbeatPeriod)
	}
	if c.BufferBytes < 1<<20 {
		bad("buffer-bytes", "%d: want at least 1048576 (1 MiB)", c.BufferBytes)
	}
	if c.ServerIDWait < 0 {
		bad("server-id-wait", "%s: want >= 0", c.ServerIDWait)
	}
	switch c.OnPurged {
	case "", OnPurgedFail, OnPurgedEarliest, OnPurgedLatest: // "": fail
	default:
		bad("on-purged", "%q: want fail, earliest or latest", c.OnPurged)
	}
	if c.TxnBuffer < 1 {
		bad("txn-buffer", "%d: want at least 1", c.TxnBuffer)
	}
	c.validateTLS(bad, &errs)
	return errors.Join(errs...)
}

// Redacted returns a copy safe to log: the password is masked.
func (c Config) Redacted() Config {
	if c.Password != "" {
		c.Password = "***"
	}
	return c
}
