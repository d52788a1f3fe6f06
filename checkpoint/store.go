package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/redis/go-redis/v9"
)

// Version is the checkpoint format version written in each value.
const Version = 1

// Checkpoint is the stored value: the position after the last transaction
// whose records were all acknowledged, and where it came from.
type Checkpoint struct {
	Version int `json:"version"`
	// File and Pos: the binlog file and the offset of the next event.
	File string `json:"file"`
	Pos  uint32 `json:"pos"`
	// GTIDSet: the GTID set executed up to here, in the flavor's syntax.
	GTIDSet string `json:"gtid_set"`
	// GTID: the last transaction's GTID.
	GTID string `json:"gtid,omitempty"`
	// ServerID and ServerUUID of the source (server_uuid: MySQL only).
	ServerID   uint32 `json:"server_id"`
	ServerUUID string `json:"server_uuid,omitempty"`
	Flavor     string `json:"flavor"`
	// EventTime: commit time of the last transaction (binlog header, 1 s resolution).
	EventTime time.Time `json:"event_time"`
	// FileOpened: when the server created File (the timestamp of its
	// Format_description event, 1 s resolution): a file-mode start refuses
	// the server's file of that name when it was created at another time
	// (a binlog reset, a restore, renumbered files: binlog.ErrHistory).
	// Absent (zero) in checkpoints written before this field existed or
	// before the first transaction read ("checkpoint set", a first start).
	FileOpened time.Time `json:"file_opened,omitzero"`
	// UpdatedAt: when this value was written.
	UpdatedAt time.Time `json:"updated_at"`
	// Token and Owner: the lease this value was written under (package
	// ha); 0 and "" when written without one (checkpoint set).
	Token uint64 `json:"token,omitempty"`
	Owner string `json:"owner,omitempty"`
	// Partitions: each target topic's partition count when this value was
	// written. A different count at start means the key → partition mapping
	// changed (the publisher then refuses to start until confirmed). Absent
	// in checkpoints written before this field existed.
	Partitions map[string]int `json:"partitions,omitempty"`
}

// Position returns the binlog position of the checkpoint.
func (c *Checkpoint) Position() binlog.Position {
	return binlog.Position{File: c.File, Pos: c.Pos, GTIDSet: c.GTIDSet, GTID: c.GTID, Time: c.EventTime, Opened: c.FileOpened}
}

// Config configures the store.
type Config struct {
	// Addr is the Redis server's host:port.
	Addr     string `yaml:"addr" env:"ADDR" doc:"The Redis server." rule:"host:port (unless addrs is set)"`
	Username string `yaml:"username" env:"USERNAME" doc:"The Redis ACL user; empty: the default user." rule:"-"`
	Password string `yaml:"password" env:"PASSWORD" secret:"password-file" doc:"The Redis password." rule:"not with password-file"`
	// PasswordFile holds the password instead (a Kubernetes Secret), read
	// at each connection; not with Password.
	PasswordFile string `yaml:"password-file" env:"PASSWORD_FILE" doc:"A file holding the Redis password instead, read at each connection." rule:"a readable file; not with password"`
	DB           int    `yaml:"db" env:"DB" doc:"The Redis database number." rule:">= 0; 0 with cluster"`
	// TLS to Redis (a tls-port, managed Redis services).
	TLS secure.TLS `yaml:"tls" envPrefix:"TLS_" doc:"TLS to Redis (a tls-port, managed Redis services)."`
	// SentinelMaster: the master name watched by the Sentinels at Addrs
	// (the client follows failovers); SentinelUsername and
	// SentinelPassword (or SentinelPasswordFile) log in to the Sentinels.
	SentinelMaster       string `yaml:"sentinel-master" env:"SENTINEL_MASTER" doc:"Redis Sentinel: the master name watched by the Sentinels at addrs; the client follows failovers." rule:"needs addrs; not with cluster"`
	SentinelUsername     string `yaml:"sentinel-username" env:"SENTINEL_USERNAME" doc:"The user logging in to the Sentinels." rule:"-"`
	SentinelPassword     string `yaml:"sentinel-password" env:"SENTINEL_PASSWORD" secret:"sentinel-password-file" doc:"The password logging in to the Sentinels." rule:"not with sentinel-password-file"`
	SentinelPasswordFile string `yaml:"sentinel-password-file" env:"SENTINEL_PASSWORD_FILE" doc:"A file holding the Sentinels' password instead, read at each connection." rule:"a readable file; not with sentinel-password"`
	// Cluster: Addrs (or Addr) are Redis Cluster nodes. The checkpoint key
	// and everything stored beside it share one hash slot (SlotKey).
	Cluster bool `yaml:"cluster" env:"CLUSTER" doc:"Redis Cluster: addrs (or addr) are seed nodes; the lease and fence keys share the checkpoint key's hash slot." rule:"not with sentinel-master"`
	// Addrs: the Sentinels (with SentinelMaster) or Cluster seed nodes;
	// empty: Addr.
	Addrs []string `yaml:"addrs" env:"ADDRS" doc:"The Sentinels (with sentinel-master) or the Cluster seed nodes; empty: addr." rule:"host:port each; only with sentinel-master or cluster"`
	// Key is the Redis key of this source's checkpoint. Two publishers must
	// never share a key.
	Key string `yaml:"key" env:"KEY" doc:"The Redis key of this source's checkpoint; two publishers must never share one." rule:"required, unique per source; braces only as a Cluster hash tag"`
	// Interval is how often the checkpoint is written while publishing.
	Interval time.Duration `yaml:"interval" env:"INTERVAL" doc:"How often the checkpoint is written while publishing." rule:"at least 10ms"`
	// Timeout bounds one Redis command.
	Timeout time.Duration `yaml:"timeout" env:"TIMEOUT" doc:"Bound on one Redis command." rule:"> 0"`
	// Recover: when the key is missing but the (fixed) topic holds records
	// published by cdc-outbox, resume from the position their
	// binlog_txn_end headers give instead of refusing to start.
	Recover bool `yaml:"recover" env:"RECOVER" doc:"When the key is missing but the (fixed) topic holds records of cdc-outbox, resume from their binlog_txn_end headers instead of refusing to start." rule:"-"`
	// MirrorTopic is a compacted Kafka topic holding a copy of the
	// checkpoint (record key: Key): when the Redis key is lost (flushed,
	// evicted, a Redis without persistence), run resumes from the copy
	// instead of needing a start option. run creates it (cleanup.policy
	// compact) when missing. "" keeps the checkpoint in Redis only.
	MirrorTopic string `yaml:"mirror-topic" env:"MIRROR_TOPIC" doc:"A compacted Kafka topic holding a copy of every checkpoint, which run resumes from when the Redis key is lost (created when missing); empty: Redis only." rule:"a valid topic name, not a Kafka-internal one, or empty; not kafka.dead-letter-topic"`
	// MirrorInterval is how often the periodic checkpoint writes are also
	// copied to MirrorTopic (every other write is copied at once: the
	// first start, the final write at shutdown, checkpoint set/reset).
	MirrorInterval time.Duration `yaml:"mirror-interval" env:"MIRROR_INTERVAL" doc:"How often the periodic checkpoint writes are also copied to mirror-topic (other writes are copied at once)." rule:"at least checkpoint.interval (with a mirror-topic)"`
}

// DefaultMirrorTopic is the default checkpoint.mirror-topic, shared by
// every source (one record key per checkpoint key).
const DefaultMirrorTopic = "cdc-outbox.checkpoints"

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Addr: "127.0.0.1:6379", Key: "cdc-outbox:checkpoint:default", Interval: time.Second, Timeout: 2 * time.Second,
		MirrorTopic: DefaultMirrorTopic, MirrorInterval: 10 * time.Second}
}

// Validate checks the configuration and returns all problems joined.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Addr); err != nil && len(c.Addrs) == 0 {
		errs = append(errs, fmt.Errorf("checkpoint.addr: %q: want host:port", c.Addr))
	}
	c.validateClient(&errs)
	if c.Key == "" {
		errs = append(errs, errors.New("checkpoint.key: required, one per source"))
	} else if err := validateKeyTag(c.Key); err != nil {
		errs = append(errs, err)
	}
	if c.DB < 0 {
		errs = append(errs, fmt.Errorf("checkpoint.db: %d: want >= 0", c.DB))
	}
	if c.Interval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("checkpoint.interval: %s: want at least 10ms", c.Interval))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("checkpoint.timeout: %s: want > 0", c.Timeout))
	}
	if c.MirrorTopic != "" && !validTopic(c.MirrorTopic) {
		errs = append(errs, fmt.Errorf("checkpoint.mirror-topic: %q: want a Kafka topic name (letters, digits, '.', '_', '-'; at most 249), or \"\" to keep checkpoints in Redis only", c.MirrorTopic))
	}
	if c.MirrorTopic != "" && c.MirrorInterval < c.Interval {
		errs = append(errs, fmt.Errorf("checkpoint.mirror-interval: %s: want at least checkpoint.interval (%s)", c.MirrorInterval, c.Interval))
	}
	return errors.Join(errs...)
}

// Store reads and writes one source's checkpoint.
type Store struct {
	rdb redis.UniversalClient
	key string
	cfg Config
}

// NewStore returns a Store for a validated Config. It does not connect yet.
func NewStore(cfg Config) *Store {
	return &Store{rdb: newClient(cfg), key: cfg.Key, cfg: cfg} // client.go
}

// WithKey returns a Store of cfg.Key on s's Redis client, for a cfg that
// reaches the same Redis as s's (it differs in the key): several sources
// on one connection pool (package ha). Closing it closes s's client:
// close s alone, once every Store sharing it is done.
func (s *Store) WithKey(cfg Config) *Store { return &Store{rdb: s.rdb, key: cfg.Key, cfg: cfg} }

// Key returns the Redis key.
func (s *Store) Key() string { return s.key }

// Close closes the Redis client.
func (s *Store) Close() error { return s.rdb.Close() }

// Load returns the stored checkpoint, or nil when the key does not exist.
func (s *Store) Load(ctx context.Context) (*Checkpoint, error) {
	b, err := s.rdb.Get(ctx, s.key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: GET %s from %s: %w", s.key, s.cfg.Where(), s.explain(ctx, err))
	}
	return Parse(s.key, b)
}

// Parse decodes a stored checkpoint value (JSON) of key; a value that is
// not a valid Checkpoint is ErrCorrupt naming key.
func Parse(key string, b []byte) (*Checkpoint, error) {
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: key %s: %v", ErrCorrupt, key, err)
	}
	if c.Version != Version || (c.File == "" && c.GTIDSet == "") {
		return nil, fmt.Errorf("%w: key %s: version %d, file %q, gtid_set %q", ErrCorrupt, key, c.Version, c.File, c.GTIDSet)
	}
	return &c, nil
}

// Encode returns c as stored (Version and UpdatedAt set), in JSON.
func Encode(c Checkpoint) ([]byte, error) {
	c.Version = Version
	c.UpdatedAt = time.Now().UTC()
	return json.Marshal(c)
}

// Save writes c (setting Version and UpdatedAt, and Token and Owner from
// o.Fence) in one atomic step (saveScript): refused with a *FencedError
// (ErrFenced) when o.Fence is no longer the source's lease, with a
// *BackwardsError (ErrBackwards) when it would move the checkpoint back
// (unless o.Force); written but reported as a *VanishedError (ErrVanished)
// when the key was missing although o.Existed. Other errors are Redis's,
// naming the key and the address.
func (s *Store) Save(ctx context.Context, c Checkpoint, o WriteOptions) error {
	lease, holder := LeaseKey(s.key), ""
	if o.Fence != nil {
		c.Token, c.Owner = o.Fence.Token, o.Fence.Owner
		lease, holder = o.Fence.LeaseKey, o.Fence.Holder()
	}
	b, err := Encode(c)
	if err != nil {
		return err
	}
	mode, existed := "mono", "0"
	if o.Force {
		mode = "force"
	}
	if o.Existed {
		existed = "1"
	}
	res, err := saveScript.Run(ctx, s.rdb, []string{s.key, lease},
		string(b), mode, existed, holder, strconv.FormatUint(uint64(c.ServerID), 10), c.File, strconv.FormatUint(uint64(c.Pos), 10)).StringSlice()
	if err != nil {
		return s.fail("write "+s.key, err)
	}
	switch res[0] {
	case "ok":
		return nil
	case "vanished":
		return &VanishedError{Key: s.key, At: c.Position()}
	case "fenced":
		e := &FencedError{Key: s.key, Refused: c.Position(), Holder: res[1]}
		if o.Fence != nil {
			e.Token, e.Owner = o.Fence.Token, o.Fence.Owner
		}
		return e
	case "backwards":
		pos, _ := strconv.ParseUint(res[2], 10, 32)
		return &BackwardsError{Key: s.key, Stored: binlog.Position{File: res[1], Pos: uint32(pos)}, Refused: c.Position()}
	}
	return fmt.Errorf("checkpoint: write %s on %s: unexpected script reply %q", s.key, s.cfg.Where(), res)
}

// Client returns the Redis client (package ha keeps the lease with it).
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// MaxMemoryPolicy returns the server's maxmemory-policy and maxmemory
// (bytes, 0: no limit).
func (s *Store) MaxMemoryPolicy(ctx context.Context) (string, int64, error) {
	p, err := s.rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", 0, s.fail("CONFIG GET maxmemory-policy", err)
	}
	m, err := s.rdb.ConfigGet(ctx, "maxmemory").Result()
	if err != nil {
		return "", 0, s.fail("CONFIG GET maxmemory", err)
	}
	n, _ := strconv.ParseInt(m["maxmemory"], 10, 64)
	return p["maxmemory-policy"], n, nil
}

// TTL returns the checkpoint key's time to live: -1 (as Redis reports it,
// in go-redis's unit) when it has none, -2 when the key does not exist.
func (s *Store) TTL(ctx context.Context) (time.Duration, error) {
	d, err := s.rdb.PTTL(ctx, s.key).Result()
	if err != nil {
		return 0, s.fail("PTTL "+s.key, err)
	}
	return d, nil
}

// EvictionRisk decides whether Redis may evict the checkpoint: the
// problem as a sentence naming the fix, "" when it cannot. noeviction
// never evicts (writes fail with OOM instead, which the publisher
// reports); volatile-* policies evict only keys with a TTL, and the
// checkpoint is written without one (ttl < 0: none, or the key does not
// exist yet), so they are safe unless someone gave the key a TTL;
// allkeys-* policies may evict any key (see
// https://redis.io/docs/latest/develop/reference/eviction/). maxmemory 0
// (no limit) never evicts.
func EvictionRisk(policy string, maxmemory int64, ttl time.Duration) string {
	switch {
	case maxmemory == 0 || policy == "noeviction":
		return ""
	case strings.HasPrefix(policy, "volatile-") && ttl < 0:
		return ""
	case strings.HasPrefix(policy, "volatile-"):
		return fmt.Sprintf("maxmemory-policy %s evicts keys with a TTL, and the checkpoint key has one (%s): remove it (PERSIST <key>) and find who set it", policy, ttl)
	}
	return fmt.Sprintf("maxmemory-policy %s may evict the checkpoint key when Redis reaches maxmemory (%d bytes): a publisher started then starts without its checkpoint; set maxmemory-policy noeviction (or a volatile-* policy, which spares keys without a TTL)", policy, maxmemory)
}

// Delete removes the key in one atomic step with the lease check
// (deleteScript): with o.Fence, only while that fence is the source's
// lease (else a *FencedError); without one, only while no instance holds
// the lease (else a *HeldError), unless o.Force. It reports whether the
// key existed.
func (s *Store) Delete(ctx context.Context, o WriteOptions) (bool, error) {
	holder, mode := "", "free"
	if o.Fence != nil {
		holder, mode = o.Fence.Holder(), "fence"
	}
	if o.Force {
		mode = "force"
	}
	res, err := deleteScript.Run(ctx, s.rdb, []string{s.key, LeaseKey(s.key)}, mode, holder).StringSlice()
	if err != nil {
		return false, fmt.Errorf("checkpoint: DEL %s on %s: %w", s.key, s.cfg.Where(), s.explain(ctx, err))
	}
	switch res[0] {
	case "deleted":
		return true, nil
	case "none":
		return false, nil
	case "held":
		return false, &HeldError{Key: s.key, Holder: res[1]}
	case "fenced":
		e := &FencedError{Key: s.key, Holder: res[1]}
		if o.Fence != nil {
			e.Token, e.Owner = o.Fence.Token, o.Fence.Owner
		}
		return false, e
	}
	return false, fmt.Errorf("checkpoint: DEL %s on %s: unexpected script reply %q", s.key, s.cfg.Where(), res)
}

// Persistent reports whether the Redis server persists data (AOF on, or
// RDB save points configured).
func (s *Store) Persistent(ctx context.Context) (bool, error) {
	aof, rdb, err := s.Persistence(ctx)
	return aof || rdb, err
}

// Persistence reports how the Redis server persists data: aof when
// appendonly is yes (every write logged; the checkpoint survives a crash
// up to appendfsync), rdb when save points are configured (snapshots: a
// crash loses the checkpoint writes since the last one, and the publisher
// resumes from an older position, publishing more duplicates).
func (s *Store) Persistence(ctx context.Context) (aof, rdb bool, err error) {
	a, err := s.rdb.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		return false, false, s.explain(ctx, err)
	}
	save, err := s.rdb.ConfigGet(ctx, "save").Result()
	if err != nil {
		return false, false, s.fail("CONFIG GET save", err)
	}
	return a["appendonly"] == "yes", save["save"] != "", nil
}

// validTopic reports whether t is a legal Kafka topic name.
func validTopic(t string) bool {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return false
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Redacted returns a copy safe to print: the passwords masked.
func (c Config) Redacted() Config {
	if c.Password != "" {
		c.Password = "***"
	}
	if c.SentinelPassword != "" {
		c.SentinelPassword = "***"
	}
	return c
}

// fail wraps a Redis error of op, naming the key and the address, with
// the fix for a login or TLS problem (explain: ErrAuth, ErrTLS).
func (s *Store) fail(op string, err error) error {
	return fmt.Errorf("checkpoint: %s on %s: %w", op, s.cfg.Where(), s.explain(context.Background(), err))
}
