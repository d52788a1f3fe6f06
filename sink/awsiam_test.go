package sink

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/cdc-outbox/cdc-outbox/internal/testcerts"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	apiversionsAPI "github.com/segmentio/kafka-go/protocol/apiversions"
	saslauthenticateAPI "github.com/segmentio/kafka-go/protocol/saslauthenticate"
	saslhandshakeAPI "github.com/segmentio/kafka-go/protocol/saslhandshake"
	"github.com/segmentio/kafka-go/sasl"
	"golang.org/x/sync/errgroup"
)

// mskVerify checks an AWS_MSK_IAM payload as MSK does, written from the
// SigV4 specification (AWS General Reference, "Create a signed AWS API
// request" and "Authenticating requests: using query parameters") and
// aws-msk-iam-auth's payload format, independently of the SDK's signer:
// the presigned GET kafka://host/?Action=kafka-cluster:Connect&X-Amz-*
// with the SHA-256 of an empty payload, signed with secret for region's
// kafka-cluster service. It returns the payload's fields.
func mskVerify(payload []byte, host, accessKey, secret, region string, now time.Time) (map[string]string, error) {
	var f map[string]string
	if err := json.Unmarshal(payload, &f); err != nil {
		return nil, fmt.Errorf("payload is not a JSON object of strings: %w", err)
	}
	for k, want := range map[string]string{"version": "2020_10_22", "action": "kafka-cluster:Connect", "host": host,
		"x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-signedheaders": "host", "x-amz-expires": "300"} {
		if f[k] != want {
			return f, fmt.Errorf("%s = %q, want %q", k, f[k], want)
		}
	}
	date, err := time.Parse("20060102T150405Z", f["x-amz-date"])
	if err != nil {
		return f, fmt.Errorf("x-amz-date %q: %w", f["x-amz-date"], err)
	}
	if d := now.Sub(date); d < -time.Minute || d > time.Minute {
		return f, fmt.Errorf("x-amz-date %s is %s from now", date, d)
	}
	scope := date.Format("20060102") + "/" + region + "/kafka-cluster/aws4_request"
	if f["x-amz-credential"] != accessKey+"/"+scope {
		return f, fmt.Errorf("x-amz-credential %q, want %q", f["x-amz-credential"], accessKey+"/"+scope)
	}
	q := map[string]string{"Action": f["action"], "X-Amz-Algorithm": f["x-amz-algorithm"], "X-Amz-Credential": f["x-amz-credential"],
		"X-Amz-Date": f["x-amz-date"], "X-Amz-Expires": f["x-amz-expires"], "X-Amz-SignedHeaders": f["x-amz-signedheaders"]}
	if tok, ok := f["x-amz-security-token"]; ok {
		q["X-Amz-Security-Token"] = tok
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var query []string
	for _, k := range keys {
		query = append(query, uriEncode(k)+"="+uriEncode(q[k]))
	}
	empty := sha256.Sum256(nil)
	canonical := strings.Join([]string{"GET", "/", strings.Join(query, "&"), "host:" + host + "\n", "host", hex.EncodeToString(empty[:])}, "\n")
	ch := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + f["x-amz-date"] + "\n" + scope + "\n" + hex.EncodeToString(ch[:])
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	k := mac([]byte("AWS4"+secret), date.Format("20060102"))
	for _, s := range []string{region, "kafka-cluster", "aws4_request"} {
		k = mac(k, s)
	}
	if want := hex.EncodeToString(mac(k, toSign)); f["x-amz-signature"] != want {
		return f, fmt.Errorf("x-amz-signature %q does not verify (want %q)", f["x-amz-signature"], want)
	}
	return f, nil
}

// uriEncode is SigV4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~
// as %XX (upper case).
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func randomKey(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("+", "A", "/", "B", "=", "").Replace(base64.StdEncoding.EncodeToString(b))
}

func writeSecret(t *testing.T, dir, name, v string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func withBroker(host string, port int) context.Context {
	return sasl.WithMetadata(context.Background(), &sasl.Metadata{Host: host, Port: port})
}

// TestMSKIAMKnownAnswer: kafka-go's aws_msk_iam_v2 test vector (access
// key ACCESS_KEY, secret SECRET_KEY, us-east-1, host localhost, signed at
// 2021-10-14T13:05:00Z) through our mechanism with the keys from files,
// and the independent verifier agrees with it.
func TestMSKIAMKnownAnswer(t *testing.T) {
	dir := t.TempDir()
	s := SASL{Mechanism: MechanismAWSMSKIAM, AWSRegion: "us-east-1",
		AWSAccessKeyIDFile: writeSecret(t, dir, "id", "ACCESS_KEY"), AWSSecretAccessKeyFile: writeSecret(t, dir, "key", "SECRET_KEY")}
	at := time.Date(2021, 10, 14, 13, 5, 0, 0, time.UTC)
	m := newMSKIAM(s)
	m.now = func() time.Time { return at }
	sess, payload, err := m.Start(withBroker("localhost", 9098))
	if err != nil {
		t.Fatal(err)
	}
	f, err := mskVerify(payload, "localhost", "ACCESS_KEY", "SECRET_KEY", "us-east-1", at)
	if err != nil {
		t.Fatalf("%v\n%s", err, payload)
	}
	if got, want := f["x-amz-signature"], "6b8d25f9b45b9c7db9da855a49112d80379224153a27fd279c305a5b7940d1a7"; got != want {
		t.Fatalf("signature %s, want kafka-go's %s", got, want)
	}
	if _, ok := f["x-amz-security-token"]; ok {
		t.Fatal("a security token without one configured")
	}
	if done, next, err := sess.Next(context.Background(), nil); !done || next != nil || err != nil {
		t.Fatalf("Next after the broker's answer: %v %q %v", done, next, err)
	}
}

// TestMSKIAMSignature: random keys with a session token, several brokers
// and regions, verified by mskVerify; a wrong secret, another host or
// region does not verify; a rotated secret file is used at the next
// connection.
func TestMSKIAMSignature(t *testing.T) {
	dir := t.TempDir()
	id, key, tok := "AKIA"+strings.ToUpper(randomKey(t, 12))[:16], randomKey(t, 30), randomKey(t, 200)+"+/="
	s := SASL{Mechanism: MechanismAWSMSKIAM, AWSAccessKeyID: id,
		AWSSecretAccessKeyFile: writeSecret(t, dir, "key", key), AWSSessionTokenFile: writeSecret(t, dir, "tok", tok)}
	for _, tc := range []struct{ host, region string }{
		{"b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com", "eu-west-1"},
		{"b-3.demo.abc123.c2.kafka-serverless.us-gov-west-1.amazonaws.com", "us-gov-west-1"},
		{"127.0.0.1", "ap-southeast-3"},
	} {
		s.AWSRegion = tc.region
		_, payload, err := newMSKIAM(s).Start(withBroker(tc.host, 9098))
		if err != nil {
			t.Fatal(err)
		}
		f, err := mskVerify(payload, tc.host, id, key, tc.region, time.Now())
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.host, err, payload)
		}
		if f["x-amz-security-token"] != tok {
			t.Fatalf("security token %q, want the file's", f["x-amz-security-token"])
		}
		if _, err := mskVerify(payload, tc.host, id, key+"x", tc.region, time.Now()); err == nil {
			t.Fatal("verifies with a wrong secret")
		}
		if _, err := mskVerify(payload, "b-2."+tc.host, id, key, tc.region, time.Now()); err == nil {
			t.Fatal("verifies for another host")
		}
		if _, err := mskVerify(payload, tc.host, id, key, "eu-north-1", time.Now()); err == nil {
			t.Fatal("verifies for another region")
		}
	}
	m := newMSKIAM(s)
	key2 := randomKey(t, 30)
	writeSecret(t, dir, "key", key2)
	_, payload, err := m.Start(withBroker("127.0.0.1", 9098))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mskVerify(payload, "127.0.0.1", id, key2, s.AWSRegion, time.Now()); err != nil {
		t.Fatalf("not signed with the rotated secret: %v", err)
	}
	if _, _, err := newMSKIAM(s).Start(context.Background()); err == nil {
		t.Fatal("signed without the broker's host")
	}
}

// isolateAWS points the default credential chain at nothing: no
// environment keys, empty shared files, no instance metadata service.
func isolateAWS(t *testing.T) string {
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return dir
}

// TestMSKIAMDefaultChain: without static keys the default AWS chain
// signs: keys from the environment, then a profile of the shared
// credentials file (aws-profile); with none a *SecurityError naming the
// settings.
func TestMSKIAMDefaultChain(t *testing.T) {
	dir := isolateAWS(t)
	s := SASL{Mechanism: MechanismAWSMSKIAM, AWSRegion: "eu-central-1"}

	_, _, err := newMSKIAM(s).Start(withBroker("localhost", 9098))
	var se *SecurityError
	if !errors.As(err, &se) || se.Setting != "kafka.sasl (AWS_MSK_IAM credentials)" || !strings.Contains(err.Error(), "kafka.sasl.aws-access-key-id") || !IsFatal(err) {
		t.Fatalf("no credentials: %v", err)
	}

	id, key := "AKIAENVIRONMENT00001", randomKey(t, 30)
	t.Setenv("AWS_ACCESS_KEY_ID", id)
	t.Setenv("AWS_SECRET_ACCESS_KEY", key)
	_, payload, err := newMSKIAM(s).Start(withBroker("localhost", 9098))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mskVerify(payload, "localhost", id, key, "eu-central-1", time.Now()); err != nil {
		t.Fatalf("environment keys: %v", err)
	}

	os.Unsetenv("AWS_ACCESS_KEY_ID")
	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	pid, pkey := "AKIAPROFILE000000001", randomKey(t, 30)
	creds := fmt.Sprintf("[default]\naws_access_key_id = AKIADEFAULT000000001\naws_secret_access_key = x\n[ci]\naws_access_key_id = %s\naws_secret_access_key = %s\n", pid, pkey)
	writeSecret(t, dir, "credentials", creds)
	s.AWSProfile = "ci"
	_, payload, err = newMSKIAM(s).Start(withBroker("localhost", 9098))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mskVerify(payload, "localhost", pid, pkey, "eu-central-1", time.Now()); err != nil {
		t.Fatalf("profile ci: %v", err)
	}
}

// fakeMSK is a TLS listener that answers like an MSK broker's IAM
// listener: ApiVersions, SaslHandshake (AWS_MSK_IAM only) and one
// SaslAuthenticate whose payload must verify for host, accessKey, secret
// and region. It serves connections one at a time until stop, which
// returns the first protocol error it saw.
func fakeMSK(t *testing.T, dir, accessKey, secret, region string) (addr string, stop func() error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, testcerts.Server), filepath.Join(dir, testcerts.ServerKey))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	var g errgroup.Group
	serve := func(c net.Conn) error {
		defer c.Close()
		for {
			v, corr, _, msg, err := protocol.ReadRequest(c)
			if err != nil {
				return nil // the client is done
			}
			var res protocol.Message
			switch req := msg.(type) {
			case *apiversionsAPI.Request:
				res = &apiversionsAPI.Response{ApiKeys: []apiversionsAPI.ApiKeyResponse{
					{ApiKey: int16(protocol.SaslHandshake), MaxVersion: 1}, {ApiKey: int16(protocol.SaslAuthenticate), MaxVersion: 2}}}
			case *saslhandshakeAPI.Request:
				r := &saslhandshakeAPI.Response{Mechanisms: []string{MechanismAWSMSKIAM}}
				if req.Mechanism != MechanismAWSMSKIAM {
					r.ErrorCode = int16(kafka.UnsupportedSASLMechanism)
				}
				res = r
			case *saslauthenticateAPI.Request:
				r := &saslauthenticateAPI.Response{AuthBytes: []byte(`{"version":"2020_10_22","request-id":"test"}`)}
				if _, err := mskVerify(req.AuthBytes, "localhost", accessKey, secret, region, time.Now()); err != nil {
					r = &saslauthenticateAPI.Response{ErrorCode: int16(kafka.SASLAuthenticationFailed), ErrorMessage: "[test] Access denied"}
				}
				res = r
			default:
				return fmt.Errorf("fake MSK: unexpected request %T", msg)
			}
			if err := protocol.WriteResponse(c, v, corr, res); err != nil {
				return nil
			}
		}
	}
	g.Go(func() error {
		for {
			c, err := ln.Accept()
			if err != nil {
				return nil
			}
			if err := serve(c); err != nil {
				return err
			}
		}
	})
	stop = func() error { ln.Close(); return g.Wait() }
	t.Cleanup(func() { _ = stop() })
	return fmt.Sprintf("localhost:%d", ln.Addr().(*net.TCPAddr).Port), stop
}

// TestMSKIAMLogin: the producer's connection (TLS, ApiVersions, SASL)
// logs in to a fake MSK broker that checks the signature for the host it
// was dialled by; wrong keys are a *SecurityError with MSK's fix.
func TestMSKIAMLogin(t *testing.T) {
	dir := t.TempDir()
	if err := testcerts.Generate(dir); err != nil {
		t.Fatal(err)
	}
	id, key := "AKIAFAKEMSK000000001", randomKey(t, 30)
	addr, stop := fakeMSK(t, dir, id, key, "eu-west-1")
	cfg := DefaultConfig()
	cfg.Brokers = []string{addr}
	cfg.TLS = secure.TLS{Enabled: true, CAFile: filepath.Join(dir, testcerts.CA)}
	cfg.SASL = SASL{Mechanism: MechanismAWSMSKIAM, AWSRegion: "eu-west-1", AWSAccessKeyID: id,
		AWSSecretAccessKeyFile: writeSecret(t, dir, "key", key)}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bc, err := dialBroker(ctx, addr, 10*time.Second, NewSecurity(cfg))
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	bc.close()

	writeSecret(t, dir, "key", randomKey(t, 30))
	_, err = dialBroker(ctx, addr, 10*time.Second, NewSecurity(cfg))
	var se *SecurityError
	if !errors.As(err, &se) || se.Setting != "kafka.sasl" || !strings.Contains(err.Error(), "kafka-cluster:Connect") || !IsFatal(err) {
		t.Fatalf("wrong key: %v", err)
	}
	if strings.Contains(err.Error(), key) {
		t.Fatal("the secret is in the error")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMSKIAMValidate: the AWS_MSK_IAM settings each name their fix.
func TestMSKIAMValidate(t *testing.T) {
	dir := t.TempDir()
	keyFile := writeSecret(t, dir, "key", "secret")
	ok := func() Config {
		c := DefaultConfig()
		c.TLS = secure.TLS{Enabled: true}
		c.SASL = SASL{Mechanism: MechanismAWSMSKIAM, AWSRegion: "eu-west-1"}
		return c
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" valid
	}{
		{"default chain", func(*Config) {}, ""},
		{"profile", func(c *Config) { c.SASL.AWSProfile = "prod" }, ""},
		{"static keys from files", func(c *Config) {
			c.SASL.AWSAccessKeyIDFile, c.SASL.AWSSecretAccessKeyFile, c.SASL.AWSSessionTokenFile = keyFile, keyFile, keyFile
		}, ""},
		{"no TLS", func(c *Config) { c.TLS = secure.TLS{} }, "kafka.sasl.mechanism: AWS_MSK_IAM needs kafka.tls.enabled: true"},
		{"no region", func(c *Config) { c.SASL.AWSRegion = "" }, "kafka.sasl.aws-region: required with mechanism AWS_MSK_IAM"},
		{"bad region", func(c *Config) { c.SASL.AWSRegion = "Ireland" }, `kafka.sasl.aws-region: "Ireland": want an AWS region name`},
		{"key id without secret", func(c *Config) { c.SASL.AWSAccessKeyID = "AKIA" }, "kafka.sasl.aws-secret-access-key: required with kafka.sasl.aws-access-key-id"},
		{"secret without key id", func(c *Config) { c.SASL.AWSSecretAccessKeyFile = keyFile }, "kafka.sasl.aws-access-key-id: required"},
		{"secret inline and file", func(c *Config) {
			c.SASL.AWSAccessKeyID, c.SASL.AWSSecretAccessKey, c.SASL.AWSSecretAccessKeyFile = "AKIA", "x", keyFile
		}, "kafka.sasl.aws-secret-access-key: set either"},
		{"missing secret file", func(c *Config) {
			c.SASL.AWSAccessKeyID, c.SASL.AWSSecretAccessKeyFile = "AKIA", filepath.Join(dir, "nope")
		}, "kafka.sasl.aws-secret-access-key-file"},
		{"keys and profile", func(c *Config) {
			c.SASL.AWSAccessKeyID, c.SASL.AWSSecretAccessKey, c.SASL.AWSProfile = "AKIA", "x", "prod"
		}, "kafka.sasl.aws-profile: set either static keys"},
		{"session token alone", func(c *Config) { c.SASL.AWSSessionToken = "t" }, "kafka.sasl.aws-session-token: a session token belongs to static keys"},
		{"password with IAM", func(c *Config) { c.SASL.Username, c.SASL.Password = "u", "p" }, "kafka.sasl.username: AWS_MSK_IAM signs with AWS credentials"},
		{"aws settings with SCRAM", func(c *Config) { c.SASL.Mechanism, c.SASL.Username, c.SASL.Password = MechanismSCRAM512, "u", "p" }, "kafka.sasl.aws-region: the kafka.sasl.aws-* settings are for mechanism AWS_MSK_IAM"},
		{"aws settings without mechanism", func(c *Config) { c.SASL.Mechanism = "" }, "kafka.sasl.mechanism: required when other kafka.sasl settings are set"},
		{"lower case", func(c *Config) { c.SASL.Mechanism = "aws_msk_iam" }, "AWS_MSK_IAM (upper case)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret\n") {
				t.Fatal("a secret's content is in the error")
			}
		})
	}
	red := ok()
	red.SASL.AWSAccessKeyID, red.SASL.AWSSecretAccessKey, red.SASL.AWSSessionToken = "AKIA", "very-secret", "session-secret"
	if r := fmt.Sprintf("%+v", red.Redacted()); strings.Contains(r, "very-secret") || strings.Contains(r, "session-secret") {
		t.Fatalf("Redacted shows a secret: %s", r)
	}
}

// credentialsUnavailable: timeouts and 429/5xx answers of the services
// the credential chain asks are retried; the rest (nothing found, access
// denied) is a *SecurityError.
func TestCredentialsUnavailable(t *testing.T) {
	resp := func(code int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("operation failed")}
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"lookup timeout", fmt.Errorf("ec2imds: GetMetadata: %w", context.DeadlineExceeded), true},
		{"network timeout", fmt.Errorf("sts: %w", &net.OpError{Op: "dial", Err: timeoutErr{}}), true},
		{"STS throttled", fmt.Errorf("sts: AssumeRoleWithWebIdentity: %w", resp(http.StatusTooManyRequests)), true},
		{"IMDS 503", fmt.Errorf("ec2imds: %w", resp(http.StatusServiceUnavailable)), true},
		{"access denied", fmt.Errorf("sts: %w", resp(http.StatusForbidden)), false},
		{"no provider found credentials", errors.New("failed to refresh cached credentials, no EC2 IMDS role found"), false},
	} {
		if got := credentialsUnavailable(c.err); got != c.want {
			t.Errorf("%s: %v: got %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
