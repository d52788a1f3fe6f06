package check

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/pipeline"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Report prints check lines and counts failures.
type Report struct {
	w                      io.Writer
	passed, failed, warned int
}

// NewReport returns a Report printing to w.
func NewReport(w io.Writer) *Report { return &Report{w: w} }

// Failed returns how many checks failed.
func (r *Report) Failed() int { return r.failed }

// warn prints a WARN line: something the check could not verify, or a
// setting that works but is not recommended.
func (r *Report) warn(what, format string, a ...any) {
	r.warned++
	fmt.Fprintf(r.w, "WARN  %-12s %s\n", what, fmt.Sprintf(format, a...))
}

// logger returns a logger whose warnings and errors become WARN lines of
// the report under what (the stages log what they cannot check, e.g.
// listing replicas without the privilege); lower levels are dropped.
func (r *Report) logger(what string) *zap.Logger {
	return zap.New(reportCore{r: r, what: what})
}

type reportCore struct {
	r      *Report
	what   string
	fields []zapcore.Field
}

func (c reportCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c reportCore) With(f []zapcore.Field) zapcore.Core {
	c.fields = append(slices.Clone(c.fields), f...)
	return c
}

func (c reportCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c reportCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(slices.Clone(c.fields), fields...) {
		f.AddTo(enc)
	}
	msg := e.Message
	if err, ok := enc.Fields["error"].(string); ok {
		msg += " (" + err + ")"
	}
	c.r.warn(c.what, "%s", msg)
	return nil
}

func (reportCore) Sync() error { return nil }

// info prints an INFO line: a fact the reader should know, not a check.
func (r *Report) info(what, format string, a ...any) {
	fmt.Fprintf(r.w, "INFO  %-12s %s\n", what, fmt.Sprintf(format, a...))
}

// ok prints an OK line.
func (r *Report) ok(what, format string, a ...any) {
	r.passed++
	fmt.Fprintf(r.w, "OK    %-12s %s\n", what, fmt.Sprintf(format, a...))
}

// fail prints a FAIL line; the message should name the fix.
func (r *Report) fail(what, format string, a ...any) {
	r.failed++
	fmt.Fprintf(r.w, "FAIL  %-12s %s\n", what, fmt.Sprintf(format, a...))
}

// Summary prints the result line.
func (r *Report) Summary() {
	if r.failed == 0 {
		if r.warned > 0 {
			fmt.Fprintf(r.w, "result: OK (%d checks, %d %s)\n", r.passed, r.warned, plural(r.warned, "warning", "warnings"))
			return
		}
		fmt.Fprintf(r.w, "result: OK (%d checks)\n", r.passed)
		return
	}
	fmt.Fprintf(r.w, "result: FAILED (%d of %d checks failed)\n", r.failed, r.passed+r.failed)
}

// RunSources runs every check for each source that name selects
// (config.Config.Selected: every source for ""), each source's lines under
// a "source <name>" line when there are several; an unknown name is
// returned (a *config.SourceError), nothing checked.
func RunSources(ctx context.Context, cfg config.Config, name string, r *Report) error {
	ps, err := cfg.Selected(name)
	if err != nil {
		return err
	}
	for _, e := range cfg.Environment() {
		r.info("config", "%s", e)
	}
	for i, p := range ps {
		if len(ps) > 1 {
			if i > 0 {
				fmt.Fprintln(r.w)
			}
			fmt.Fprintf(r.w, "source %s\n", p.Name)
		}
		Run(ctx, p.Config, r)
	}
	return nil
}

// Run runs every check of one source (cfg without a sources list, e.g.
// one of config.Config.Pipelines), printing one line each to r.
func Run(ctx context.Context, cfg config.Config, r *Report) {
	src := cfg.Source
	store := checkpoint.NewStore(cfg.Checkpoint)
	defer store.Close()
	var tables []routed // nil: the outbox tables could not be checked
	srv, err := binlog.Connect(ctx, src, r.logger("source"))
	if err != nil {
		r.fail("source", "%v", err) // Connect's error names the address, the user and the fix
	} else {
		defer srv.Close()
		r.ok("source", "connected to %s as %q (%s %s, server_id %d)", src.Addr, src.User, srv.Flavor(), srv.Version(), srv.ServerID())
		checkSourceTLS(ctx, src, r)
		checkSource(ctx, cfg, srv, store, r)
		tables = checkTables(cfg, srv, r)
	}

	checkSecrets(cfg, r)
	checkKafkaSecurity(ctx, cfg, r)
	parts := checkTopics(ctx, cfg, tables, r)
	checkMirror(ctx, cfg, r)

	aof, rdb, err := store.Persistence(ctx)
	switch {
	case err != nil:
		r.fail("redis", "%s: %v: check %s, credentials and that Redis is up", cfg.Checkpoint.Where(), err, cfg.Checkpoint.AddrKey())
		return
	case !aof && !rdb:
		r.fail("redis", "%s does not persist (appendonly no, no save points): a Redis restart loses the checkpoint; set appendonly yes (CONFIG SET appendonly yes, and in redis.conf)", cfg.Checkpoint.Where())
	case !aof:
		r.warn("redis", "%s reachable, persistent by RDB snapshots only (appendonly no): a Redis crash loses the checkpoint writes since the last snapshot; the publisher then resumes from an older position and publishes more duplicates (nothing is lost); set appendonly yes", cfg.Checkpoint.Where())
	default:
		r.ok("redis", "%s reachable and persistent (appendonly yes)", cfg.Checkpoint.Where())
	}
	switch state, err := store.TLSState(ctx); {
	case err != nil:
		r.fail("redis", "TLS: %v", err)
	case state == "":
		what := "the checkpoints cross"
		if cfg.Checkpoint.Password != "" || cfg.Checkpoint.PasswordFile != "" {
			what = "the password and checkpoints cross"
		}
		r.warn("redis", "plaintext connection (checkpoint.tls.enabled: false): %s the network unencrypted", what)
	default:
		r.ok("redis", "TLS: %s", state)
	}
	checkEviction(ctx, cfg, store, r)
	checkCheckpoint(ctx, cfg, store, srv, parts, r)
}

// checkSource checks the server settings, the privileges and the
// server_ids the source's publishers register as (serverIDFindings): one
// FAIL line per problem, or one OK line, saying when the server_ids could
// not be checked (the WARN lines say why).
func checkSource(ctx context.Context, cfg config.Config, srv *binlog.Server, store *checkpoint.Store, r *Report) {
	warned, failed := r.warned, r.failed
	if err := srv.CheckSettings(); err != nil {
		for _, e := range mapping.Problems(err) {
			r.fail("source", "%v", e)
		}
	}
	ids := ""
	for _, x := range serverIDFindings(serverIDFactsOf(ctx, cfg, srv, store)) {
		switch x.level {
		case levelFail:
			r.fail("source", "%s", x.msg)
		case levelWarn:
			r.warn("source", "%s", x.msg)
		default:
			ids = x.msg
		}
	}
	if r.failed > failed {
		return
	}
	if r.warned == warned {
		r.ok("source", "binlog settings (log_bin, binlog_format=ROW, binlog_row_image=FULL), privileges, %s", ids)
		return
	}
	r.ok("source", "binlog settings (log_bin, binlog_format=ROW, binlog_row_image=FULL), privileges; %s", ids)
}

// checkEviction FAILs a maxmemory-policy that may evict the checkpoint
// (checkpoint.EvictionRisk).
func checkEviction(ctx context.Context, cfg config.Config, store *checkpoint.Store, r *Report) {
	policy, max, err := store.MaxMemoryPolicy(ctx)
	if err != nil {
		r.warn("redis", "cannot read maxmemory-policy (%v): make sure it is noeviction or volatile-*, or the checkpoint may be evicted", err)
		return
	}
	ttl, err := store.TTL(ctx)
	if err != nil {
		r.warn("redis", "cannot read the checkpoint key's TTL (%v)", err)
		return
	}
	if risk := checkpoint.EvictionRisk(policy, max, ttl); risk != "" {
		r.fail("redis", "%s: %s", cfg.Checkpoint.Where(), risk)
		return
	}
	r.ok("redis", "%s: maxmemory-policy %s does not evict the checkpoint", cfg.Checkpoint.Where(), policy)
}

// checkTopic checks that topic exists and returns its partition count;
// setting names where the topic comes from (router.topic, a mapping's
// template, kafka.dead-letter-topic) in the lines.
func checkTopic(ctx context.Context, cfg config.Config, what, topic, setting string, r *Report) (int, bool) {
	ids, err := sink.Partitions(ctx, cfg.Kafka, topic)
	switch {
	case errors.Is(err, kafka.UnknownTopicOrPartition) && cfg.Kafka.AllowAutoTopicCreation:
		r.ok(what, "%s (%s) does not exist yet; kafka.allow-auto-topic-creation is on, so the broker creates it with its default partition count at the first record", topic, setting)
	case errors.Is(err, kafka.UnknownTopicOrPartition) && what == "topic" && cfg.Kafka.MissingTopic == sink.MissingTopicCreate:
		// run creates it at its first record (kafka.missing-topic: create):
		// may it?
		if cerr := sink.CanCreateTopic(ctx, cfg.Kafka, topic); cerr != nil {
			r.fail(what, "%s (%s) does not exist, and run could not create it (kafka.missing-topic: create): %v", topic, setting, cerr)
		} else {
			r.ok(what, "%s (%s) does not exist yet; run creates it at its first record (kafka.missing-topic: create, kafka.topic-creation), which the brokers accept", topic, setting)
		}
	case errors.Is(err, kafka.UnknownTopicOrPartition):
		r.fail(what, "%s (%s) does not exist: create it with the partition count you want, e.g. kafka-topics.sh --bootstrap-server %s --create --topic %s --partitions 8 "+
			"(the count must stay fixed), or set kafka.missing-topic: create to have run create missing topics (kafka.topic-creation)", topic, setting, cfg.Kafka.Brokers[0], topic)
	case err != nil:
		r.fail(what, "%s (%s): %v: check kafka.brokers and that the brokers are up", topic, setting, err)
	default:
		r.ok(what, "%s (%s) exists, %d partitions", topic, setting, len(ids))
		if max, err := sink.TopicMaxMessageBytes(ctx, cfg.Kafka, topic); err != nil {
			r.warn(what, "%s: cannot read max.message.bytes (%v): kafka.batch-bytes %d not checked against it", topic, err, cfg.Kafka.BatchBytes)
		} else if cfg.Kafka.BatchBytes > max {
			r.fail(what, "kafka.batch-bytes %d exceeds %s's max.message.bytes %d: the broker rejects a full partition batch (its records are then resent one at a time, and one larger than %d bytes is poison); lower kafka.batch-bytes to at most %d, or raise the topic's max.message.bytes (and the broker's message.max.bytes)",
				cfg.Kafka.BatchBytes, topic, max, max, max)
		}
		return len(ids), true
	}
	return 0, false
}

// checkCheckpoint checks the stored checkpoint against the server (srv may
// be nil when unreachable) and the topics' partition counts (parts).
func checkCheckpoint(ctx context.Context, cfg config.Config, store *checkpoint.Store, srv *binlog.Server, parts map[string]int, r *Report) {
	st, startErr := binlog.ParseStart(cfg.Source.Start)
	if startErr != nil {
		// run refuses it as a configuration error, checkpoint or not.
		r.fail("config", "source.start: %v", startErr)
	}
	cp, err := store.Load(ctx)
	if err != nil {
		r.fail("checkpoint", "%v", err)
		return
	}
	if cp == nil {
		if startErr != nil {
			return
		}
		if st.Kind == binlog.StartUnset {
			r.fail("checkpoint", "none under %s, and no source.start: set source.start (latest, earliest, <file>:<pos>, gtid:<set>) or give run --start for the first run", store.Key())
			return
		}
		r.ok("checkpoint", "none under %s: the first run starts from source.start %s", store.Key(), cfg.Source.Start)
		return
	}
	problems := 0
	if srv != nil {
		// run's history check (docs/operations.md, "When the server's
		// binlog history changes"), before the file's presence: a reset
		// is no purge.
		if v, err := pipeline.CheckStored(srv, cfg.Source.PositionMode, cp); err != nil {
			r.warn("checkpoint", "cannot compare the checkpoint with the server's binlog history: %v", err)
		} else if v.Err != nil {
			r.fail("checkpoint", "%s: %v", store.Key(), v.Err)
			return
		}
	}
	if srv != nil && cp.File != "" && (cfg.Source.PositionMode == binlog.ModeFile || cp.GTIDSet == "") {
		if err := srv.Available(cp.Position()); err != nil {
			problems++
			purged := errors.Is(err, binlog.ErrPositionUnavailable)
			switch policy := cfg.Source.OnPurged; {
			case purged && cfg.Source.Archive != "":
				r.warn("checkpoint", "%v: run catches up from source.archive (%s) if it holds that binlog; otherwise source.on-purged (%s) decides", err, cfg.Source.Archive, cmp.Or(policy, binlog.OnPurgedFail))
			case purged && (policy == binlog.OnPurgedEarliest || policy == binlog.OnPurgedLatest):
				r.warn("checkpoint", "%v: run will resume at the %s position (source.on-purged: %s), so the events of the purged binlog are NOT published; to keep them, restore the binlog files and set source.archive", err, policy, policy)
			default:
				r.fail("checkpoint", "%v: the publisher cannot resume; see docs/operations.md (checkpoint set, source.archive, source.on-purged)", err)
			}
		}
	}
	// As run: the topics stored with the checkpoint are compared too (a
	// template's topics beyond the values check read).
	var stored []string
	for t := range cp.Partitions {
		if _, ok := parts[t]; !ok {
			stored = append(stored, t)
		}
	}
	if more, err := pipeline.PartitionCounts(ctx, cfg.Kafka, stored); err == nil && len(more) > 0 {
		all := maps.Clone(more)
		maps.Copy(all, parts)
		parts = all
	}
	if changes := pipeline.PartitionChanges(cp.Partitions, parts); len(changes) > 0 {
		problems++
		r.fail("checkpoint", "%v", pipeline.PartitionChangeError(store.Key(), changes))
	}
	if problems == 0 {
		pos := cp.GTIDSet
		if cp.File != "" {
			pos = fmt.Sprintf("%s:%d", cp.File, cp.Pos)
		}
		extra := "partition counts stored with it match"
		if len(cp.Partitions) == 0 {
			extra = "no partition counts stored yet"
		}
		r.ok("checkpoint", "%s at %s, on the server; %s", store.Key(), strings.TrimSpace(pos), extra)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// checkSourceTLS reports how the SQL connection to the source is protected.
func checkSourceTLS(ctx context.Context, src binlog.Config, r *Report) {
	c, err := binlog.Dial(ctx, src, "")
	if err != nil {
		r.fail("source", "%v", err)
		return
	}
	defer c.Close()
	if st := binlog.TLSState(c, src); st != "" {
		r.ok("source", "TLS (source.ssl-mode %s): %s", cmp.Or(src.SSLMode, binlog.SSLPreferred), st)
	} else {
		r.warn("source", "plaintext connection (source.ssl-mode %s): set verify-identity with source.ssl-ca when the network is not trusted", cmp.Or(src.SSLMode, binlog.SSLPreferred))
		if src.AllowPublicKeyRetrieval {
			r.warn("source", "source.allow-public-key-retrieval: true: a caching_sha2_password login after FLUSH PRIVILEGES or a restart fetches the server's RSA key unauthenticated (an active attacker could read the password); TLS needs no key")
		}
	}
}

// checkKafkaSecurity reports each bootstrap broker's connection: TLS
// version and verification, SASL mechanism.
func checkKafkaSecurity(ctx context.Context, cfg config.Config, r *Report) {
	conns, err := sink.Probe(ctx, cfg.Kafka)
	if err != nil {
		if errors.Is(err, sink.ErrSecurity) {
			r.fail("kafka", "%v", err) // names its setting
		} else {
			r.fail("kafka", "%v (check kafka.brokers: %s)", err, strings.Join(cfg.Kafka.Brokers, ","))
		}
		return
	}
	for _, c := range conns {
		tlsState := cmp.Or(c.TLS, "plaintext")
		login := "no SASL login"
		if c.Mechanism != "" {
			login = "SASL " + c.Mechanism
		}
		if c.TLS == "" || cfg.Kafka.TLS.InsecureSkipVerify {
			r.warn("kafka", "%s: %s, %s", c.Broker, tlsState, login)
		} else {
			r.ok("kafka", "%s: %s, %s", c.Broker, tlsState, login)
		}
	}
}

// checkSecrets warns about secret files readable by others.
func checkSecrets(cfg config.Config, r *Report) {
	for _, w := range cfg.SecretWarnings() {
		r.warn("secrets", "%s", w)
	}
}
