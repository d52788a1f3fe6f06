// Command cdc-outbox tails a MySQL/MariaDB binlog and publishes the outbox
// table's INSERTs to Kafka, checkpointing the binlog position in Redis.
//
// Usage: cdc-outbox run --config config.yaml [--start latest|earliest|file:pos|gtid:set]
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(execute(os.Args[1:]))
}

// exitError carries an exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func execute(args []string) int {
	root := &cobra.Command{
		Use:           "cdc-outbox",
		Short:         "Publish transactional-outbox rows from the MySQL/MariaDB binlog to Kafka",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.AddCommand(runCommand())
	root.AddCommand(verifyCommand())
	root.AddCommand(deadLetterCommand())
	root.AddCommand(checkpointCommand())
	root.AddCommand(statusCommand())
	root.AddCommand(checkCommand())
	root.AddCommand(replayCommand())
	root.AddCommand(pruneCommand())
	root.SetArgs(args)
	// Every command's context (cmd.Context()) ends on SIGINT or SIGTERM.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(os.Stderr, "cdc-outbox:", err)
		return 2
	}
	return 0
}

func newLogger(c LogConfig) (*zap.Logger, error) {
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
	zc.Sampling = nil
	zc.DisableStacktrace = true
	log, err := zc.Build()
	if err != nil {
		return nil, err
	}
	// go-redis logs through a package-level logger; route it to zap so
	// that JSON logs stay JSON.
	redis.SetLogger(newRedisLogger(log.Named("redis").Sugar()))
	return log, nil
}

// redisLogger passes go-redis's own messages on as warnings, at most one
// per 10 s (it logs every failed dial of its pool, several a second while
// Redis is down), with the number suppressed since the last one.
type redisLogger struct {
	log *zap.SugaredLogger
	mu  *sync.Mutex
	at  *time.Time
	n   *int
}

func newRedisLogger(log *zap.SugaredLogger) redisLogger {
	return redisLogger{log: log, mu: new(sync.Mutex), at: new(time.Time), n: new(int)}
}

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(*l.at) < 10*time.Second {
		*l.n++
		l.mu.Unlock()
		return
	}
	suppressed := *l.n
	*l.at, *l.n = now, 0
	l.mu.Unlock()
	l.log.Warnw(fmt.Sprintf(format, v...), "suppressed", suppressed)
}
