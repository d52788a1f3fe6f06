//go:build integration

package integration

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/consumer"
	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/cdc-outbox/cdc-outbox/internal/testcerts"
	"github.com/cdc-outbox/cdc-outbox/pipeline"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// The secured services of scripts/dev-stack.sh up-secure: its env command
// exports CDC_SECURE_* while they run. Without them these tests skip,
// unless CDC_REQUIRE_SECURE=1 (make test-secure) makes that a failure.
type secureStack struct {
	dir                                                       string // certificates in dir/tls, passwords in dir/secrets
	mysql, redis, redisUser                                   string
	kafkaPlain, kafkaSASL, kafkaMTLS, kafkaExpired, kafkaUser string
}

func secured(t *testing.T) *secureStack {
	t.Helper()
	s := &secureStack{dir: os.Getenv("CDC_SECURE_DIR"), mysql: os.Getenv("CDC_SECURE_MYSQL_ADDR"),
		redis: os.Getenv("CDC_SECURE_REDIS_ADDR"), redisUser: os.Getenv("CDC_SECURE_REDIS_USER"),
		kafkaPlain: os.Getenv("CDC_SECURE_KAFKA_PLAINTEXT"), kafkaSASL: os.Getenv("CDC_SECURE_KAFKA_SASL_SSL"),
		kafkaMTLS: os.Getenv("CDC_SECURE_KAFKA_MTLS"), kafkaExpired: os.Getenv("CDC_SECURE_KAFKA_EXPIRED"),
		kafkaUser: os.Getenv("CDC_SECURE_KAFKA_USER")}
	if s.dir == "" || s.kafkaSASL == "" || s.mysql == "" || s.redis == "" {
		if os.Getenv("CDC_REQUIRE_SECURE") == "1" {
			t.Fatal("CDC_REQUIRE_SECURE=1 but the secured services are not up: scripts/dev-stack.sh up-secure, then eval \"$(scripts/dev-stack.sh env)\"")
		}
		t.Skip("secured services not up (scripts/dev-stack.sh up-secure; eval \"$(scripts/dev-stack.sh env)\")")
	}
	return s
}

func (s *secureStack) cert(name string) string { return filepath.Join(s.dir, "tls", name) }

// secretFile returns the path of a generated password.
func (s *secureStack) secretFile(name string) string { return filepath.Join(s.dir, "secrets", name) }

func (s *secureStack) secret(t *testing.T, name string) string {
	b, err := os.ReadFile(s.secretFile(name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// kafkaSCRAM is a working SASL_SSL configuration (SCRAM-SHA-512, the
// password from a file, the CA verified with the host name).
func (s *secureStack) kafkaSCRAM(mech string) sink.Config {
	cfg := sink.DefaultConfig()
	cfg.Brokers = []string{s.kafkaSASL}
	cfg.TLS = secure.TLS{Enabled: true, CAFile: s.cert(testcerts.CA)}
	cfg.SASL = sink.SASL{Mechanism: mech, Username: s.kafkaUser, PasswordFile: s.secretFile("kafka")}
	return cfg
}

// unsecuredJWT is a token Kafka's default (unsecured) OAUTHBEARER
// validator accepts: alg none, sub, iat and exp.
func unsecuredJWT(sub string) string { return unsecuredJWTFor(sub, time.Hour) }

// unsecuredJWTFor is unsecuredJWT expiring after ttl (negative: expired).
func unsecuredJWTFor(sub string, ttl time.Duration) string {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now()
	return enc([]byte(`{"alg":"none"}`)) + "." +
		enc([]byte(fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, sub, now.Add(min(ttl, 0)-time.Minute).Unix(), now.Add(ttl).Unix()))) + "."
}

// TestSecureKafkaOIDC: OAUTHBEARER with the token from an OAuth 2.0
// client credentials endpoint (RFC 6749 §4.4; an httptest server that
// checks the client's Basic credentials, grant type and scope and issues
// unsigned JWTs, which the SASL_SSL listener's unsecured validator
// accepts): a login, the token reused by a second connection, a wrong
// client secret refused by the endpoint and an expired token refused by
// the broker, each a fatal *sink.SecurityError naming the setting.
func TestSecureKafkaOIDC(t *testing.T) {
	s := secured(t)
	ctx := context.Background()
	clientID, secret := "cdc-outbox:"+runID, "s3cr3t/"+runID
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var grants atomic.Int32
	var ttl atomic.Int64
	ttl.Store(int64(time.Hour))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		id, pw, ok := r.BasicAuth()
		id, _ = url.QueryUnescape(id) // RFC 6749 §2.3.1: form-encoded, then Basic
		pw, _ = url.QueryUnescape(pw)
		if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != "kafka" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_request"}`)
			return
		}
		if !ok || id != clientID || pw != secret {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"client authentication failed"}`)
			return
		}
		grants.Add(1)
		d := time.Duration(ttl.Load())
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":%d}`, unsecuredJWTFor(clientID, d), int64(max(d, time.Hour)/time.Second))
	}))
	defer srv.Close()
	oidc := func() sink.Config {
		cfg := s.kafkaSCRAM(sink.MechanismOAuthBearer)
		cfg.SASL = sink.SASL{Mechanism: sink.MechanismOAuthBearer, TokenURL: srv.URL + "/oauth2/token", ClientID: clientID,
			ClientSecretFile: secretFile, Scope: "kafka"}
		return cfg
	}

	// Two connections of one Security (the broker listed twice): one grant.
	cfg := oidc()
	cfg.Brokers = []string{s.kafkaSASL, s.kafkaSASL}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	conns, err := sink.Probe(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 2 || conns[1].Mechanism != sink.MechanismOAuthBearer || !strings.Contains(conns[1].TLS, "host name verified") {
		t.Fatalf("probe: %+v", conns)
	}
	if n := grants.Load(); n != 1 {
		t.Fatalf("%d token grants for two connections, want 1 (the token reused)", n)
	}
	if _, err := sink.Partitions(ctx, oidc(), "no-such-topic-"+runID); !errors.Is(err, kafka.UnknownTopicOrPartition) {
		t.Fatalf("partitions: %v", err)
	}

	wrong := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrong, []byte("not-the-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, setting, fix string
		edit               func(*sink.Config)
		ttl                time.Duration
	}{
		{"wrong client secret", "kafka.sasl.client-id / client-secret", "HTTP 401", func(c *sink.Config) { c.SASL.ClientSecretFile = wrong }, time.Hour},
		{"expired token", "kafka.sasl", "the broker refused the token", nil, -time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttl.Store(int64(tc.ttl))
			defer ttl.Store(int64(time.Hour))
			cfg := oidc()
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := sink.Probe(pctx, cfg)
			var se *sink.SecurityError
			if !errors.As(err, &se) || se.Setting != tc.setting || !strings.Contains(err.Error(), tc.fix) || !sink.IsFatal(err) {
				t.Fatalf("got %v, want a fatal SecurityError on %s saying %q", err, tc.setting, tc.fix)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatal("the client secret is in the error")
			}
		})
	}
}

// TestSecureKafkaConnections connects with every supported way and checks
// what Probe reports, then that metadata and a partition reader work the
// same way.
func TestSecureKafkaConnections(t *testing.T) {
	s := secured(t)
	ctx := context.Background()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(unsecuredJWT("cdc-outbox")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mtls := sink.DefaultConfig()
	mtls.Brokers = []string{s.kafkaMTLS}
	mtls.TLS = secure.TLS{Enabled: true, CAFile: s.cert(testcerts.CA), CertFile: s.cert(testcerts.Client), KeyFile: s.cert(testcerts.ClientKey)}
	oauth := s.kafkaSCRAM(sink.MechanismOAuthBearer)
	oauth.SASL = sink.SASL{Mechanism: sink.MechanismOAuthBearer, TokenFile: tok}
	for name, cfg := range map[string]sink.Config{
		"plain":         s.kafkaSCRAM(sink.MechanismPlain),
		"scram-sha-256": s.kafkaSCRAM(sink.MechanismSCRAM256),
		"scram-sha-512": s.kafkaSCRAM(sink.MechanismSCRAM512),
		"oauthbearer":   oauth,
		"mtls":          mtls,
	} {
		t.Run(name, func(t *testing.T) {
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			conns, err := sink.Probe(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(conns) != 1 || !strings.Contains(conns[0].TLS, "TLS 1.3") || !strings.Contains(conns[0].TLS, "host name verified") ||
				conns[0].Mechanism != cfg.SASL.Mechanism {
				t.Fatalf("probe: %+v", conns)
			}
			// Metadata through the same settings (no such topic: the
			// answer, not a connection error).
			if _, err := sink.Partitions(ctx, cfg, "no-such-topic-"+runID); !errors.Is(err, kafka.UnknownTopicOrPartition) {
				t.Fatalf("partitions: %v", err)
			}
		})
	}
}

// TestSecureKafkaBadInput: each bad setting is a *sink.SecurityError
// naming the setting, fatal for the pipeline, at the first connection.
func TestSecureKafkaBadInput(t *testing.T) {
	s := secured(t)
	ctx := context.Background()
	wrongPW := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrongPW, []byte("not-the-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		edit    func(*sink.Config)
		setting string // SecurityError.Setting
		fix     string // in the message
	}{
		{"wrong CA", func(c *sink.Config) { c.TLS.CAFile = s.cert(testcerts.OtherCA) }, "kafka.tls", "not signed by a CA in kafka.tls.ca-file"},
		{"expired certificate", func(c *sink.Config) { c.Brokers = []string{s.kafkaExpired}; c.SASL = sink.SASL{} }, "kafka.tls", "has expired"},
		{"host name mismatch", func(c *sink.Config) { c.TLS.ServerName = "kafka.example.com" }, "kafka.tls", "set kafka.tls.server-name"},
		{"wrong SASL password", func(c *sink.Config) { c.SASL.PasswordFile = wrongPW }, "kafka.sasl", "check kafka.sasl.username and kafka.sasl.password"},
		{"mechanism not enabled", func(c *sink.Config) {
			c.SASL = sink.SASL{Mechanism: sink.MechanismAWSMSKIAM, AWSRegion: "eu-west-1", AWSAccessKeyID: "AKIAEXAMPLE", AWSSecretAccessKeyFile: wrongPW}
		}, "kafka.sasl.mechanism", "AWS_MSK_IAM is not enabled on this listener"},
		{"wrong PLAIN password", func(c *sink.Config) { c.SASL.Mechanism, c.SASL.PasswordFile = sink.MechanismPlain, wrongPW }, "kafka.sasl", "check kafka.sasl.username and kafka.sasl.password"},
		{"TLS against a plaintext listener", func(c *sink.Config) { c.Brokers = []string{s.kafkaPlain}; c.SASL = sink.SASL{} }, "kafka.tls.enabled", "plaintext"},
		{"plaintext against a TLS listener", func(c *sink.Config) { c.TLS = secure.TLS{}; c.SASL = sink.SASL{} }, "kafka.tls.enabled", "set kafka.tls.enabled: true"},
		{"no login on a SASL_SSL listener", func(c *sink.Config) { c.SASL = sink.SASL{} }, "kafka.sasl.mechanism", "needs a login"},
		{"client certificate rejected", func(c *sink.Config) {
			c.Brokers = []string{s.kafkaMTLS}
			c.SASL = sink.SASL{}
			c.TLS.CertFile, c.TLS.KeyFile = s.cert(testcerts.OtherClient), s.cert(testcerts.OtherKey)
		}, "kafka.tls", "client certificate"},
		{"no client certificate", func(c *sink.Config) { c.Brokers = []string{s.kafkaMTLS}; c.SASL = sink.SASL{} }, "kafka.tls", "client certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := s.kafkaSCRAM(sink.MechanismSCRAM512)
			tc.edit(&cfg)
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := sink.Probe(pctx, cfg)
			var se *sink.SecurityError
			if !errors.As(err, &se) || se.Setting != tc.setting || !strings.Contains(err.Error(), tc.fix) {
				t.Fatalf("got %v (%T), want a SecurityError on %s saying %q", err, err, tc.setting, tc.fix)
			}
			if !sink.IsFatal(err) {
				t.Fatalf("not fatal: %v", err)
			}
			// Metadata (the publisher's first request at start) says the same.
			_, err = sink.Partitions(pctx, cfg, "any")
			if !errors.As(err, &se) || se.Setting != tc.setting {
				t.Fatalf("partitions: %v", err)
			}
			if pw := s.secret(t, "kafka"); strings.Contains(err.Error(), pw) {
				t.Fatal("the password is in the error")
			}
		})
	}
}

// mysqlTLS is a working verify-identity configuration of the secured MariaDB.
func (s *secureStack) mysqlTLS(t *testing.T) binlog.Config {
	cfg := binlog.DefaultConfig()
	cfg.Addr, cfg.User, cfg.PasswordFile, cfg.Schema = s.mysql, "root", s.secretFile("mysql-root"), mysqlDB
	cfg.Start = "latest"
	cfg.SSLMode, cfg.SSLCA = binlog.SSLVerifyIdentity, s.cert(testcerts.CA)
	return cfg
}

// TestSecureMySQLModes: each ssl-mode against the server that requires TLS
// (and, for preferred, the plain stack's server that offers none).
func TestSecureMySQLModes(t *testing.T) {
	s := secured(t)
	ctx := context.Background()
	for _, tc := range []struct {
		mode, want string
		edit       func(*binlog.Config)
	}{
		{binlog.SSLVerifyIdentity, "host name verified", nil},
		{binlog.SSLVerifyCA, "verified against the CA", func(c *binlog.Config) { c.SSLServerName = "not-checked.example" }},
		{binlog.SSLRequired, "not verified", func(c *binlog.Config) { c.SSLCA = "" }},
		{binlog.SSLPreferred, "not verified", func(c *binlog.Config) { c.SSLCA = "" }},
		{binlog.SSLVerifyIdentity + " with a client certificate", "host name verified", func(c *binlog.Config) {
			c.SSLCert, c.SSLKey = s.cert(testcerts.Client), s.cert(testcerts.ClientKey)
		}},
		{binlog.SSLPreferred + " to a server without TLS", "", func(c *binlog.Config) {
			c.SSLMode, c.SSLCA, c.Addr, c.PasswordFile, c.Password = binlog.SSLPreferred, "", mysqlAddr, "", mysqlPass
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg := s.mysqlTLS(t)
			cfg.SSLMode, _, _ = strings.Cut(tc.mode, " ")
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			conn, err := binlog.Dial(ctx, cfg, cfg.Schema)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if got := binlog.TLSState(conn, cfg); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("TLS state %q, want %q", got, tc.want)
			}
			srv, err := binlog.Connect(ctx, cfg, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			srv.Close()
		})
	}
}

// TestSecureMySQLBadInput: each bad TLS or login setting is fatal at the
// first connection, wrapping binlog.ErrTLS (or ErrAuth) with the fix.
func TestSecureMySQLBadInput(t *testing.T) {
	s := secured(t)
	wrongPW := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrongPW, []byte("not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*binlog.Config)
		is   error
		fix  string
	}{
		{"wrong CA", func(c *binlog.Config) { c.SSLCA = s.cert(testcerts.OtherCA) }, binlog.ErrTLS, "not signed by a CA in source.ssl-ca"},
		{"host name mismatch", func(c *binlog.Config) { c.SSLServerName = "db.example.com" }, binlog.ErrTLS, "set source.ssl-server-name"},
		// MariaDB refuses it as a login (1045), MySQL with 3159.
		{"plaintext against require_secure_transport", func(c *binlog.Config) { c.SSLMode, c.SSLCA = binlog.SSLDisabled, "" }, nil, "set source.ssl-mode: verify-identity"},
		{"TLS against a server without TLS", func(c *binlog.Config) { c.Addr, c.PasswordFile, c.Password = mysqlAddr, "", mysqlPass }, binlog.ErrTLS, "the server does not offer TLS"},
		{"client certificate rejected", func(c *binlog.Config) {
			c.SSLCert, c.SSLKey = s.cert(testcerts.OtherClient), s.cert(testcerts.OtherKey)
		}, binlog.ErrTLS, "client certificate"},
		{"wrong password", func(c *binlog.Config) { c.PasswordFile = wrongPW }, binlog.ErrAuth, "source.password-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := s.mysqlTLS(t)
			tc.edit(&cfg)
			_, err := binlog.Connect(context.Background(), cfg, zap.NewNop())
			if tc.is == nil && (errors.Is(err, binlog.ErrTLS) || errors.Is(err, binlog.ErrAuth)) {
				tc.is = err
			}
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.fix) || !binlog.IsFatal(err) {
				t.Fatalf("got %v, want %v saying %q (fatal)", err, tc.is, tc.fix)
			}
			if strings.Contains(err.Error(), s.secret(t, "mysql-root")) {
				t.Fatal("the password is in the error")
			}
		})
	}
}

// redisTLS is a working checkpoint configuration of the secured Redis:
// TLS verified with the host name, the ACL user, the password from a file.
func (s *secureStack) redisTLS(key string) checkpoint.Config {
	cfg := checkpoint.DefaultConfig()
	cfg.Addr, cfg.Username, cfg.PasswordFile, cfg.Key = s.redis, s.redisUser, s.secretFile("redis"), key
	cfg.TLS = secure.TLS{Enabled: true, CAFile: s.cert(testcerts.CA)}
	return cfg
}

// TestSecureRedis: the checkpoint store over TLS with an ACL user, and
// each bad setting fatal with its fix.
func TestSecureRedis(t *testing.T) {
	s := secured(t)
	ctx := context.Background()
	key := "cdc-outbox:it:secure-redis:" + runID
	cfg := s.redisTLS(key)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st := checkpoint.NewStore(cfg)
	defer st.Close()
	if err := st.Save(ctx, checkpoint.Checkpoint{File: "mariadb-bin.000001", Pos: 4, Flavor: "mariadb"}, checkpoint.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if cp, err := st.Load(ctx); err != nil || cp == nil || cp.Pos != 4 {
		t.Fatalf("load: %+v, %v", cp, err)
	}
	if state, err := st.TLSState(ctx); err != nil || !strings.Contains(state, "host name verified") {
		t.Fatalf("TLS state %q, %v", state, err)
	}
	wrongPW := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrongPW, []byte("not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*checkpoint.Config)
		is   error
		fix  string
	}{
		{"wrong password", func(c *checkpoint.Config) { c.PasswordFile = wrongPW }, checkpoint.ErrAuth, "checkpoint.password-file"},
		{"no login", func(c *checkpoint.Config) { c.Username, c.PasswordFile = "", "" }, checkpoint.ErrAuth, "checkpoint.username"},
		{"wrong CA", func(c *checkpoint.Config) { c.TLS.CAFile = s.cert(testcerts.OtherCA) }, checkpoint.ErrTLS, "checkpoint.tls.ca-file"},
		{"host name mismatch", func(c *checkpoint.Config) { c.TLS.ServerName = "redis.example.com" }, checkpoint.ErrTLS, "checkpoint.tls.server-name"},
		{"plaintext against the TLS port", func(c *checkpoint.Config) { c.TLS = secure.TLS{} }, checkpoint.ErrTLS, "set checkpoint.tls.enabled: true"},
		{"TLS against a plaintext port", func(c *checkpoint.Config) { c.Addr, c.Username, c.PasswordFile = redisAddr, "", "" }, checkpoint.ErrTLS, "this is a plaintext port"},
		{"client certificate rejected", func(c *checkpoint.Config) {
			c.TLS.CertFile, c.TLS.KeyFile = s.cert(testcerts.OtherClient), s.cert(testcerts.OtherKey)
		}, checkpoint.ErrTLS, "client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.redisTLS(key)
			tc.edit(&c)
			st := checkpoint.NewStore(c)
			defer st.Close()
			_, err := st.Load(ctx)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.fix) || !pipeline.IsFatal(err) {
				t.Fatalf("got %v, want %v saying %q (fatal)", err, tc.is, tc.fix)
			}
			if strings.Contains(err.Error(), s.secret(t, "redis")) {
				t.Fatal("the password is in the error")
			}
		})
	}
}

// TestSecurePublishEndToEnd runs the publisher with SASL_SSL (SCRAM-SHA-512)
// to Kafka, verify-identity TLS to MariaDB (require_secure_transport=ON)
// and TLS with an ACL user to Redis, every secret from a file, and checks
// that each committed row arrives once and the checkpoint is written.
func TestSecurePublishEndToEnd(t *testing.T) {
	s := secured(t)
	// PLAIN over TLS: the same listener, the user from its JAAS configuration.
	for _, mech := range []string{sink.MechanismSCRAM512, sink.MechanismPlain} {
		t.Run(mech, func(t *testing.T) { securePublish(t, s, mech) })
	}
}

func securePublish(t *testing.T, s *secureStack, mech string) {
	ctx := context.Background()
	name := "sec_e2e_" + strings.ToLower(strings.ReplaceAll(mech, "-", "")) + "_" + runID
	src := s.mysqlTLS(t)
	conn, err := binlog.Dial(ctx, src, src.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ddl, err := os.ReadFile("../../schema/mariadb.sql")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(ddl), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	for _, stmt := range strings.Split(strings.Join(lines, "\n"), ";") {
		if strings.Contains(stmt, "CREATE TABLE") && strings.Contains(stmt, "im_event_outbox") {
			if _, err := conn.Execute(strings.ReplaceAll(stmt, "im_event_outbox", "ob_"+name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	topic := "it." + name
	kcfg := s.kafkaSCRAM(mech)
	admin, err := kafka.Dial("tcp", s.kafkaPlain)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	key := "cdc-outbox:it:" + name
	yaml := fmt.Sprintf(`source:
  addr: %s
  user: root
  password-file: %s
  ssl-mode: verify-identity
  ssl-ca: %s
  server-id: %d
  schema: %s
  table: ob_%s
  start: latest
  heartbeat-period: 1s
  read-timeout: 5s
router:
  topic: %s
kafka:
  brokers: [%s]
  tls:
    enabled: true
    ca-file: %s
  sasl:
    mechanism: %s
    username: %s
    password-file: %s
checkpoint:
  addr: %s
  username: %s
  password-file: %s
  key: %q
  interval: 200ms
  tls:
    enabled: true
    ca-file: %s
log:
  format: json
shutdown-timeout: 10s
retry-backoff-max: 2s
`, s.mysql, s.secretFile("mysql-root"), s.cert(testcerts.CA), serverIDs.Add(32)-31, mysqlDB, name, topic, // 32: the publisher's ha.server-ids beside it
		s.kafkaSASL, s.cert(testcerts.CA), mech, s.kafkaUser, s.secretFile("kafka"),
		s.redis, s.redisUser, s.secretFile("redis"), key, s.cert(testcerts.CA))
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "check", "--config", cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	for _, want := range []string{"SASL " + mech, "TLS 1.3", "host name verified"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("check does not report %q:\n%s", want, out)
		}
	}
	logPath := filepath.Join(dir, "publisher.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); f.Close() }()
	defer func() { _ = cmd.Process.Kill(); <-done }()
	for deadline := time.Now().Add(60 * time.Second); !logHas(logPath, "streaming binlog"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("publisher did not stream:\n%s", tail(string(b), 30))
		}
	}
	const n = 50
	for i := range n {
		if _, err := conn.Execute(fmt.Sprintf("INSERT INTO ob_%s (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('message.created', %d, %d, %d, 1, 2, '{\"i\":%d}')", name, i%7, i, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	cons := verify.NewConsumer(kcfg, topic)
	var got []verify.Record
	for deadline := time.Now().Add(60 * time.Second); len(got) < n && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, recs...)
	}
	if len(got) != n {
		t.Fatalf("%d records on %s, want %d", len(got), topic, n)
	}
	st := checkpoint.NewStore(s.redisTLS(key))
	defer st.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if cp, err := st.Load(ctx); err == nil && cp != nil && cp.File != "" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no checkpoint: %+v, %v", cp, err)
		}
	}
	b, _ := os.ReadFile(logPath)
	for _, secret := range []string{s.secret(t, "kafka"), s.secret(t, "redis"), s.secret(t, "mysql-root")} {
		if strings.Contains(string(b), secret) || strings.Contains(string(out), secret) {
			t.Fatal("a password is in the log or check's output")
		}
	}
}

// TestSecureConsumer reads with package consumer over the SASL_SSL
// listener (TLS verified against the CA, SCRAM-SHA-512 with the password
// from a file): the records written over the plaintext listener are all
// handled, in order; a wrong password, a wrong CA and no login end Run with
// a *sink.SecurityError naming the setting instead of retrying for ever.
func TestSecureConsumer(t *testing.T) {
	s := secured(t)
	ctx := context.Background()
	topic := "it.sec_consumer_" + runID
	admin, err := kafka.Dial("tcp", s.kafkaPlain)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	w := &kafka.Writer{Addr: kafka.TCP(s.kafkaPlain), Topic: topic, RequiredAcks: kafka.RequireAll, AllowAutoTopicCreation: false}
	const n = 50
	var msgs []kafka.Message
	for seq := 1; seq <= n; seq++ {
		msgs = append(msgs, kafka.Message{Key: []byte("42"), Value: []byte(fmt.Sprintf(`{"seq":%d}`, seq)), Headers: []kafka.Header{
			{Key: consumer.HeaderEventID, Value: []byte(fmt.Sprint(1000 + seq))},
			{Key: consumer.HeaderEventType, Value: []byte("message.created")},
			{Key: consumer.HeaderSeqNo, Value: []byte(fmt.Sprint(seq))},
		}})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	good := consumer.Config{Brokers: []string{s.kafkaSASL}, Topics: []string{topic}, Group: "it-sec-" + runID, MaxWait: 100 * time.Millisecond,
		TLS:  consumer.TLS{Enabled: true, CAFile: s.cert(testcerts.CA)},
		SASL: consumer.SASL{Mechanism: sink.MechanismSCRAM512, Username: s.kafkaUser, PasswordFile: s.secretFile("kafka")}}
	var mu sync.Mutex
	var seqs []int64
	c, err := consumer.New(good, consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		mu.Lock()
		defer mu.Unlock()
		seqs = append(seqs, r.SeqNo)
		return nil
	}), consumer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	var g errgroup.Group
	g.Go(func() error { return c.Run(rctx) })
	for rctx.Err() == nil {
		mu.Lock()
		got := len(seqs)
		mu.Unlock()
		if got >= n {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != n {
		t.Fatalf("handled %d of %d records over SASL_SSL", len(seqs), n)
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("record %d has seq_no %d", i, seq)
		}
	}

	wrongPW := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrongPW, []byte("not-the-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, setting string
		edit          func(*consumer.Config)
	}{
		{"wrong password", "kafka.sasl", func(c *consumer.Config) { c.SASL.PasswordFile = wrongPW }},
		{"wrong CA", "kafka.tls", func(c *consumer.Config) { c.TLS.CAFile = s.cert(testcerts.OtherCA) }},
		{"no login on a SASL_SSL listener", "kafka.sasl.mechanism", func(c *consumer.Config) { c.SASL = consumer.SASL{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			cfg.Group += "-" + strings.ReplaceAll(tc.name, " ", "-")
			tc.edit(&cfg)
			c, err := consumer.New(cfg, consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil }), consumer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			err = c.Run(rctx)
			var se *sink.SecurityError
			if !errors.As(err, &se) || se.Setting != tc.setting || rctx.Err() != nil {
				t.Fatalf("Run: %v, want a *sink.SecurityError on %s before the 60 s", err, tc.setting)
			}
			if pw := s.secret(t, "kafka"); strings.Contains(err.Error(), pw) {
				t.Fatal("the password is in the error")
			}
		})
	}
}

// run, not only check, stops at start on a Redis TLS or login mismatch,
// naming the setting (issue 30 item 4): the lease acquisitions of a
// standby (ha, the default) used to retry them for ever, silently, with
// /readyz 200 standby.
func TestSecureRunRedisMismatch(t *testing.T) {
	s := secured(t)
	for _, tc := range []struct {
		name, checkpoint, fix string
	}{
		{"plain to TLS", fmt.Sprintf("addr: %s\n  username: %s\n  password-file: %s", s.redis, s.redisUser, s.secretFile("redis")), "set checkpoint.tls.enabled: true"},
		{"wrong CA", fmt.Sprintf("addr: %s\n  username: %s\n  password-file: %s\n  tls: {enabled: true, ca-file: %s}", s.redis, s.redisUser, s.secretFile("redis"), s.cert(testcerts.OtherCA)), "checkpoint.tls.ca-file"},
		{"TLS to plain", fmt.Sprintf("addr: %s\n  tls: {enabled: true, ca-file: %s}", redisAddr, s.cert(testcerts.CA)), "this is a plaintext port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.noMirror = true
			e.redisYAML = tc.checkpoint
			began := time.Now()
			out, code := e.cli(nil, "run")
			if code != 1 || !strings.Contains(out, tc.fix) {
				t.Fatalf("run: exit %d after %s, want 1 naming %q:\n%s", code, time.Since(began), tc.fix, tail(out, 10))
			}
			if strings.Contains(out, s.secret(t, "redis")) {
				t.Fatal("the password is in the log")
			}
			t.Logf("exit 1 after %s", time.Since(began).Round(time.Millisecond))
		})
	}
}
