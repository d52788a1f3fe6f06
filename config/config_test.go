package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// clearEnv unsets every CDC_OUTBOX_* variable for the test so that the
// caller's environment cannot leak into loadConfig.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, EnvPrefix) {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const fullYAML = `
source:
  flavor: mariadb
  addr: db.internal:3306
  user: cdc_outbox
  password: from-file
  server-id: 6001
  schema: im
  table: outbox
  position-mode: gtid
  start: gtid:0-1-42
  heartbeat-period: 2s
  read-timeout: 15s
  server-id-wait: 1m
  txn-buffer: 16
router:
  topic: im.{event_type}
kafka:
  brokers: [k1:9092, k2:9092]
  batch-size: 500
  batch-bytes: 524288
  write-timeout: 3s
  max-attempts: 2
  compression: zstd
  allow-auto-topic-creation: true
checkpoint:
  addr: redis.internal:6379
  username: u
  password: p
  db: 3
  key: cdc-outbox:checkpoint:test
  interval: 250ms
  timeout: 1s
log:
  format: console
  level: debug
shutdown-timeout: 45s
retry-backoff-max: 2m
`

func TestLoadConfigExample(t *testing.T) {
	clearEnv(t)
	cfg, err := Load(filepath.Join("..", "config.example.yaml"))
	if err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config.example.yaml does not validate: %v", err)
	}
	// Spot-check that the keys were read, not left at their defaults.
	if cfg.Source.Addr != "127.0.0.1:33306" || cfg.Source.User != "cdc_outbox" || cfg.Source.Schema != "im" ||
		cfg.Source.Start != "latest" || cfg.Kafka.Brokers[0] != "127.0.0.1:39092" || cfg.Checkpoint.Addr != "127.0.0.1:36379" ||
		cfg.Checkpoint.Key != "cdc-outbox:checkpoint:im" || cfg.Router.Topic != "im.events" {
		t.Errorf("config.example.yaml read as %+v", cfg)
	}
}

func TestLoadConfigFull(t *testing.T) {
	clearEnv(t)
	cfg, err := Load(writeConfig(t, fullYAML))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := Default()
	want.Source = binlog.Config{Flavor: "mariadb", Addr: "db.internal:3306", User: "cdc_outbox", Password: "from-file",
		ServerID: 6001, Schema: "im", Table: "outbox", PositionMode: "gtid", Start: "gtid:0-1-42",
		HeartbeatPeriod: 2 * time.Second, ReadTimeout: 15 * time.Second, Linger: 3 * time.Millisecond, ServerIDWait: time.Minute, TxnBuffer: 16, BufferBytes: 16 << 20,
		BackfillWhere: binlog.DefaultBackfillWhere}
	want.Router.Topic = "im.{event_type}"
	want.Kafka.Brokers = []string{"k1:9092", "k2:9092"}
	want.Kafka.BatchSize, want.Kafka.BatchBytes, want.Kafka.WriteTimeout = 500, 524288, 3*time.Second
	want.Kafka.MaxAttempts, want.Kafka.Compression, want.Kafka.AllowAutoTopicCreation = 2, "zstd", true
	want.Checkpoint.Addr, want.Checkpoint.Username, want.Checkpoint.Password, want.Checkpoint.DB = "redis.internal:6379", "u", "p", 3
	want.Checkpoint.Key, want.Checkpoint.Interval, want.Checkpoint.Timeout = "cdc-outbox:checkpoint:test", 250*time.Millisecond, time.Second
	want.Log = logging.Config{Format: "console", Level: "debug"}
	want.ShutdownTimeout, want.RetryBackoffMax = 45*time.Second, 2*time.Minute
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("loadConfig =\n %+v\nwant\n %+v", cfg, want)
	}
}

func TestLoadConfigDefaultsKept(t *testing.T) {
	clearEnv(t)
	// Keys absent from the file keep their defaults.
	cfg, err := Load(writeConfig(t, "source:\n  user: u\n  schema: im\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Source.User, want.Source.Schema = "u", "im"
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("loadConfig =\n %+v\nwant\n %+v", cfg, want)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want string
	}{
		{"unknown top-level key", "sourcez:\n  user: u\n", "line 1: sourcez: unknown key; did you mean source?; the top level has: source, router, kafka"},
		{"unknown nested key", "source:\n  user: u\n  pasword: x\n", "line 3: source.pasword: unknown key; did you mean password?; source has: flavor, addr, user, password"},
		{"snake_case key is unknown", "source:\n  server_id: 7\n", "source.server_id: unknown key; did you mean server-id?"},
		{"no suggestion when nothing is close", "source:\n  zzzzzzzz: 7\n", "source.zzzzzzzz: unknown key; source has:"},
		{"a scalar for a list", "kafka:\n  brokers: 127.0.0.1:9092\n", "into []string (key kafka.brokers) (a list: [a, b], or one \"- a\" per line)"},
		{"camelCase key is unknown", "kafka:\n  batchSize: 7\n", "kafka.batchSize: unknown key; did you mean batch-size?; kafka has: brokers, batch-size"},
		{"every error at once", "source:\n  read-timeout: 30\nkafka:\n  batch-sise: 10\n", "(a duration needs a unit, e.g. 30s, 500ms or 2m)\nline 4: kafka.batch-sise: unknown key"},
		{"bad type", "source:\n  server-id: abc\n", "line 2: cannot unmarshal !!str `abc` into uint32"},
		{"bad duration", "source:\n  read-timeout: soon\n", "soon"},
		{"bad type names the key", "kafka:\n  batch-size: many\n", "(key kafka.batch-size)"},
		{"duration without a unit names the key", "checkpoint:\n  interval: 5\n", "into time.Duration (key checkpoint.interval) (a duration needs a unit"},
		{"negative unsigned", "source:\n  server-id: -1\n", "-1"},
		{"not a mapping", "- a\n- b\n", "cannot unmarshal"},
		{"syntax error", "source: [\n", "yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			p := writeConfig(t, c.yaml)
			_, err := Load(p)
			if err == nil {
				t.Fatalf("loadConfig accepted %q", c.yaml)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("err = %v, want it to name the file and contain %q", err, c.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		clearEnv(t)
		_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
		if err == nil || !os.IsNotExist(unwrapAll(err)) {
			t.Errorf("err = %v, want a not-exist error", err)
		}
	})
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func TestLoadConfigEmptyFileOrNoFile(t *testing.T) {
	for _, text := range []string{"", "# only a comment\n"} {
		clearEnv(t)
		cfg, err := Load(writeConfig(t, text))
		if err != nil {
			t.Fatalf("Load(%q): %v", text, err)
		}
		if !reflect.DeepEqual(cfg, Default()) {
			t.Errorf("Load(%q) = %+v, want the defaults", text, cfg)
		}
	}
	cfg, err := Load("")
	if err != nil || !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("Load(\"\") = %+v, %v; want the defaults", cfg, err)
	}
}

func TestLoadConfigEnvOverrides(t *testing.T) {
	clearEnv(t)
	p := writeConfig(t, fullYAML)
	t.Setenv("CDC_OUTBOX_SOURCE_PASSWORD", "from-env")
	t.Setenv("CDC_OUTBOX_KAFKA_BROKERS", "a:1,b:2")
	t.Setenv("CDC_OUTBOX_SOURCE_SERVER_ID", "7002")
	t.Setenv("CDC_OUTBOX_SOURCE_READ_TIMEOUT", "1m30s")
	t.Setenv("CDC_OUTBOX_SOURCE_POSITION_MODE", "file")
	t.Setenv("CDC_OUTBOX_SOURCE_START", "mariadb-bin.000002:4")
	t.Setenv("CDC_OUTBOX_ROUTER_TOPIC", "events")
	t.Setenv("CDC_OUTBOX_KAFKA_ALLOW_AUTO_TOPIC_CREATION", "false")
	t.Setenv("CDC_OUTBOX_CHECKPOINT_DB", "9")
	t.Setenv("CDC_OUTBOX_LOG_LEVEL", "warn")
	t.Setenv("CDC_OUTBOX_SHUTDOWN_TIMEOUT", "5s")
	t.Setenv("CDC_OUTBOX_KAFKA_ON_POISON", "dead-letter")
	t.Setenv("CDC_OUTBOX_KAFKA_DEAD_LETTER_TOPIC", "im.dlq")
	cfg, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"source.password", cfg.Source.Password, "from-env"},
		{"kafka.brokers", cfg.Kafka.Brokers, []string{"a:1", "b:2"}},
		{"source.server-id", cfg.Source.ServerID, uint32(7002)},
		{"source.read-timeout", cfg.Source.ReadTimeout, 90 * time.Second},
		{"source.position-mode", cfg.Source.PositionMode, "file"},
		{"source.start", cfg.Source.Start, "mariadb-bin.000002:4"},
		{"router.topic", cfg.Router.Topic, "events"},
		{"kafka.allow-auto-topic-creation", cfg.Kafka.AllowAutoTopicCreation, false},
		{"checkpoint.db", cfg.Checkpoint.DB, 9},
		{"log.level", cfg.Log.Level, "warn"},
		{"shutdown-timeout", cfg.ShutdownTimeout, 5 * time.Second},
		{"kafka.on-poison", cfg.Kafka.OnPoison, "dead-letter"},
		{"kafka.dead-letter-topic", cfg.Kafka.DeadLetterTopic, "im.dlq"},
		// Not overridden: the file's values stay.
		{"source.user", cfg.Source.User, "cdc_outbox"},
		{"kafka.batch-size", cfg.Kafka.BatchSize, 500},
		{"checkpoint.password", cfg.Checkpoint.Password, "p"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	// The start log and check name each of them, and whether it replaced
	// a value of the file.
	got := map[string]string{}
	for _, e := range cfg.Environment() {
		got[e.Key] = e.String()
	}
	for key, want := range map[string]string{
		"source.password":         "source.password from CDC_OUTBOX_SOURCE_PASSWORD, over the file's value",
		"kafka.brokers":           "kafka.brokers from CDC_OUTBOX_KAFKA_BROKERS, over the file's value",
		"kafka.dead-letter-topic": "kafka.dead-letter-topic from CDC_OUTBOX_KAFKA_DEAD_LETTER_TOPIC",
		"shutdown-timeout":        "shutdown-timeout from CDC_OUTBOX_SHUTDOWN_TIMEOUT, over the file's value",
		"kafka.on-poison":         "kafka.on-poison from CDC_OUTBOX_KAFKA_ON_POISON",
	} {
		if got[key] != want {
			t.Errorf("Environment() %s: %q, want %q", key, got[key], want)
		}
	}
	if len(got) != 13 {
		t.Errorf("Environment() has %d settings, want the 13 variables: %v", len(got), got)
	}
}

func TestLoadConfigEnvWithoutFile(t *testing.T) {
	clearEnv(t)
	t.Setenv("CDC_OUTBOX_SOURCE_USER", "env-user")
	t.Setenv("CDC_OUTBOX_SOURCE_SCHEMA", "im")
	t.Setenv("CDC_OUTBOX_SOURCE_START", "latest")
	cfg, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if cfg.Source.User != "env-user" || cfg.Source.Schema != "im" {
		t.Errorf("env not applied: %+v", cfg.Source)
	}
}

func TestLoadConfigBadEnv(t *testing.T) {
	// The error names the variable and what it wants.
	for _, kv := range [][3]string{
		{"CDC_OUTBOX_SOURCE_SERVER_ID", "abc", `CDC_OUTBOX_SOURCE_SERVER_ID="abc": want an integer`},
		{"CDC_OUTBOX_KAFKA_WRITE_TIMEOUT", "10", `CDC_OUTBOX_KAFKA_WRITE_TIMEOUT="10": want a duration with a unit`},
		{"CDC_OUTBOX_CHECKPOINT_DB", "x", `CDC_OUTBOX_CHECKPOINT_DB="x": want an integer`},
		{"CDC_OUTBOX_KAFKA_ALLOW_AUTO_TOPIC_CREATION", "yes please", `want true or false`},
	} {
		t.Run(kv[0], func(t *testing.T) {
			clearEnv(t)
			t.Setenv(kv[0], kv[1])
			_, err := Load("")
			if err == nil || !strings.HasPrefix(err.Error(), "config: environment: ") || !strings.Contains(err.Error(), kv[2]) {
				t.Errorf("err = %v, want an environment error containing %s", err, kv[2])
			}
		})
	}
}

func TestConfigValidateJoinsAllSections(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want []string // line prefixes; none: valid
	}{
		{name: "valid", mod: func(*Config) {}},
		{
			name: "one error per section",
			mod: func(c *Config) {
				c.Source.User = ""
				c.Router.Topic = ""
				c.Kafka.Brokers = nil
				c.Checkpoint.Key = ""
				c.Log.Format = "xml"
				c.Log.Level = "trace"
				c.ShutdownTimeout = 0
				c.RetryBackoffMax = 500 * time.Millisecond
			},
			want: []string{"source.user:", "router.topic:", "kafka.brokers:", "checkpoint.key:",
				`log.format: "xml"`, `log.level: "trace"`, "shutdown-timeout: 0s", "retry-backoff-max: 500ms"},
		},
		{name: "gc-headroom off", mod: func(c *Config) { c.GCHeadroom = 0 }},
		{name: "gc-headroom negative", mod: func(c *Config) { c.GCHeadroom = -1 }, want: []string{"gc-headroom: -1: want 0 (off) to 1073741824 (1 GiB) bytes"}},
		{name: "gc-headroom above 1 GiB", mod: func(c *Config) { c.GCHeadroom = 1<<30 + 1 }, want: []string{"gc-headroom: 1073741825:"}},
		{
			name: "several errors in one section and one in another",
			mod: func(c *Config) {
				c.Source.Addr, c.Source.ServerID = "x", 0
				c.Kafka.MaxAttempts = 0
			},
			want: []string{"source.addr:", "source.server-id:", "kafka.max-attempts:"},
		},
		{name: "checkpoint only", mod: func(c *Config) { c.Checkpoint.Interval = time.Millisecond }, want: []string{"checkpoint.interval:"}},
		{name: "dead-letter topic equals router.topic", mod: func(c *Config) { c.Kafka.DeadLetterTopic = c.Router.Topic },
			want: []string{`router.topic: "im.events": is also kafka.dead-letter-topic`}},
		{name: "router.topic internal", mod: func(c *Config) { c.Router.Topic = "__consumer_offsets" },
			want: []string{`router.topic: "__consumer_offsets": a Kafka-internal topic name`}},
		{name: "router.topic template internal", mod: func(c *Config) { c.Router.Topic = "__{event_type}" },
			want: []string{`router.topic: "__{event_type}": a Kafka-internal topic name`}},
		{name: "dead-letter topic internal", mod: func(c *Config) { c.Kafka.DeadLetterTopic = "__transaction_state" },
			want: []string{`kafka.dead-letter-topic: "__transaction_state": a Kafka-internal topic name`}},
		{name: "mirror topic internal", mod: func(c *Config) { c.Checkpoint.MirrorTopic = "__checkpoints" },
			want: []string{`checkpoint.mirror-topic: "__checkpoints": a Kafka-internal topic name`}},
		{name: "router.topic equals the mirror topic", mod: func(c *Config) { c.Router.Topic = c.Checkpoint.MirrorTopic },
			want: []string{`router.topic: "cdc-outbox.checkpoints": is also checkpoint.mirror-topic`}},
		{name: "dead-letter topic equals the mirror topic", mod: func(c *Config) { c.Kafka.DeadLetterTopic = c.Checkpoint.MirrorTopic },
			want: []string{`kafka.dead-letter-topic: "cdc-outbox.checkpoints": is also checkpoint.mirror-topic`}},
		{name: "mapping topic internal", mod: func(c *Config) { c.Source.Mapping = mapping.Config{Preset: "debezium", Topic: "__consumer_offsets"} },
			want: []string{`source.mapping.topic: "__consumer_offsets": a Kafka-internal topic name`}},
		{name: "mapping template invalid", mod: func(c *Config) {
			c.Source.Mapping = mapping.Config{Preset: "debezium", Topic: "orders/{aggregatetype}"}
		},
			want: []string{`source.mapping.topic: "orders/{aggregatetype}": not a valid Kafka topic name: character '/' at 6`}},
		{name: "table mapping topic is the dead-letter topic", mod: func(c *Config) {
			c.Source.Tables = []binlog.TableConfig{{Table: "outbox", Mapping: mapping.Config{Preset: "debezium", Topic: c.Kafka.DeadLetterTopic}}}
		}, want: []string{`source.tables[0].mapping.topic: "cdc-outbox.dead-letter": is also kafka.dead-letter-topic`}},
		{name: "mapping template", mod: func(c *Config) {
			c.Source.Mapping = mapping.Config{Preset: "debezium", Topic: "orders.{aggregatetype}"}
		}},
		{name: "bad poison policy", mod: func(c *Config) { c.Kafka.OnPoison = "ignore" }, want: []string{`kafka.on-poison: "ignore"`}},
		{name: "log level must be lower case", mod: func(c *Config) { c.Log.Level = "INFO" }, want: []string{`log.level: "INFO"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			cfg.Source.User, cfg.Source.Schema, cfg.Source.Start = "u", "im", "latest"
			c.mod(&cfg)
			err := cfg.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
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

// The start-up log line logs the source section with zap.Any: the password
// must not reach the log, whatever the encoder.
func TestRedactedSourceNotLogged(t *testing.T) {
	const secret = "Hunter2-very-secret"
	cfg := Default()
	cfg.Source.User, cfg.Source.Schema, cfg.Source.Password = "u", "im", secret
	for _, enc := range []struct {
		name string
		enc  zapcore.Encoder
	}{
		{"json", zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())},
		{"console", zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())},
	} {
		t.Run(enc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := zap.New(zapcore.NewCore(enc.enc, zapcore.AddSync(&buf), zapcore.DebugLevel))
			log.Info("starting", zap.Any("source", cfg.Source.Redacted()))
			_ = log.Sync()
			out := buf.String()
			if strings.Contains(out, secret) {
				t.Fatalf("password logged: %s", out)
			}
			if !strings.Contains(out, "***") || !strings.Contains(out, "u") {
				t.Errorf("source not logged as expected: %s", out)
			}
		})
	}
	if cfg.Source.Password != secret {
		t.Error("Redacted modified the configuration")
	}
}

// The poison policy keys are read from the kafka section.
func TestLoadConfigPoisonPolicy(t *testing.T) {
	clearEnv(t)
	cfg, err := Load(writeConfig(t, "kafka:\n  on-poison: dead-letter\n  dead-letter-topic: im.dead\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Kafka.OnPoison != "dead-letter" || cfg.Kafka.DeadLetterTopic != "im.dead" {
		t.Fatalf("kafka section read as %+v", cfg.Kafka)
	}
	cfg, err = Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Kafka.OnPoison != "fail" || cfg.Kafka.DeadLetterTopic != "cdc-outbox.dead-letter" {
		t.Fatalf("defaults %+v", cfg.Kafka)
	}
}

// A CDC_OUTBOX_* variable that names no setting is an error with the
// closest name, and a bad value is reported under the variable's own name
// (not the Go field's), every problem at once; other variables are ignored.
func TestApplyEnvErrors(t *testing.T) {
	cfg := Default()
	_, err := applyEnv(&cfg, []string{
		"HOME=/root",
		"CDC_OUTBOX_KAFKA_BATCH_SIZ=10",
		"CDC_OUTBOX_SOURCE_ADDR=127.0.0.1:1",
		"CDC_OUTBOX_CHECKPOINT_ADDR=127.0.0.1:2",
		"CDC_OUTBOX_KAFKA_BATCH_SIZE=lots",
		"CDC_OUTBOX_SOURCE_READ_TIMEOUT=5",
		"CDC_OUTBOX_NOTHING_LIKE_IT=1",
		"CDC_OUTBOX_SOURCE_MAPPING_PRESET=generic",
	})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"CDC_OUTBOX_KAFKA_BATCH_SIZ: no such setting; did you mean CDC_OUTBOX_KAFKA_BATCH_SIZE?",
		`CDC_OUTBOX_KAFKA_BATCH_SIZE="lots": want an integer`,
		`CDC_OUTBOX_SOURCE_READ_TIMEOUT="5": want a duration with a unit`,
		"CDC_OUTBOX_NOTHING_LIKE_IT: no such setting (every variable is in docs/configuration.md",
		// Not "did you mean CDC_OUTBOX_SOURCE_ON_PURGED?".
		"CDC_OUTBOX_SOURCE_MAPPING_PRESET: no such setting: source.mapping, source.tables and sources have no variables; set them in the config file",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "SOURCE_ADDR") || strings.Contains(msg, "HOME") {
		t.Errorf("error names a good or unrelated variable:\n%s", msg)
	}
	if cfg.Source.Addr != Default().Source.Addr {
		t.Errorf("a failed environment was partly applied: source.addr %q", cfg.Source.Addr)
	}

	// An empty value (an unset secret in a template) is refused, not ignored.
	cfg = Default()
	_, err = applyEnv(&cfg, []string{"CDC_OUTBOX_SOURCE_PASSWORD=", "CDC_OUTBOX_KAFKA_BROKERS="})
	if err == nil || !strings.Contains(err.Error(), "CDC_OUTBOX_SOURCE_PASSWORD is set but empty") || !strings.Contains(err.Error(), "CDC_OUTBOX_KAFKA_BROKERS is set but empty") {
		t.Fatalf("empty values: err = %v", err)
	}

	cfg = Default()
	if _, err := applyEnv(&cfg, []string{"CDC_OUTBOX_SOURCE_ADDR=127.0.0.1:1", "CDC_OUTBOX_CHECKPOINT_ADDR=127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Source.Addr != "127.0.0.1:1" || cfg.Checkpoint.Addr != "127.0.0.1:2" || cfg.Kafka.BatchSize != Default().Kafka.BatchSize {
		t.Errorf("got source.addr %q, checkpoint.addr %q, kafka.batch-size %d", cfg.Source.Addr, cfg.Checkpoint.Addr, cfg.Kafka.BatchSize)
	}
}

// checkpoint show and reset only touch Redis: a config with just the
// checkpoint section is enough for them, not for the other commands.
func TestCheckpointConfigNeedsOnlyCheckpoint(t *testing.T) {
	clearEnv(t)
	p := writeConfig(t, "checkpoint: {addr: \"127.0.0.1:6379\", key: \"cdc-outbox:im\"}\n")
	if _, err := LoadFor(p, ScopeCheckpoint); err != nil {
		t.Fatalf("LoadFor(ScopeCheckpoint): %v", err)
	}
	if _, err := LoadFor(p, ScopeOps); err == nil || !strings.Contains(err.Error(), "source.") {
		t.Fatalf("LoadFor(ScopeOps) = %v, want the source section's errors", err)
	}
	p = writeConfig(t, "checkpoint: {addr: \"nope\", key: \"\"}\nlog: {level: loud}\n")
	_, err := LoadFor(p, ScopeCheckpoint)
	if err == nil || !strings.Contains(err.Error(), "checkpoint.addr") || !strings.Contains(err.Error(), "checkpoint.key") || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("LoadFor(ScopeCheckpoint) = %v, want checkpoint.addr, checkpoint.key and log.level named", err)
	}
}

// A value that parses but is invalid names the variable it came from.
func TestInvalidConfigNamesVariable(t *testing.T) {
	cfg := Default()
	cfg.Kafka.WriteTimeout = -time.Second
	cfg.Source.ServerID = 0
	err := Invalid(cfg.Validate(), []string{"CDC_OUTBOX_KAFKA_WRITE_TIMEOUT=-1s", "PATH=/bin"})
	msg := err.Error()
	if !strings.Contains(msg, "kafka.write-timeout: -1s: want > 0 (set by CDC_OUTBOX_KAFKA_WRITE_TIMEOUT)") {
		t.Errorf("the environment's value is not named:\n%s", msg)
	}
	if strings.Contains(msg, "server-id") && strings.Contains(msg, "(set by CDC_OUTBOX_SOURCE_SERVER_ID)") {
		t.Errorf("a value from the file is said to come from the environment:\n%s", msg)
	}
	if !strings.HasPrefix(msg, "invalid configuration:\n") || strings.Count(msg, "\n") < 2 {
		t.Errorf("not every error is listed:\n%s", msg)
	}
}
