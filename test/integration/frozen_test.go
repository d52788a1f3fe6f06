//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/router"
	"github.com/segmentio/kafka-go"
)

// TestOneShotFrozen runs each one-shot command that connects to the
// database against a frozen one from the start (its packets held, not refused: a
// SIGSTOPped mysqld, a silent network), made by a pausing proxy in front
// of the real server. Each must end on its own, non-zero, naming
// source.read-timeout (5 s here), well within the test's bound of 90 s;
// before the fix their connection's handshake waited for good. A frozen
// Redis needs no case: its commands are bounded by checkpoint.timeout.
func TestOneShotFrozen(t *testing.T) {
	e := newEnv(t)
	e.deadLetter(t)
	file := e.oldestBinlog()
	db := newPauseProxy(t, mysqlAddr)
	e.sourceAddr = db.addr()
	cfg := e.config()
	// A checkpoint, so that prune goes on to the database.
	if out, code := e.cli(nil, "checkpoint", "set", file+":4"); code != 0 {
		t.Fatalf("checkpoint set: exit %d:\n%s", code, out)
	}
	db.setPaused(true)
	for _, args := range oneShotSQL(file) {
		runFrozen(t, args, cfg, "source.read-timeout")
	}
}

// oneShotSQL lists the one-shot commands that query the database.
func oneShotSQL(file string) [][]string {
	return [][]string{
		{"check"},
		{"checkpoint", "set", file + ":4"},
		{"verify"},
		{"replay", "--from", file + ":4", "--dry-run"},
		{"prune", "--older-than", "7d", "--dry-run"},
		{"dead-letter", "republish", "--dry-run"},
	}
}

// runFrozen runs cdc-outbox args with cfg in a parallel subtest: it must
// end on its own within 90 s, non-zero, its output naming key (or one of
// the keys key lists, separated by "|").
func runFrozen(t *testing.T, args []string, cfg, key string) {
	runFrozenExit(t, args, cfg, key, false)
}

// runFrozenExit is runFrozen; with zeroOK exit status 0 passes too (a
// command that reports the failure and goes on).
func runFrozenExit(t *testing.T, args []string, cfg, key string, zeroOK bool) {
	name := strings.Join(args, " ")
	t.Run(strings.Join(args[:min(2, len(args))], "_"), func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, append(args, "--config", cfg)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		t.Logf("cdc-outbox %s: %v after %s:\n%s", name, err, time.Since(start).Round(time.Millisecond), out.String())
		switch {
		case ctx.Err() != nil:
			t.Errorf("cdc-outbox %s: still waiting after 90 s", name)
		case cmd.ProcessState.ExitCode() == 0 && !zeroOK:
			t.Errorf("cdc-outbox %s: exit 0, want an error", name)
		case !slices.ContainsFunc(strings.Split(key, "|"), func(k string) bool { return strings.Contains(out.String(), k) }):
			t.Errorf("cdc-outbox %s: the output does not name %s", name, key)
		}
	})
}

// deadLetter configures e's commands with a dead-letter topic holding one
// dead letter (event 1 of e's outbox table), so that dead-letter
// republish goes on to the database.
func (e *env) deadLetter(t *testing.T) {
	dlq := e.topic + ".dlq"
	createTopic(t, dlq, 1)
	e.kafkaExtra += "  on-poison: dead-letter\n  dead-letter-topic: " + dlq + "\n"
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: dlq, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	// The topic's metadata is visible (createTopic) a moment before its
	// partition takes records: Unknown Topic Or Partition until then.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte("k"), Value: []byte(`{}`),
			Headers: []kafka.Header{{Key: router.HeaderEventID, Value: []byte("1")}}})
		if err == nil {
			return
		}
		if !errors.Is(err, kafka.UnknownTopicOrPartition) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// TestOneShotFrozenAfterHandshake: the database freezes after the
// command connected, its first statement in flight (a proxy that holds
// that statement, then every byte and every new connection). Each
// one-shot command that queries the database must end on its own,
// non-zero, naming source.read-timeout; before the fix their statements
// had no deadline and they waited for good.
func TestOneShotFrozenAfterHandshake(t *testing.T) {
	e := newEnv(t)
	e.sourceExtra = "  ssl-mode: disabled\n" // the proxy reads the statements
	e.deadLetter(t)
	file := e.oldestBinlog()
	if out, code := e.cli(nil, "checkpoint", "set", file+":4"); code != 0 {
		t.Fatalf("checkpoint set: exit %d:\n%s", code, out)
	}
	for _, args := range oneShotSQL(file) {
		db := newPauseProxy(t, mysqlAddr)
		db.pauseAtQuery()
		e.sourceAddr = db.addr()
		cfg := filepath.Join(e.dir, strings.Join(args[:min(2, len(args))], "_")+".yaml")
		b, err := os.ReadFile(e.config())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, b, 0o600); err != nil {
			t.Fatal(err)
		}
		runFrozen(t, args, cfg, "source.read-timeout")
	}
}

// TestStatementBound: a statement that runs longer than
// source.read-timeout is not cut (the server, asked on a second
// connection, still runs it); one whose server froze (every byte held)
// or whose connection was lost (the server alive) fails with a
// *binlog.StallError naming source.read-timeout.
func TestStatementBound(t *testing.T) {
	cfg := binlog.DefaultConfig()
	cfg.Addr, cfg.User, cfg.Password, cfg.SSLMode = mysqlAddr, mysqlUser, mysqlPass, binlog.SSLDisabled
	cfg.ReadTimeout = time.Second
	ctx := context.Background()
	t.Run("long", func(t *testing.T) {
		c, err := binlog.Dial(ctx, cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Execute("SELECT SLEEP(3)"); err != nil {
			t.Fatalf("a 3 s statement with read-timeout 1s: %v", err)
		}
	})
	stalled := func(t *testing.T, c *binlog.Conn, hold func()) {
		t.Helper()
		defer c.Close()
		hold()
		start := time.Now()
		_, err := c.Execute("SELECT 1")
		t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
		var se *binlog.StallError
		if !errors.As(err, &se) || !errors.Is(err, binlog.ErrStalled) || !strings.Contains(err.Error(), "source.read-timeout") {
			t.Fatalf("err = %v, want a *binlog.StallError naming source.read-timeout", err)
		}
	}
	t.Run("frozen", func(t *testing.T) {
		p := newPauseProxy(t, mysqlAddr)
		c, err := binlog.Dial(ctx, withAddr(cfg, p.addr()), "")
		if err != nil {
			t.Fatal(err)
		}
		stalled(t, c, func() { p.setPaused(true) })
	})
	t.Run("lost", func(t *testing.T) {
		p := newStallProxy(t, mysqlAddr)
		c, err := binlog.Dial(ctx, withAddr(cfg, p.addr()), "")
		if err != nil {
			t.Fatal(err)
		}
		stalled(t, c, func() { p.freeze() })
	})
}

func withAddr(c binlog.Config, addr string) binlog.Config {
	c.Addr = addr
	return c
}

// TestOneShotKafkaFrozen: Kafka frozen (a proxy in front of the broker
// holding every byte and every new connection, as a SIGSTOPped broker
// whose kernel still accepts connections). Each one-shot command that
// talks to Kafka must end on its own, non-zero, naming kafka.dial-timeout
// (or, for a produce request, kafka.write-timeout); before the fix their errors said "i/o timeout" and
// named no setting.
func TestOneShotKafkaFrozen(t *testing.T) {
	e := newEnv(t)
	e.deadLetter(t)
	before := e.masterStatus()
	end, _ := e.insertRaw([]string{row("'message.created'", "1", 1, `'{"m":"frozen kafka"}'`)})
	file := e.oldestBinlog()
	if out, code := e.cli(nil, "checkpoint", "set", file+":4"); code != 0 {
		t.Fatalf("checkpoint set: exit %d:\n%s", code, out)
	}
	k := newPauseProxy(t, brokers[0])
	e.kafka = []string{k.addr()}
	cfg := e.config()
	k.setPaused(true)
	for _, args := range [][]string{
		{"check"},
		{"verify"},
		{"replay", "--from", fmt.Sprintf("%s:%d", before.file, before.pos), "--to", fmt.Sprintf("%s:%d", end.file, end.pos)},
		{"dead-letter", "republish"},
	} {
		runFrozen(t, args, cfg, "kafka.dial-timeout|kafka.write-timeout")
	}
	// The Redis checkpoint shown, the mirror's copy unreadable: exit 0.
	runFrozenExit(t, []string{"checkpoint", "show"}, cfg, "kafka.dial-timeout", true)
}
