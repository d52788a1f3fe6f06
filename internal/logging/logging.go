// Package logging is the one logger set-up of every command: a zap logger
// in JSON (ts in ISO 8601) or console form at a given level, with zap's
// sampler on so that a warning repeated in a tight loop is logged at most
// a few times a second, and go-redis's own messages routed into it.
package logging

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config configures the logger.
type Config struct {
	Format string `yaml:"format" env:"FORMAT" doc:"The log format: json, or console for development." rule:"json or console"` // json or console
	Level  string `yaml:"level" env:"LEVEL" doc:"The lowest level logged." rule:"debug, info, warn or error"`                 // debug, info, warn, error
}

// DefaultConfig returns JSON at info level.
func DefaultConfig() Config { return Config{Format: "json", Level: "info"} }

// Validate checks the configuration and returns all problems joined.
func (c *Config) Validate() error {
	var errs []error
	switch c.Format {
	case "json", "console":
	default:
		errs = append(errs, fmt.Errorf("log.format: %q: want json or console", c.Format))
	}
	switch c.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level: %q: want debug, info, warn or error", c.Level))
	}
	return errors.Join(errs...)
}

// Sampling: per message text and level, the first samplingFirst entries of
// each second are logged, then every samplingThereafter-th.
const (
	samplingFirst      = 10
	samplingThereafter = 100
)

// New returns the logger for a valid Config. It also routes go-redis's
// package-level logger (go-redis has no per-client one) into it, as
// warnings at most one per 10 s.
func New(c Config) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, err
	}
	var zc zap.Config
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
	} else {
		zc = zap.NewProductionConfig()
		zc.EncoderConfig.TimeKey = "ts"
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Sampling = &zap.SamplingConfig{Initial: samplingFirst, Thereafter: samplingThereafter}
	zc.DisableStacktrace = true
	log, err := zc.Build()
	if err != nil {
		return nil, err
	}
	redis.SetLogger(redisLogger{log: log.Named("redis").Sugar(), every: NewLimiter(10*time.Second, 1)})
	return log, nil
}

// Limiter lets burst events through per period and counts the others:
// the one rate-limit helper for log lines that zap's sampler (which keys on
// the message text per second) does not cover, such as a warning repeated
// every few seconds for minutes. Safe for concurrent use.
type Limiter struct {
	period time.Duration
	burst  int

	mu         sync.Mutex
	start      time.Time
	n          int
	suppressed int
}

// NewLimiter returns a Limiter letting burst (>= 1) events through per period.
func NewLimiter(period time.Duration, burst int) *Limiter {
	return &Limiter{period: period, burst: max(burst, 1)}
}

// Allow reports whether an event at now may be logged, and how many were
// suppressed since the last one allowed.
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start.IsZero() || now.Sub(l.start) >= l.period {
		l.start, l.n = now, 0
	}
	if l.n >= l.burst {
		l.suppressed++
		return false, 0
	}
	l.n++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// redisLogger passes go-redis's messages on as warnings (it logs every
// failed dial of its pool, several a second while Redis is down).
type redisLogger struct {
	log   *zap.SugaredLogger
	every *Limiter
}

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	if ok, suppressed := l.every.Allow(time.Now()); ok {
		l.log.Warnw(fmt.Sprintf(format, v...), "suppressed", suppressed)
	}
}
