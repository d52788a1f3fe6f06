//go:build integration

package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"go.uber.org/zap"
)

// sha2User creates a caching_sha2_password user with a generated
// password and the publisher's privileges, dropped at the end.
func sha2User(t *testing.T) (user, pw string) {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	user, pw = "cdc_sha2_"+runID, "Pw-"+hex.EncodeToString(b)
	root := (&env{t: t}).sql()
	defer root.Close()
	for _, q := range []string{
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED WITH caching_sha2_password BY '%s'", user, pw),
		fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '%s'@'%%'", user),
	} {
		if _, err := root.Execute(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c := (&env{t: t}).sql()
		defer c.Close()
		_, _ = c.Execute(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user))
	})
	return user, pw
}

// flushSHA2Cache empties the server's caching_sha2_password cache (FLUSH
// PRIVILEGES; MySQL manual, "Caching SHA-2 Pluggable Authentication"):
// the next login of every user needs the full authentication, in
// plaintext the RSA public key exchange.
func flushSHA2Cache(t *testing.T) {
	t.Helper()
	c := (&env{t: t}).sql()
	defer c.Close()
	if _, err := c.Execute("FLUSH PRIVILEGES"); err != nil {
		t.Fatal(err)
	}
}

// killSessions kills the server connections of user (the publisher's
// SQL connections and its binlog dump thread) and returns how many.
func killSessions(t *testing.T, user string) int {
	t.Helper()
	c := (&env{t: t}).sql()
	defer c.Close()
	r, err := c.Execute("SELECT id FROM information_schema.processlist WHERE user = ?", user)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.RowNumber() {
		id, _ := r.GetInt(i, 0)
		_, _ = c.Execute(fmt.Sprintf("KILL %d", id))
	}
	return r.RowNumber()
}

// TestMySQLCachingSHA2 logs in as a caching_sha2_password user with TLS
// (verify-ca against the server's auto-generated CA: the password sent
// in clear inside TLS) and without (ssl-mode disabled: the password
// encrypted with the server's RSA public key, which go-mysql requests),
// each right after FLUSH PRIVILEGES (full authentication) and again
// (fast authentication from the cache). Then a publisher without TLS
// keeps publishing across FLUSH PRIVILEGES with its connections killed
// and across a server restart, both of which make its reconnection
// authenticate in full.
func TestMySQLCachingSHA2(t *testing.T) {
	onlyMySQL(t, "caching_sha2_password's cache and RSA key exchange (the MySQL 9.7 default plugin)")
	user, pw := sha2User(t)
	ctx := context.Background()
	ca := filepath.Join(os.Getenv("CDC_STACK_DIR"), "mysql", "root", "cdc", "data", "ca.pem") // auto_generate_certs
	for _, tc := range []struct {
		mode, ca, want string
	}{
		{binlog.SSLVerifyCA, ca, "verified against the CA"},
		{binlog.SSLDisabled, "", ""},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg := binlog.DefaultConfig()
			cfg.Addr, cfg.User, cfg.Password, cfg.Schema, cfg.Start = mysqlAddr, user, pw, mysqlDB, "latest"
			cfg.SSLMode, cfg.SSLCA = tc.mode, tc.ca
			cfg.AllowPublicKeyRetrieval = tc.mode == binlog.SSLDisabled
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			flushSHA2Cache(t)
			for _, auth := range []string{"full", "fast"} {
				conn, err := binlog.Dial(ctx, cfg, cfg.Schema)
				if err != nil {
					t.Fatalf("%s authentication: %v", auth, err)
				}
				if got := binlog.TLSState(conn, cfg); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
					t.Fatalf("TLS state %q, want %q", got, tc.want)
				}
				r, err := conn.Execute("SELECT CURRENT_USER()")
				conn.Close()
				if err != nil {
					t.Fatal(err)
				}
				if cu, _ := r.GetString(0, 0); !strings.HasPrefix(cu, user+"@") {
					t.Fatalf("logged in as %q", cu)
				}
			}
			flushSHA2Cache(t)
			srv, err := binlog.Connect(ctx, cfg, zap.NewNop())
			if err != nil {
				t.Fatalf("after FLUSH PRIVILEGES: %v", err)
			}
			if srv.Flavor() != binlog.FlavorMySQL {
				t.Fatalf("flavour %s", srv.Flavor())
			}
			srv.Close()
			wrong := cfg
			wrong.Password = pw + "x"
			if _, err := binlog.Dial(ctx, wrong, wrong.Schema); !binlog.IsFatal(err) || !strings.Contains(err.Error(), "source.password") {
				t.Fatalf("wrong password: %v", err)
			}
		})
	}

	// Without source.allow-public-key-retrieval a plaintext login that
	// needs the full authentication is refused with the fix; once a TLS
	// login filled the cache, a plaintext one gets the fast authentication
	// and needs no key.
	t.Run("no public key retrieval", func(t *testing.T) {
		cfg := binlog.DefaultConfig()
		cfg.Addr, cfg.User, cfg.Password, cfg.Schema, cfg.Start = mysqlAddr, user, pw, mysqlDB, "latest"
		cfg.SSLMode = binlog.SSLDisabled
		flushSHA2Cache(t)
		_, err := binlog.Dial(ctx, cfg, cfg.Schema)
		var pk *binlog.ErrPublicKeyRetrieval
		if !errors.As(err, &pk) || !binlog.IsFatal(err) || !strings.Contains(err.Error(), "source.allow-public-key-retrieval: true") {
			t.Fatalf("full authentication without TLS: %v", err)
		}
		if _, err := binlog.Connect(ctx, cfg, zap.NewNop()); !errors.As(err, &pk) {
			t.Fatalf("Connect: %v", err)
		}
		tlsCfg := cfg
		tlsCfg.SSLMode = binlog.SSLRequired
		c, err := binlog.Dial(ctx, tlsCfg, cfg.Schema)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if c, err = binlog.Dial(ctx, cfg, cfg.Schema); err != nil {
			t.Fatalf("fast authentication without TLS: %v", err)
		}
		c.Close()
	})

	t.Run("publisher reconnects", func(t *testing.T) {
		e := newEnv(t)
		path := e.config()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Replace(string(b), fmt.Sprintf("  user: %s\n  password: %s\n", mysqlUser, mysqlPass),
			fmt.Sprintf("  user: %s\n  password: %q\n  ssl-mode: disabled\n  allow-public-key-retrieval: true\n", user, pw), 1)
		if !strings.Contains(text, "ssl-mode: disabled") {
			t.Fatalf("the generated configuration has no user/password lines to replace:\n%s", text)
		}
		e.configText = text
		flushSHA2Cache(t)
		out, _ := exec.Command(binary, "check", "--config", e.config()).CombinedOutput()
		if !strings.Contains(string(out), "WARN  source       source.allow-public-key-retrieval: true") || strings.Contains(string(out), pw) {
			t.Fatalf("check does not warn of the public key retrieval (or shows the password):\n%s", out)
		}
		p := e.start()
		w := e.writer()
		plan := workload.Generate(41, 0, 10, 200, 1, 10, 80)
		if err := produce(w, plan); err != nil {
			t.Fatal(err)
		}
		requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))

		// FLUSH PRIVILEGES, then its connections killed: the reconnection
		// authenticates in full over plaintext.
		flushSHA2Cache(t)
		if n := killSessions(t, user); n == 0 {
			t.Fatal("the publisher has no server connection to kill")
		}
		more := workload.Generate(42, 1000, 10, 200, 1, 10, 80)
		if err := produce(w, more); err != nil {
			t.Fatal(err)
		}
		for k, v := range more.Last {
			plan.Last[k] = v
		}
		requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), time.Minute))

		// A server restart empties the cache too.
		stack(t, "restart-db")
		w = e.writer()
		last := workload.Generate(43, 2000, 10, 200, 1, 10, 80)
		if err := produce(w, last); err != nil {
			t.Fatal(err)
		}
		for k, v := range last.Last {
			plan.Last[k] = v
		}
		requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute))
		select {
		case err := <-p.done:
			t.Fatalf("the publisher exited: %v", err)
		default:
		}
		if !logHas(p.log, "restarting from the last acknowledged position") {
			b, _ := os.ReadFile(p.log)
			t.Fatalf("the publisher did not reconnect:\n%s", tail(string(b), 30))
		}
	})
}
