package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"gopkg.in/yaml.v3"
)

// EnvPrefix prefixes every environment override, e.g.
// CDC_OUTBOX_SOURCE_PASSWORD overrides source.password.
const EnvPrefix = "CDC_OUTBOX_"

// Config is the whole configuration file (see config.example.yaml).
type Config struct {
	Source     binlog.Config     `yaml:"source" envPrefix:"SOURCE_"`
	Router     router.Config     `yaml:"router" envPrefix:"ROUTER_"`
	Kafka      sink.Config       `yaml:"kafka" envPrefix:"KAFKA_"`
	Checkpoint checkpoint.Config `yaml:"checkpoint" envPrefix:"CHECKPOINT_"`
	Log        LogConfig         `yaml:"log" envPrefix:"LOG_"`
	// ShutdownTimeout bounds the flush after SIGINT/SIGTERM.
	ShutdownTimeout time.Duration `yaml:"shutdown-timeout" env:"SHUTDOWN_TIMEOUT"`
	// RetryBackoffMax caps the wait between pipeline restarts after a
	// retryable error (broker, database or network down).
	RetryBackoffMax time.Duration `yaml:"retry-backoff-max" env:"RETRY_BACKOFF_MAX"`
}

// LogConfig configures zap.
type LogConfig struct {
	Format string `yaml:"format" env:"FORMAT"` // json or console
	Level  string `yaml:"level" env:"LEVEL"`   // debug, info, warn, error
}

func defaultConfig() Config {
	return Config{
		Source:          binlog.DefaultConfig(),
		Router:          router.DefaultConfig(),
		Kafka:           sink.DefaultConfig(),
		Checkpoint:      checkpoint.DefaultConfig(),
		Log:             LogConfig{Format: "json", Level: "info"},
		ShutdownTimeout: 30 * time.Second,
		RetryBackoffMax: 30 * time.Second,
	}
}

// loadConfig applies, in order: defaults, the YAML file (unknown keys are
// errors), then CDC_OUTBOX_* environment variables.
func loadConfig(path string) (Config, error) {
	cfg := defaultConfig()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, errEOF(err)) {
			return cfg, fmt.Errorf("config %s: %w", path, explainYAML(err))
		}
	}
	if err := env.ParseWithOptions(&cfg, env.Options{Prefix: EnvPrefix}); err != nil {
		return cfg, fmt.Errorf("config: environment: %w", err)
	}
	return cfg, nil
}

// opsConfig loads and validates the configuration of a command other than
// run: source.start is not required nor checked (only run starts from it;
// check reports on it itself), but is kept in the result.
func opsConfig(path string) (Config, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return cfg, err
	}
	start := cfg.Source.Start
	cfg.Source.Start = ""
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("invalid configuration:\n%w", err)
	}
	cfg.Source.Start = start
	return cfg, nil
}

// explainYAML rewrites yaml.v3's type errors, which name Go types ("field
// batch-sise not found in type sink.Config"), in the file's terms: the key
// path, the keys that section has, and that a duration needs a unit. All
// the errors of the file are kept (yaml.v3 reports every one at once).
func explainYAML(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	type section struct {
		path string // "kafka." ("" at the top level)
		t    reflect.Type
	}
	sections := map[string]section{} // by Go type name
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		sections[t.String()] = section{path, t}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if key, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.Type.Kind() == reflect.Struct && key != "" && key != "-" {
				walk(f.Type, path+key+".")
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	unknown := regexp.MustCompile(`^(line \d+): field (\S+) not found in type (\S+)$`)
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		sm := unknown.FindStringSubmatch(m)
		sec, ok := section{}, false
		if sm != nil {
			sec, ok = sections[sm[3]]
		}
		switch {
		case ok:
			msgs[i] = fmt.Sprintf("%s: %s%s: unknown key; %s has: %s", sm[1], sec.path, sm[2],
				cmp.Or(strings.TrimSuffix(sec.path, "."), "the top level"), strings.Join(yamlKeys(sec.t), ", "))
		case strings.Contains(m, "into time.Duration"):
			msgs[i] = m + " (a duration needs a unit, e.g. 30s, 500ms or 2m)"
		default:
			msgs[i] = m
		}
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// yamlKeys lists the YAML keys of a config struct.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		if key, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); key != "" && key != "-" {
			keys = append(keys, key)
		}
	}
	return keys
}

// errEOF lets an empty file through.
func errEOF(err error) error {
	if err != nil && err.Error() == "EOF" {
		return err
	}
	return nil
}

// Validate validates every section and joins all errors.
func (c *Config) Validate() error {
	errs := []error{c.Source.Validate(), c.Router.Validate(), c.Kafka.Validate(), c.Checkpoint.Validate()}
	switch c.Log.Format {
	case "json", "console":
	default:
		errs = append(errs, fmt.Errorf("log.format: %q: want json or console", c.Log.Format))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level: %q: want debug, info, warn or error", c.Log.Level))
	}
	if c.Kafka.DeadLetterTopic != "" && c.Kafka.DeadLetterTopic == c.Router.Topic {
		errs = append(errs, fmt.Errorf("kafka.dead-letter-topic: %q: must differ from router.topic", c.Kafka.DeadLetterTopic))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown-timeout: %s: want > 0", c.ShutdownTimeout))
	}
	if c.RetryBackoffMax < time.Second {
		errs = append(errs, fmt.Errorf("retry-backoff-max: %s: want at least 1s", c.RetryBackoffMax))
	}
	return errors.Join(errs...)
}
