package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/cdc-outbox/cdc-outbox/audit"
	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/logging"
	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/cdc-outbox/cdc-outbox/lease"
	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/cdc-outbox/cdc-outbox/otlp"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"gopkg.in/yaml.v3"
)

// EnvPrefix prefixes every environment override, e.g.
// CDC_OUTBOX_SOURCE_PASSWORD overrides source.password.
const EnvPrefix = "CDC_OUTBOX_"

// Config is the whole configuration file (see config.example.yaml).
type Config struct {
	Source     binlog.Config     `yaml:"source" envPrefix:"SOURCE_" doc:"The MySQL or MariaDB server and the outbox table(s) read from its binlog."`
	Router     router.Config     `yaml:"router" envPrefix:"ROUTER_" doc:"Where records go."`
	Kafka      sink.Config       `yaml:"kafka" envPrefix:"KAFKA_" doc:"The Kafka producer."`
	Checkpoint checkpoint.Config `yaml:"checkpoint" envPrefix:"CHECKPOINT_" doc:"The checkpoint in Redis."`
	Log        logging.Config    `yaml:"log" envPrefix:"LOG_" doc:"The logs."`
	// HA: the leases that make one instance publish each source (docs/ha.md).
	HA lease.Config `yaml:"ha" envPrefix:"HA_" doc:"The leases that make one instance publish each source (docs/ha.md); the rules below apply with ha.enabled true."`
	// Audit: the continuous delivery audit (package audit,
	// docs/verify-and-audit.md); off by default.
	Audit audit.Config `yaml:"audit" envPrefix:"AUDIT_" doc:"The continuous delivery audit behind the checkpoint (docs/verify-and-audit.md); off by default." rule:"enabled not with ha.enabled (run the audit command instead)"`
	// Sources: several sources in one process (see SourceConfig); empty:
	// the top-level sections are the one source.
	Sources []SourceConfig `yaml:"sources" doc:"Several sources in one process, each its own pipeline, lease and checkpoint; empty: the top-level sections are the one source (docs/ha.md)." rule:"names unique; checkpoint keys unique; server-id ranges on one server apart"`
	// ShutdownTimeout bounds the flush after SIGINT/SIGTERM.
	ShutdownTimeout time.Duration `yaml:"shutdown-timeout" env:"SHUTDOWN_TIMEOUT" doc:"Bound on the flush after SIGINT or SIGTERM." rule:"> 0"`
	// RetryBackoffMax caps the wait between pipeline restarts after a
	// retryable error (broker, database or network down).
	RetryBackoffMax time.Duration `yaml:"retry-backoff-max" env:"RETRY_BACKOFF_MAX" doc:"Cap of the wait between pipeline restarts after a retryable error (broker, database or network down)." rule:"at least 1s"`
	// MetricsAddr is where run serves /metrics, /healthz, /readyz and
	// /status (default 127.0.0.1:9108, loopback only; "" serves nothing),
	// host:port.
	MetricsAddr string `yaml:"metrics-addr" env:"METRICS_ADDR" doc:"Where run serves /metrics, /healthz, /readyz and /status (loopback by default; :9108 for every interface); empty: nowhere." rule:"host:port or empty"`
	// Metrics: the metrics' ways out besides metrics-addr (OTLP).
	Metrics MetricsConfig `yaml:"metrics" envPrefix:"METRICS_" doc:"The metrics' ways out besides /metrics on metrics-addr (docs/metrics.md)."`
	// AdaptiveProcs: run's Go scheduler uses one processor while the
	// process uses less than a third of a core and every CPU as soon as
	// it uses half of one (package procs: the thread wake-ups between
	// goroutines were most of the CPU of a trickle of small
	// transactions). Default true; ignored when GOMAXPROCS is set in the
	// environment.
	AdaptiveProcs bool `yaml:"adaptive-procs" env:"ADAPTIVE_PROCS" doc:"run's Go scheduler uses one processor while the process uses less than a third of a core, every CPU from half a core on; ignored when GOMAXPROCS is set." rule:"-"`
	// GCHeadroom: run gives the Go garbage collector this many bytes of
	// headroom above the live heap (package gcpace: a ballast the
	// collector counts as live and nothing touches; a small heap was
	// collected several times a second; 7–13 % less CPU for a trickle). Default 16777216 (16 MiB); 0 for none; at most
	// 1073741824 (1 GiB). Ignored when GOGC or GOMEMLIMIT is set in the
	// environment.
	GCHeadroom int64 `yaml:"gc-headroom" env:"GC_HEADROOM" doc:"Bytes of headroom run gives the Go garbage collector above the live heap (a ballast, not resident); 0: none; ignored when GOGC or GOMEMLIMIT is set." rule:"0 to 1073741824 (1 GiB)"`
	// LatencyBudget chooses the trade between latency and the brokers'
	// cost: the p99 commit → append latency to aim at, a duration from
	// 1ms to 10s (default 15ms). Within it the Writer coalesces: a round
	// whose predecessor began a gap ago goes at once (a trickle pays no
	// wait), and at a higher rate rounds less than half full start at most
	// once per gap, so that batches grow instead of produce requests
	// (exactly-once: commits too). source.linger and
	// kafka.transaction-interval derive from it unless set (sink.Split:
	// linger a fifth, at most 10ms; gap three fifths; transaction
	// interval the budget, at least 100ms). docs/operations.md, "Latency
	// budget".
	LatencyBudget time.Duration `yaml:"latency-budget" env:"LATENCY_BUDGET" doc:"The p99 commit → append latency to aim at: higher means fewer, fuller produce requests (less broker CPU); source.linger and kafka.transaction-interval derive from it unless set (docs/operations.md, Latency budget)." rule:"1ms to 10s"`

	// environment: the settings the CDC_OUTBOX_* variables gave (Load).
	environment []EnvSetting

	// tableBeside: the source sections ("source", "sources[1].source")
	// that give source.table beside source.tables (found by Load).
	tableBeside []string
}

// MetricsConfig is the metrics section: where run sends its metrics
// besides serving them at /metrics on metrics-addr.
type MetricsConfig struct {
	// OTLP pushes the metrics to an OpenTelemetry collector (package
	// otlp); off while metrics.otlp.endpoint is empty.
	OTLP otlp.Config `yaml:"otlp" envPrefix:"OTLP_" doc:"OTLP export of the metrics served at /metrics (the same names and labels), beside them, to an OpenTelemetry Collector; off while endpoint is empty (docs/metrics.md, OTLP)."`
}

func Default() Config {
	return Config{
		Source:          binlog.DefaultConfig(),
		Router:          router.DefaultConfig(),
		Kafka:           sink.DefaultConfig(),
		Checkpoint:      checkpoint.DefaultConfig(),
		Log:             logging.DefaultConfig(),
		HA:              lease.DefaultConfig(),
		Audit:           audit.DefaultConfig(),
		ShutdownTimeout: 30 * time.Second,
		RetryBackoffMax: 5 * time.Second,
		MetricsAddr:     "127.0.0.1:9108",
		Metrics:         MetricsConfig{OTLP: otlp.DefaultConfig()},
		AdaptiveProcs:   true,
		GCHeadroom:      16 << 20,
		LatencyBudget:   sink.DefaultLatencyBudget,
	}
}

// loadConfig applies, in order: defaults, the YAML file (unknown keys are
// errors), then CDC_OUTBOX_* environment variables.
func Load(path string) (Config, error) {
	cfg := Default()
	var doc yaml.Node
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, errEOF(err)) {
			return cfg, fmt.Errorf("config %s: %w", path, explainYAML(err, b, yamlDoc{t: reflect.TypeFor[Config](), label: "the top level"}))
		}
		_ = yaml.Unmarshal(b, &doc) // decoded above
	}
	set, err := applyEnv(&cfg, os.Environ())
	if err != nil {
		return cfg, fmt.Errorf("config: environment: %w", err)
	}
	cfg.environment = environmentSettings(set, func(path string) bool { return hasKey(&doc, strings.Split(path, ".")...) })
	// source.table has a default: only the file or the environment tell
	// whether it was given beside source.tables (Validate refuses that).
	if len(cfg.Source.Tables) > 0 && (hasKey(&doc, "source", "table") || os.Getenv(EnvPrefix+"SOURCE_TABLE") != "") {
		cfg.tableBeside = append(cfg.tableBeside, "source")
	}
	cfg.spendBudget(func(section, key string) bool {
		return hasKey(&doc, section, key) || os.Getenv(EnvPrefix+strings.ToUpper(section+"_"+strings.ReplaceAll(key, "-", "_"))) != ""
	})
	if err := cfg.resolveSources(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// spendBudget derives the settings that latency-budget governs and that
// were not given (given(section, key): the file or the environment set
// it) from it: source.linger and kafka.transaction-interval (sink.Split),
// and hands it to the Writer (sink.Config.LatencyBudget). The sources
// entries start from these top-level sections, so an entry inherits them
// unless it sets the key itself.
func (c *Config) spendBudget(given func(section, key string) bool) {
	share := sink.Split(c.LatencyBudget)
	if !given("source", "linger") {
		c.Source.Linger = share.Linger
	}
	if !given("kafka", "transaction-interval") {
		c.Kafka.TransactionInterval = share.TransactionInterval
	}
	c.Kafka.LatencyBudget = c.LatencyBudget
}

// hasKey reports whether the YAML document or mapping n has the key path.
func hasKey(n *yaml.Node, path ...string) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if len(path) == 0 {
		return true
	}
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == path[0] {
			return hasKey(n.Content[i+1], path[1:]...)
		}
	}
	return false
}

// EnvSetting is a setting a CDC_OUTBOX_* variable gave (names only: the
// value may be a secret).
type EnvSetting struct {
	Var string // CDC_OUTBOX_SOURCE_PASSWORD
	Key string // source.password
	// OverridesFile: the config file gives the key too (or its -file
	// variant, for a secret): the variable's value is the one used.
	OverridesFile bool
}

// String is "source.password from CDC_OUTBOX_SOURCE_PASSWORD", with
// ", over the file's value" when OverridesFile.
func (e EnvSetting) String() string {
	s := e.Key + " from " + e.Var
	if e.OverridesFile {
		s += ", over the file's value"
	}
	return s
}

// Environment returns the settings the CDC_OUTBOX_* variables gave, by
// key: the start log and check name them, so that a variable left in a
// deployment's environment never overrides the file unseen.
func (c Config) Environment() []EnvSetting { return c.environment }

// environmentSettings names the variables of set (applyEnv's) with their
// keys; inFile(path) reports whether the config file gives the key path.
func environmentSettings(set map[string]string, inFile func(path string) bool) []EnvSetting {
	if len(set) == 0 {
		return nil
	}
	secs, _ := ReferenceSections() // a key without its doc tag does not matter here
	// A secret's two forms: a variable of either replaces the file's value
	// of the other (replaceSecretForms), so both count as the file's.
	other := map[string]string{}
	for _, s := range secs {
		for _, k := range s.Keys {
			if k.File != "" {
				other[k.Path], other[k.File] = k.File, k.Path
			}
		}
	}
	var out []EnvSetting
	for _, s := range secs {
		for _, k := range s.Keys {
			if _, ok := set[k.Env]; !ok || k.Env == "" {
				continue
			}
			over := inFile(k.Path) || (other[k.Path] != "" && inFile(other[k.Path]))
			out = append(out, EnvSetting{Var: k.Env, Key: k.Path, OverridesFile: over})
		}
	}
	slices.SortFunc(out, func(a, b EnvSetting) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// applyEnv applies the CDC_OUTBOX_* variables of environ (KEY=value) to
// cfg and returns those it applied (name → value). A variable with the
// prefix that names no setting, an empty value, or a value that does not
// parse, is an error naming the variable; all are joined.
func applyEnv(cfg *Config, environ []string) (map[string]string, error) {
	params, err := env.GetFieldParamsWithOptions(cfg, env.Options{Prefix: EnvPrefix})
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	var names []string
	for _, p := range params {
		known[p.Key] = true
		names = append(names, p.Key)
	}
	set := map[string]string{}
	var errs []error
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, EnvPrefix) {
			continue
		}
		if !known[k] {
			if strings.HasPrefix(k, EnvPrefix+"SOURCE_MAPPING_") || strings.HasPrefix(k, EnvPrefix+"SOURCE_TABLES_") || strings.HasPrefix(k, EnvPrefix+"SOURCES_") {
				errs = append(errs, fmt.Errorf("%s: no such setting: source.mapping, source.tables and sources have no variables; set them in the config file (docs/mapping.md)", k))
				continue
			}
			errs = append(errs, fmt.Errorf("%s: no such setting%s", k, suggest(k, names)))
			continue
		}
		if v == "" {
			// The library would ignore it: an empty secret or address from
			// a template must not silently fall back to the file's value.
			errs = append(errs, fmt.Errorf("%s is set but empty: give it a value, or unset it (unset %s) to use the file's value or the default", k, k))
			continue
		}
		set[k] = v
	}
	// Each variable alone, so that a bad value is reported under its own
	// name (the library names the Go field, which is ambiguous).
	for k, v := range set {
		probe := Default()
		if err := env.ParseWithOptions(&probe, env.Options{Prefix: EnvPrefix, Environment: map[string]string{k: v}}); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %v", k, v, envCause(err)))
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(errs...)
	}
	if len(set) == 0 {
		return nil, nil
	}
	if err := env.ParseWithOptions(cfg, env.Options{Prefix: EnvPrefix, Environment: set}); err != nil {
		return nil, err
	}
	replaceSecretForms(cfg, set)
	return set, nil
}

// replaceSecretForms makes a variable that gives a secret in one form
// replace the file's value of the other form: CDC_OUTBOX_SOURCE_PASSWORD_FILE
// clears a source.password written in the file (and
// CDC_OUTBOX_SOURCE_PASSWORD a source.password-file), as a variable
// replaces any other value of the file; without it Validate would refuse
// the pair ("set either ... not both"). Both variables set are still
// refused. The pairs are the keys tagged secret (package confref).
func replaceSecretForms(cfg *Config, set map[string]string) {
	secs, _ := ReferenceSections() // a key without its doc tag does not matter here
	envOf := map[string]string{}
	for _, s := range secs {
		for _, k := range s.Keys {
			envOf[k.Path] = k.Env
		}
	}
	for _, s := range secs {
		for _, k := range s.Keys {
			_, inline := set[k.Env]
			_, file := set[envOf[k.File]]
			switch {
			case k.File == "" || k.Env == "" || envOf[k.File] == "":
			case file && !inline:
				clearKey(reflect.ValueOf(cfg).Elem(), k.Path)
			case inline && !file:
				clearKey(reflect.ValueOf(cfg).Elem(), k.File)
			}
		}
	}
}

// clearKey sets the field of struct v at key path ("source.password") to
// its zero value.
func clearKey(v reflect.Value, path string) {
	name, rest, _ := strings.Cut(path, ".")
	for i := 0; i < v.NumField(); i++ {
		if key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); key == name {
			if rest == "" {
				v.Field(i).SetZero()
			} else {
				clearKey(v.Field(i), rest)
			}
			return
		}
	}
}

// envCause strips the library's wrapping down to the parse failure.
func envCause(err error) error {
	var agg env.AggregateError
	if errors.As(err, &agg) && len(agg.Errors) > 0 {
		err = agg.Errors[0]
	}
	var pe env.ParseError
	if !errors.As(err, &pe) || pe.Err == nil || pe.Type == nil {
		return err
	}
	want := pe.Type.String()
	switch k := pe.Type.Kind(); {
	case pe.Type == reflect.TypeOf(time.Duration(0)):
		want = "a duration with a unit (e.g. 10s, 500ms, 2m)"
	case k >= reflect.Int && k <= reflect.Uint64:
		want = "an integer"
	case k == reflect.Bool:
		want = "true or false"
	}
	return fmt.Errorf("want %s: %w", want, pe.Err)
}

// suggest names the known variable closest to k, if one is close.
func suggest(k string, names []string) string {
	if best := closest(k, names); best != "" {
		return "; did you mean " + best + "?"
	}
	return " (every variable is in docs/configuration.md, or cdc-outbox config reference: CDC_OUTBOX_<SECTION>_<KEY> with sections SOURCE, ROUTER, KAFKA, CHECKPOINT, LOG, HA, or CDC_OUTBOX_<KEY> for the top-level keys)"
}

// suggestKey names the key of keys closest to the unknown key k of a
// YAML section ("server_id": "server-id"), if one is close: the keys are
// kebab-case.
func suggestKey(k string, keys []string) string {
	if best := closest(strings.ReplaceAll(strings.ToLower(k), "_", "-"), keys); best != "" {
		return "; did you mean " + best + "?"
	}
	return ""
}

// closest returns the name of names within a third of k's length in edit
// distance that is nearest to k, "" when none is.
func closest(k string, names []string) string {
	best, bestD := "", len(k)/3+1
	for _, n := range names {
		if d := editDistance(k, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Scope says which sections a command needs valid.
type Scope int

// Scopes, from the most to the least demanding.
const (
	// ScopeRun: every section, source.start included (run).
	ScopeRun Scope = iota
	// ScopeOps: every section, but source.start is neither required nor
	// checked (only run starts from it; check reports on it itself); it is
	// kept in the configuration.
	ScopeOps
	// ScopeFiles: as ScopeOps, without a source connection (replay
	// --binlog-files): source.user is not required.
	ScopeFiles
	// ScopeCheckpoint: only the checkpoint and log sections (checkpoint
	// show, reset: they only touch Redis), so that an operator can look at
	// a checkpoint with a config that has just checkpoint.addr and key.
	ScopeCheckpoint
)

// Check validates c for scope s and returns every problem at once, each
// naming the CDC_OUTBOX_* variable that set the value, if one did (Invalid);
// nil when valid.
func (c *Config) Check(s Scope) error {
	var err error
	switch s {
	case ScopeCheckpoint:
		err = errors.Join(c.Checkpoint.Validate(), c.Log.Validate())
	case ScopeOps, ScopeFiles:
		v := *c
		v.Source.Start = ""
		v.Sources = slices.Clone(c.Sources)
		for i := range v.Sources {
			v.Sources[i].Source.Start = ""
			if s == ScopeFiles && v.Sources[i].Source.User == "" {
				v.Sources[i].Source.User = "unused"
			}
		}
		if s == ScopeFiles && v.Source.User == "" {
			v.Source.User = "unused" // no connection: the source section only names the table
		}
		err = v.Validate()
	default:
		err = c.Validate()
	}
	if err != nil {
		return Invalid(err, os.Environ())
	}
	return nil
}

// LoadFor is Load followed by Check(s).
func LoadFor(path string, s Scope) (Config, error) {
	cfg, err := Load(path)
	if err != nil {
		return cfg, err
	}
	return cfg, cfg.Check(s)
}

// invalidConfig wraps Validate's joined errors for the user: each error
// about a key set by a CDC_OUTBOX_* variable of environ also names that
// variable (kafka.write-timeout → CDC_OUTBOX_KAFKA_WRITE_TIMEOUT), so the
// fix is looked for where the value came from.
func Invalid(err error, environ []string) error {
	set := map[string]bool{}
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, EnvPrefix) && v != "" {
			set[k] = true
		}
	}
	var out []error
	for _, e := range mapping.Problems(err) {
		key, _, ok := strings.Cut(e.Error(), ": ")
		if name := EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key)); ok && set[name] {
			e = fmt.Errorf("%w (set by %s)", e, name)
		}
		out = append(out, e)
	}
	return fmt.Errorf("invalid configuration:\n%w", errors.Join(out...))
}

// explainYAML rewrites yaml.v3's type errors, which name Go types ("field
// batch-sise not found in type sink.Config"), in the file's terms: the key
// path, the keys that section has, and that a duration needs a unit. All
// the errors of the file are kept (yaml.v3 reports every one at once).
// data was decoded into doc.t.
func explainYAML(err error, data []byte, doc yamlDoc) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	keys := keyLines(data)
	lineOf := regexp.MustCompile(`^line (\d+): cannot unmarshal`)
	type section struct {
		path string // "kafka." ("" at the root)
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
	walk(doc.t, doc.path)
	unknown := regexp.MustCompile(`^(line \d+): field (\S+) not found in type (\S+)$`)
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if lm := lineOf.FindStringSubmatch(m); lm != nil && keys[lm[1]] != "" {
			m += " (key " + doc.path + keys[lm[1]] + ")"
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(m, ":", 2)[0], "line ")); err == nil && doc.lines[n] != 0 {
			m = fmt.Sprintf("line %d%s", doc.lines[n], m[len("line "+strconv.Itoa(n)):])
		}
		sm := unknown.FindStringSubmatch(m)
		sec, ok := section{}, false
		if sm != nil {
			sec, ok = sections[sm[3]]
		}
		switch {
		case ok:
			msgs[i] = fmt.Sprintf("%s: %s%s: unknown key%s; %s has: %s", sm[1], sec.path, sm[2], suggestKey(sm[2], yamlKeys(sec.t)),
				cmp.Or(strings.TrimSuffix(sec.path, "."), doc.label), strings.Join(yamlKeys(sec.t), ", "))
		case strings.Contains(m, "into time.Duration"):
			msgs[i] = m + " (a duration needs a unit, e.g. 30s, 500ms or 2m)"
		case strings.Contains(m, "!!str") && strings.Contains(m, "into []string"):
			msgs[i] = m + " (a list: [a, b], or one \"- a\" per line)"
		default:
			msgs[i] = m
		}
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// yamlDoc is what explainYAML needs of the YAML it explains: the type it
// was decoded into, the key path of its root ("" for the file,
// "sources[1]." for an entry) and its name in messages ("the top level",
// "sources[1]"); lines maps its line numbers to the file's when it is a
// re-rendered part of the file (nil: the same).
type yamlDoc struct {
	t           reflect.Type
	path, label string
	lines       map[int]int
}

// keyLines maps each line of a YAML document holding a value to that
// value's key path ("kafka.batch-size"), for error messages that only give
// the line.
func keyLines(data []byte) map[string]string {
	out := map[string]string{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return out
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				out[strconv.Itoa(v.Line)] = p
				walk(v, p)
			}
		}
	}
	walk(&doc, "")
	return out
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
	var errs []error
	if len(c.Sources) > 0 {
		// The top-level sections are the entries' defaults; each entry is
		// validated whole.
		errs = append(errs, c.validateSources())
	} else {
		errs = append(errs, c.Source.Validate(), c.Router.Validate(), c.Kafka.Validate(), c.Checkpoint.Validate())
		errs = append(errs, topicErrors(c.Source, c.Router, c.Kafka, c.Checkpoint)...)
	}
	for _, sec := range c.tableBeside {
		errs = append(errs, fmt.Errorf("%s.table: not read when %s.tables is set (the tables listed there are the source's outbox tables): remove it, or list it in %s.tables as {table: ...}", sec, sec, sec))
	}
	errs = append(errs, c.Log.Validate(), c.HA.Validate(), c.Audit.Validate(), c.Metrics.OTLP.Validate())
	if c.Audit.Enabled && c.HA.Enabled {
		errs = append(errs, errors.New("audit.enabled: not with ha.enabled (every instance would audit, and their cursors clash): run `cdc-outbox audit` as one process of its own instead, with the same configuration"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown-timeout: %s: want > 0", c.ShutdownTimeout))
	}
	if c.GCHeadroom < 0 || c.GCHeadroom > 1<<30 {
		errs = append(errs, fmt.Errorf("gc-headroom: %d: want 0 (off) to 1073741824 (1 GiB) bytes", c.GCHeadroom))
	}
	if c.LatencyBudget < sink.MinLatencyBudget || c.LatencyBudget > sink.MaxLatencyBudget {
		errs = append(errs, fmt.Errorf("latency-budget: %s: want %s to %s (the p99 commit → append latency to aim at: lower costs the brokers more produce requests, higher batches more)",
			c.LatencyBudget, sink.MinLatencyBudget, sink.MaxLatencyBudget))
	}
	if c.RetryBackoffMax < time.Second {
		errs = append(errs, fmt.Errorf("retry-backoff-max: %s: want at least 1s", c.RetryBackoffMax))
	}
	if c.MetricsAddr != "" {
		if _, port, err := net.SplitHostPort(c.MetricsAddr); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("metrics-addr: %q: want host:port (e.g. 127.0.0.1:9108, or :9108 for every interface)", c.MetricsAddr))
		}
	}
	return errors.Join(errs...)
}

// secretFiles lists the settings holding a secret file's path, by name.
func (c *Config) secretFiles() map[string]string {
	return map[string]string{
		"source.password-file":                  c.Source.PasswordFile,
		"kafka.sasl.password-file":              c.Kafka.SASL.PasswordFile,
		"kafka.sasl.token-file":                 c.Kafka.SASL.TokenFile,
		"kafka.sasl.client-secret-file":         c.Kafka.SASL.ClientSecretFile,
		"kafka.sasl.aws-secret-access-key-file": c.Kafka.SASL.AWSSecretAccessKeyFile,
		"kafka.sasl.aws-session-token-file":     c.Kafka.SASL.AWSSessionTokenFile,
		"checkpoint.password-file":              c.Checkpoint.PasswordFile,
		"checkpoint.sentinel-password-file":     c.Checkpoint.SentinelPasswordFile,
		"kafka.tls.key-file":                    c.Kafka.TLS.KeyFile,
		"checkpoint.tls.key-file":               c.Checkpoint.TLS.KeyFile,
		"source.ssl-key":                        c.Source.SSLKey,
		"metrics.otlp.headers-file":             c.Metrics.OTLP.HeadersFile,
		"metrics.otlp.tls.key-file":             c.Metrics.OTLP.TLS.KeyFile,
	}
}

// SecretWarnings returns a warning for each secret file (passwords,
// tokens, private keys) that its group or others may read (mode &
// 0o077), sorted; the files' contents are never part of them.
func (c *Config) SecretWarnings() []string {
	var out []string
	for setting, path := range c.secretFiles() {
		if path == "" {
			continue
		}
		if _, w, err := secure.ReadSecret(path, setting); err == nil && w != "" {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// Redacted returns a copy safe to print: every password, token and
// client secret masked (file paths are kept).
func (c Config) Redacted() Config {
	c.Source = c.Source.Redacted()
	c.Kafka = c.Kafka.Redacted()
	c.Checkpoint = c.Checkpoint.Redacted()
	c.Metrics.OTLP = c.Metrics.OTLP.Redacted()
	return c
}
