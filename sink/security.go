package sink

// Security of the Kafka connections: TLS and SASL settings (Config.TLS,
// Config.SASL) and the one place the kafka-go Transport (producer,
// metadata) and Dialer (partition readers: verify, replay checks,
// checkpoint recovery, dead-letter re-drive) are built from them, so that
// every Kafka connection of every command is made the same way: the
// producer's and metadata connections (dialBroker, conn.go) and kafka-go's
// Dialer for the partition readers.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/rawconn"
	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	apiversionsAPI "github.com/segmentio/kafka-go/protocol/apiversions"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	saslauthenticateAPI "github.com/segmentio/kafka-go/protocol/saslauthenticate"
	saslhandshakeAPI "github.com/segmentio/kafka-go/protocol/saslhandshake"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// SASL mechanisms accepted in SASL.Mechanism (KIP-43 PLAIN, KIP-84
// SCRAM, KIP-255 OAUTHBEARER; AWS_MSK_IAM is MechanismAWSMSKIAM, awsiam.go).
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAM256    = "SCRAM-SHA-256"
	MechanismSCRAM512    = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// SASL is the kafka.sasl section.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or
	// AWS_MSK_IAM; empty: no SASL. Use it with kafka.tls (a SASL_SSL listener); PLAIN
	// without TLS sends the password in clear.
	Mechanism string `yaml:"mechanism" env:"MECHANISM" doc:"The SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM; empty: no SASL." rule:"PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM or empty; required when another sasl key is set; PLAIN and AWS_MSK_IAM need kafka.tls.enabled"`
	// Username and Password (or PasswordFile, read at each connection)
	// for PLAIN and SCRAM.
	Username     string `yaml:"username" env:"USERNAME" doc:"The user of PLAIN and SCRAM." rule:"required with PLAIN and SCRAM; not with AWS_MSK_IAM"`
	Password     string `yaml:"password" env:"PASSWORD" secret:"password-file" doc:"The password of PLAIN and SCRAM." rule:"required with PLAIN and SCRAM (or password-file); not with password-file"`
	PasswordFile string `yaml:"password-file" env:"PASSWORD_FILE" doc:"A file holding the password instead, read at each connection." rule:"a readable file; not with password"`
	// TokenFile (OAUTHBEARER) holds the bearer token (a JWT), re-read at
	// each connection so that a token refreshed by a sidecar is used.
	TokenFile string `yaml:"token-file" env:"TOKEN_FILE" doc:"OAUTHBEARER: a file holding the bearer token (a JWT), re-read at each connection." rule:"a readable file; OAUTHBEARER needs token-file or token-url, not both"`
	// TokenURL (OAUTHBEARER): an OAuth 2.0 token endpoint; the token comes
	// from the client credentials grant (RFC 6749 §4.4) with ClientID and
	// ClientSecret (or ClientSecretFile) and the optional Scope, and is
	// reused until a minute before it expires.
	TokenURL         string `yaml:"token-url" env:"TOKEN_URL" doc:"OAUTHBEARER: an OAuth 2.0 token endpoint; the token comes from the client credentials grant with client-id and client-secret." rule:"an http(s) URL; not with token-file"`
	ClientID         string `yaml:"client-id" env:"CLIENT_ID" doc:"OAUTHBEARER: the client id of the client credentials grant." rule:"required with token-url"`
	ClientSecret     string `yaml:"client-secret" env:"CLIENT_SECRET" secret:"client-secret-file" doc:"OAUTHBEARER: the client secret of the client credentials grant." rule:"required with token-url (or client-secret-file); not with client-secret-file"`
	ClientSecretFile string `yaml:"client-secret-file" env:"CLIENT_SECRET_FILE" doc:"A file holding the client secret instead, read when a token is fetched." rule:"a readable file; not with client-secret"`
	Scope            string `yaml:"scope" env:"SCOPE" doc:"OAUTHBEARER: the scope asked for with the client credentials grant." rule:"-"`
	// Extensions (OAUTHBEARER, KIP-342): key=value pairs sent with the
	// token, e.g. Confluent Cloud's logicalCluster and identityPoolId.
	Extensions map[string]string `yaml:"extensions" env:"EXTENSIONS" doc:"OAUTHBEARER: SASL extensions sent with the token (KIP-342), e.g. Confluent Cloud's logicalCluster." rule:"-"`
	// AWSRegion (AWS_MSK_IAM, required) is the MSK cluster's region, e.g.
	// eu-west-1: the signature's scope.
	AWSRegion string `yaml:"aws-region" env:"AWS_REGION" doc:"AWS_MSK_IAM: the MSK cluster's region, e.g. eu-west-1." rule:"required with AWS_MSK_IAM; an AWS region name; aws-* keys only with AWS_MSK_IAM"`
	// AWSProfile (AWS_MSK_IAM) selects a profile of the shared AWS config
	// and credentials files for the default credential chain.
	AWSProfile string `yaml:"aws-profile" env:"AWS_PROFILE" doc:"AWS_MSK_IAM: a profile of the shared AWS config and credentials files for the default credential chain." rule:"not with static keys"`
	// Static keys (AWS_MSK_IAM): an access key id and secret access key
	// (optionally a session token), inline or from files re-read at each
	// connection. Without them the default AWS credential chain is used
	// (environment, shared files, web identity / IRSA, EKS Pod Identity,
	// ECS, EC2 instance metadata).
	AWSAccessKeyID         string `yaml:"aws-access-key-id" env:"AWS_ACCESS_KEY_ID" secret:"aws-access-key-id-file" doc:"AWS_MSK_IAM: a static access key id; without static keys the default AWS credential chain is used." rule:"with aws-secret-access-key; not with aws-access-key-id-file"`
	AWSAccessKeyIDFile     string `yaml:"aws-access-key-id-file" env:"AWS_ACCESS_KEY_ID_FILE" doc:"A file holding the access key id instead, re-read at each connection." rule:"a readable file; not with aws-access-key-id"`
	AWSSecretAccessKey     string `yaml:"aws-secret-access-key" env:"AWS_SECRET_ACCESS_KEY" secret:"aws-secret-access-key-file" doc:"AWS_MSK_IAM: the static secret access key." rule:"with aws-access-key-id; not with aws-secret-access-key-file"`
	AWSSecretAccessKeyFile string `yaml:"aws-secret-access-key-file" env:"AWS_SECRET_ACCESS_KEY_FILE" doc:"A file holding the secret access key instead, re-read at each connection." rule:"a readable file; not with aws-secret-access-key"`
	AWSSessionToken        string `yaml:"aws-session-token" env:"AWS_SESSION_TOKEN" secret:"aws-session-token-file" doc:"AWS_MSK_IAM: the session token of temporary static keys." rule:"only with static keys; not with aws-session-token-file"`
	AWSSessionTokenFile    string `yaml:"aws-session-token-file" env:"AWS_SESSION_TOKEN_FILE" doc:"A file holding the session token instead, re-read at each connection." rule:"a readable file; not with aws-session-token"`
}

// ErrSecurity matches every *SecurityError.
var ErrSecurity = errors.New("sink: kafka security settings")

// SecurityError is a Kafka connection that failed for a reason a retry
// cannot fix: a TLS handshake that failed (CA, expiry, host name, a
// plaintext listener, a rejected client certificate), a TLS client
// against a plaintext listener or the other way round, a SASL login the
// broker refused, or a mechanism it does not enable. Setting names the
// configuration to change and Fix says how. IsFatal reports it.
type SecurityError struct {
	Broker  string
	Setting string
	Fix     string
	Err     error
}

func (e *SecurityError) Error() string {
	return fmt.Sprintf("sink: kafka broker %s: %v: %s: %s", e.Broker, e.Err, e.Setting, e.Fix)
}

func (e *SecurityError) Unwrap() error { return e.Err }

// Is makes a *SecurityError match ErrSecurity.
func (e *SecurityError) Is(target error) bool { return target == ErrSecurity }

var mechanisms = []string{MechanismPlain, MechanismSCRAM256, MechanismSCRAM512, MechanismOAuthBearer, MechanismAWSMSKIAM}

// validateSecurity checks the tls and sasl sections; bad is Validate's.
func (c *Config) validateSecurity(bad func(field, format string, a ...any), errs *[]error) {
	if err := c.TLS.Validate("kafka.tls"); err != nil {
		*errs = append(*errs, err)
	}
	s := c.SASL
	secret := func(field, v, file string) {
		if v != "" && file != "" {
			bad("sasl."+field, "set either %s or %s-file, not both", field, field)
		} else if file != "" {
			if _, _, err := secure.ReadSecret(file, "kafka.sasl."+field+"-file"); err != nil {
				*errs = append(*errs, err)
			}
		}
	}
	if s.Mechanism != MechanismAWSMSKIAM && s.Mechanism != "" && s.hasAWS() {
		bad("sasl.aws-region", "the kafka.sasl.aws-* settings are for mechanism AWS_MSK_IAM, not %s: remove them", s.Mechanism)
	}
	switch s.Mechanism {
	case "":
		if s.Username != "" || s.Password != "" || s.PasswordFile != "" || s.TokenFile != "" || s.TokenURL != "" || s.hasAWS() {
			bad("sasl.mechanism", "required when other kafka.sasl settings are set: one of %s", strings.Join(mechanisms, ", "))
		}
	case MechanismAWSMSKIAM:
		c.validateAWS(bad, secret)
	case MechanismPlain, MechanismSCRAM256, MechanismSCRAM512:
		if s.Username == "" {
			bad("sasl.username", "required with mechanism %s", s.Mechanism)
		}
		if s.Password == "" && s.PasswordFile == "" {
			bad("sasl.password", "required with mechanism %s (or kafka.sasl.password-file)", s.Mechanism)
		}
		secret("password", s.Password, s.PasswordFile)
		if s.Mechanism == MechanismPlain && !c.TLS.Enabled {
			bad("sasl.mechanism", "PLAIN sends the password in clear: enable kafka.tls (a SASL_SSL listener)")
		}
	case MechanismOAuthBearer:
		switch {
		case s.TokenFile != "" && s.TokenURL != "":
			bad("sasl.token-file", "set either token-file or token-url, not both")
		case s.TokenFile != "":
			secret("token", "", s.TokenFile)
		case s.TokenURL != "":
			if !strings.HasPrefix(s.TokenURL, "https://") && !strings.HasPrefix(s.TokenURL, "http://") {
				bad("sasl.token-url", "%q: want an http(s) URL of the OAuth token endpoint", s.TokenURL)
			}
			if s.ClientID == "" {
				bad("sasl.client-id", "required with token-url")
			}
			if s.ClientSecret == "" && s.ClientSecretFile == "" {
				bad("sasl.client-secret", "required with token-url (or kafka.sasl.client-secret-file)")
			}
			secret("client-secret", s.ClientSecret, s.ClientSecretFile)
		default:
			bad("sasl.token-file", "OAUTHBEARER needs kafka.sasl.token-file or kafka.sasl.token-url")
		}
	default:
		bad("sasl.mechanism", "%q: want one of %s (upper case), or empty for none", s.Mechanism, strings.Join(mechanisms, ", "))
	}
}

// mechanism returns the SASL mechanism of cfg, nil when none.
func (s SASL) mechanism() (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "":
		return nil, nil
	case MechanismPlain, MechanismSCRAM256, MechanismSCRAM512:
		return &passwordMechanism{s: s}, nil
	case MechanismOAuthBearer:
		return newOAuthBearer(s), nil
	case MechanismAWSMSKIAM:
		return newMSKIAM(s), nil
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: %q: unknown", s.Mechanism)
}

// passwordMechanism is PLAIN or SCRAM with the password read at each
// connection (password-file).
type passwordMechanism struct{ s SASL }

func (m *passwordMechanism) Name() string { return m.s.Mechanism }

func (m *passwordMechanism) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	pw := m.s.Password
	if m.s.PasswordFile != "" {
		var err error
		if pw, _, err = secure.ReadSecret(m.s.PasswordFile, "kafka.sasl.password-file"); err != nil {
			return nil, nil, err
		}
	}
	var mech sasl.Mechanism
	switch m.s.Mechanism {
	case MechanismPlain:
		mech = plain.Mechanism{Username: m.s.Username, Password: pw}
	case MechanismSCRAM256, MechanismSCRAM512:
		algo := scram.SHA256
		if m.s.Mechanism == MechanismSCRAM512 {
			algo = scram.SHA512
		}
		var err error
		if mech, err = scram.Mechanism(algo, m.s.Username, pw); err != nil {
			return nil, nil, fmt.Errorf("kafka.sasl: %w", err)
		}
	}
	return mech.Start(ctx)
}

// Security is what every Kafka connection is made with: the
// TLS client configuration (nil: plaintext) and the SASL mechanism (nil:
// none). Build it once per connection owner; it is safe for concurrent use.
type Security struct {
	tls      *tls.Config
	verify   secure.Verify
	mech     sasl.Mechanism
	mechName string
	err      error // a TLS or SASL setting that cannot be used (files changed since Validate)
	timeout  time.Duration
	insecure bool
}

// NewSecurity returns the Security of cfg. A file that can no longer be
// read is reported by every dial (as a *SecurityError), not here.
func NewSecurity(cfg Config) *Security {
	s := &Security{verify: cfg.TLS.Verify(), timeout: cfg.DialTimeout, insecure: cfg.TLS.Enabled && cfg.TLS.InsecureSkipVerify,
		mechName: cfg.SASL.Mechanism}
	if s.timeout <= 0 {
		s.timeout = 10 * time.Second
	}
	s.tls, s.err = cfg.TLS.Client("kafka.tls")
	if s.err == nil {
		s.mech, s.err = cfg.SASL.mechanism()
	}
	return s
}

// Insecure reports whether kafka.tls.insecure-skip-verify is on (the
// caller logs a warning: the brokers are not authenticated).
func (s *Security) Insecure() bool { return s.insecure }

// dial opens a TCP connection to addr and, with TLS, completes the
// handshake, turning a failure no retry can fix into a *SecurityError. A
// nil *Security dials plaintext.
func (s *Security) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if s == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rawconn.Wrap(c), nil // no wake-up of the runtime's monitor per request
	}
	if s.err != nil {
		return nil, &SecurityError{Broker: addr, Setting: "kafka.tls / kafka.sasl", Fix: "fix the files named", Err: s.err}
	}
	d := net.Dialer{Timeout: s.timeout, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c = rawconn.Wrap(c)
	if s.tls == nil {
		return c, nil
	}
	conf := s.tls.Clone()
	if conf.ServerName == "" {
		conf.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(c, conf)
	hctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		c.Close()
		return nil, s.handshakeError(ctx, addr, err)
	}
	return tc, nil
}

// handshakeError explains a failed TLS handshake with addr.
func (s *Security) handshakeError(ctx context.Context, addr string, err error) error {
	if fix := secure.Explain(err, secure.Section("kafka.tls")); fix != "" {
		return &SecurityError{Broker: addr, Setting: "kafka.tls", Fix: fix, Err: err}
	}
	// A plaintext Kafka listener reads the ClientHello as a request of
	// absurd size and closes the connection: the handshake sees EOF. Tell
	// it from a broker going away by asking the same address in plaintext.
	if closedEarly(err) && speaksPlainKafka(ctx, addr, s.timeout) {
		return &SecurityError{Broker: addr, Setting: "kafka.tls.enabled",
			Fix: "this is a plaintext (PLAINTEXT or SASL_PLAINTEXT) listener: give the brokers' TLS listener in kafka.brokers, or set kafka.tls.enabled: false",
			Err: err}
	}
	return err
}

// closedEarly reports a connection the other side closed or reset.
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// speaksPlainKafka reports whether addr answers a plaintext ApiVersions
// request.
func speaksPlainKafka(ctx context.Context, addr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := (&kafka.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.ApiVersions()
	return err == nil
}

// speaksTLS reports whether addr completes a TLS handshake (any
// certificate).
func speaksTLS(ctx context.Context, addr string, timeout time.Duration) bool {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: &tls.Config{InsecureSkipVerify: true}}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// explain turns an error of a request to addr (after the dial: SASL, or a
// plaintext request to a TLS listener) into a *SecurityError when it is
// one no retry fixes; other errors are returned as they are.
func (s *Security) explain(ctx context.Context, addr string, err error) error {
	if s == nil || err == nil || errors.Is(err, ErrSecurity) {
		return err
	}
	// TLS 1.3: a client certificate the server rejects is reported after
	// the client's side of the handshake, at the first read.
	if fix := secure.Explain(err, secure.Section("kafka.tls")); fix != "" {
		return &SecurityError{Broker: addr, Setting: "kafka.tls", Fix: fix, Err: err}
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.SASLAuthenticationFailed:
			fix := "check kafka.sasl.username and kafka.sasl.password (or password-file)"
			switch s.mechName {
			case MechanismOAuthBearer:
				fix = "the broker refused the token: check kafka.sasl.token-file / token-url and that the token is valid for this cluster"
			case MechanismAWSMSKIAM:
				fix = "MSK refused the IAM signature: check that the credentials' IAM policy allows kafka-cluster:Connect on this cluster, that kafka.sasl.aws-region is the cluster's region and that the clock is right"
			}
			return &SecurityError{Broker: addr, Setting: "kafka.sasl", Fix: fix + " (mechanism " + s.mechName + ")", Err: err}
		case kafka.UnsupportedSASLMechanism:
			return &SecurityError{Broker: addr, Setting: "kafka.sasl.mechanism",
				Fix: s.mechName + " is not enabled on this listener (sasl.enabled.mechanisms): use one the broker enables", Err: err}
		case kafka.IllegalSASLState:
			return &SecurityError{Broker: addr, Setting: "kafka.sasl.mechanism",
				Fix: "the listener does not expect SASL here: is it a SASL listener (SASL_SSL / SASL_PLAINTEXT)?", Err: err}
		}
	}
	if s.tls == nil && closedEarly(err) && speaksTLS(ctx, addr, s.timeout) {
		return &SecurityError{Broker: addr, Setting: "kafka.tls.enabled",
			Fix: "this listener speaks TLS (SSL or SASL_SSL): set kafka.tls.enabled: true (with kafka.tls.ca-file)", Err: err}
	}
	if s.tls != nil && s.mech == nil && closedEarly(err) && speaksSASL(ctx, addr, s) {
		return &SecurityError{Broker: addr, Setting: "kafka.sasl.mechanism",
			Fix: "this is a SASL_SSL listener and needs a login: set kafka.sasl", Err: err}
	}
	return err
}

// speaksSASL reports whether addr (TLS) answers a SASL handshake: a
// SASL_SSL listener, which closes the connection of a client that sends
// other requests first.
func speaksSASL(ctx context.Context, addr string, s *Security) bool {
	probe := &Security{tls: s.tls, timeout: s.timeout, mech: plain.Mechanism{Username: "cdc-outbox-probe", Password: "x"}}
	bc, err := dialBroker(ctx, addr, s.timeout, probe)
	if bc != nil {
		bc.close()
	}
	var ke kafka.Error
	return err == nil || (errors.As(err, &ke) && (ke == kafka.SASLAuthenticationFailed || ke == kafka.UnsupportedSASLMechanism))
}

// authenticate logs in with the SASL mechanism on a connection to addr
// (host:port) whose API versions are av: SaslHandshake v1, then
// SaslAuthenticate requests (KIP-152) until the mechanism is done. The
// mechanism sees the broker's host and port (sasl.MetadataFromContext:
// AWS_MSK_IAM signs the host). Nothing without a mechanism.
func (s *Security) authenticate(ctx context.Context, addr string, rw io.ReadWriter, av *apiversionsAPI.Response) error {
	if s == nil || s.mech == nil {
		return nil
	}
	hv, av2 := int16(-1), int16(-1)
	for _, k := range av.ApiKeys {
		switch protocol.ApiKey(k.ApiKey) {
		case protocol.SaslHandshake:
			hv = min(k.MaxVersion, 1)
		case protocol.SaslAuthenticate:
			av2 = min(k.MaxVersion, 1)
		}
	}
	if hv < 1 || av2 < 0 {
		return fmt.Errorf("sink: the broker does not support SaslHandshake v1 and SaslAuthenticate (Kafka 1.0 or later): %w", kafka.UnsupportedVersion)
	}
	corr := int32(1)
	res, err := protocol.RoundTrip(rw, hv, corr, clientID, &saslhandshakeAPI.Request{Mechanism: s.mech.Name()})
	if err != nil {
		return err
	}
	if code := res.(*saslhandshakeAPI.Response).ErrorCode; code != 0 {
		return kafka.Error(code)
	}
	host, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	ctx = sasl.WithMetadata(ctx, &sasl.Metadata{Host: host, Port: port})
	sess, state, err := s.mech.Start(ctx)
	if err != nil {
		return err
	}
	for done := false; !done; {
		corr++
		res, err := protocol.RoundTrip(rw, av2, corr, clientID, &saslauthenticateAPI.Request{AuthBytes: state})
		if err != nil {
			// Kafka 1.0+ refuses a login in the answer (error 58); a
			// connection closed meanwhile is the broker's failure (a
			// restart), retried like any other, never taken for a
			// refused password.
			return err
		}
		r := res.(*saslauthenticateAPI.Response)
		if r.ErrorCode != 0 {
			return fmt.Errorf("%w (%s)", kafka.Error(r.ErrorCode), r.ErrorMessage)
		}
		if done, state, err = sess.Next(ctx, r.AuthBytes); err != nil {
			return err
		}
	}
	return nil
}

// Dialer returns a kafka-go Dialer with s's TLS and SASL for kafka-go's
// own clients (package consumer's Reader and ConsumerGroup, the partition
// readers of dialPartition). Each connection's TCP dial, TLS handshake and
// SASL exchange end within timeout, or when the dial's context ends: the
// login is done here (handshake, the producer's connections' own) and
// not by kafka-go, whose exchange has no deadline, so that a paused
// broker, which accepts connections and never answers, cannot hold a
// dial for ever. Failures no retry fixes are *SecurityError (errors.Is
// ErrSecurity). A nil s dials plaintext.
func (s *Security) Dialer(timeout time.Duration) *kafka.Dialer {
	return &kafka.Dialer{Timeout: timeout, DialFunc: s.dialAuthenticated}
}

// dialAuthenticated is dial followed, with TLS or SASL, by the handshake
// (Dialer), within ctx (kafka-go's Dialer gives it its timeout).
func (s *Security) dialAuthenticated(ctx context.Context, network, addr string) (net.Conn, error) {
	nc, err := s.dial(ctx, network, addr)
	if err != nil || s == nil || (s.mech == nil && s.tls == nil) {
		return nc, err // plaintext without a login: nothing to ask before kafka-go's requests
	}
	if _, err := s.handshake(ctx, addr, nc, nc); err != nil {
		nc.Close()
		return nil, s.explain(ctx, addr, err)
	}
	return nc, nil
}

// handshake asks for the broker's API versions on nc (read through rw)
// and, with a SASL mechanism, logs in (authenticate); with TLS and no
// mechanism it probes that the listener needs no login (probeMetadata: a
// SASL_SSL listener closes the connection, which explain names, where a
// later request would fail on a closed connection, retried for ever).
// ctx's deadline is the socket's meanwhile, and ctx ending ends the
// exchange at once. A failed ApiVersions round trip, or ctx ending, is a
// *net.OpError "handshake" (a connection failure, retried). A nil s only
// asks for the versions.
func (s *Security) handshake(ctx context.Context, addr string, nc net.Conn, rw io.ReadWriter) (*apiversionsAPI.Response, error) {
	deadline, _ := ctx.Deadline()
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	res, err := protocol.RoundTrip(rw, 0, 0, clientID, &apiversionsAPI.Request{})
	var av *apiversionsAPI.Response
	switch {
	case err != nil:
		err = &net.OpError{Op: "handshake", Net: "tcp", Addr: nc.RemoteAddr(), Err: err}
	case res.(*apiversionsAPI.Response).ErrorCode != 0:
		err = fmt.Errorf("api versions from %s: error code %d", addr, res.(*apiversionsAPI.Response).ErrorCode)
	default:
		av = res.(*apiversionsAPI.Response)
		if s != nil && s.mech != nil {
			err = s.authenticate(ctx, addr, rw, av)
		} else if s != nil && s.tls != nil {
			err = probeMetadata(rw, av)
		}
	}
	if !stop() && err == nil {
		err = &net.OpError{Op: "handshake", Net: "tcp", Addr: nc.RemoteAddr(), Err: ctx.Err()}
	}
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return av, nil
}

// probeMetadata sends a Metadata request for no topics (at the highest
// version both sides support, v1 to v8) and reads its answer.
func probeMetadata(rw io.ReadWriter, av *apiversionsAPI.Response) error {
	v := int16(-1)
	for _, k := range av.ApiKeys {
		if protocol.ApiKey(k.ApiKey) == protocol.Metadata {
			if hi := min(k.MaxVersion, 8); hi >= max(k.MinVersion, 1) {
				v = hi
			}
		}
	}
	if v < 0 {
		return fmt.Errorf("sink: the broker supports no Metadata version from 1 to 8: %w", kafka.UnsupportedVersion)
	}
	_, err := protocol.RoundTrip(rw, v, 1, clientID, &metadataAPI.Request{TopicNames: []string{}})
	return err
}

// ValidateSecurity checks tls and sasl as Config.Validate checks the
// kafka.tls and kafka.sasl sections (the errors name those settings), all
// errors joined: for the clients with the same sections (package
// consumer).
func ValidateSecurity(tls secure.TLS, sasl SASL) error {
	c := Config{TLS: tls, SASL: sasl}
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("kafka.%s: %s", field, fmt.Sprintf(format, a...)))
	}
	c.validateSecurity(bad, &errs)
	return errors.Join(errs...)
}

// dialPartition connects to partition's leader at addr (host:port) with
// sec's TLS and SASL settings (sec may be nil). The TCP dial and the TLS
// and SASL handshakes end after timeout (Dialer), and the connection's
// socket is closed as soon as ctx ends, for as long as the connection is
// open: a paused broker accepts the connection and never answers, and a
// caller's later SetDeadline cannot undo a close (whileLeader cancels the
// reads of a leader that moved that way).
func dialPartition(ctx context.Context, sec *Security, timeout time.Duration, addr, topic string, partition int) (*kafka.Conn, error) {
	d := sec.Dialer(timeout)
	base := d.DialFunc
	var raw atomic.Pointer[net.Conn]
	d.DialFunc = func(dctx context.Context, network, address string) (net.Conn, error) {
		nc, err := base(dctx, network, address)
		if err != nil {
			return nil, err
		}
		raw.Store(&nc)
		if err := dctx.Err(); err != nil { // ended before the AfterFunc below could see nc
			nc.Close()
			return nil, err
		}
		return &watchedConn{Conn: nc, stop: context.AfterFunc(ctx, func() { nc.Close() })}, nil
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(dctx, func() {
		if nc := raw.Load(); nc != nil {
			(*nc).Close()
		}
	})
	host, port, _ := net.SplitHostPort(addr)
	pn, _ := strconv.Atoi(port)
	conn, err := d.DialPartition(dctx, "tcp", "", kafka.Partition{Topic: topic, ID: partition, Leader: kafka.Broker{Host: host, Port: pn}})
	if !stop() && err == nil { // ended as the dial completed: its socket is closed
		conn.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, dctx.Err())
	}
	return conn, err
}

// watchedConn is a socket closed when a context ends (dialPartition);
// closing it first lets the context go.
type watchedConn struct {
	net.Conn
	stop func() bool // context.AfterFunc's
}

func (c *watchedConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// DialLeader connects to the leader of topic's partition (found through
// cfg's brokers, asked in turn until one answers) with cfg's security.
// Errors no retry fixes are *SecurityError.
func DialLeader(ctx context.Context, cfg Config, topic string, partition int) (*kafka.Conn, error) {
	// A leadership moving (an election, a broker back) is retried.
	return retryLeader(ctx, func() (*kafka.Conn, error) { return dialLeader(ctx, cfg, topic, partition) })
}

func dialLeader(ctx context.Context, cfg Config, topic string, partition int) (*kafka.Conn, error) {
	// The leader from the project's metadata connection (each broker's
	// dial and handshakes bounded), then dialPartition: kafka-go's own
	// DialLeader runs SASL without deadlines, and a paused broker held it
	// for ever.
	s := NewSecurity(cfg)
	cl := newCluster(cfg.Brokers, s.timeout, false, nil)
	cl.sec = s
	defer cl.close()
	meta, err := clusterPartitions(ctx, cl, cfg.Brokers, topic)
	if err != nil {
		return nil, err
	}
	addr, ok := cl.brokers[leaderOf(meta, int32(partition))]
	if !ok {
		return nil, fmt.Errorf("leader of %s/%d: %w", topic, partition, kafka.LeaderNotAvailable)
	}
	c, err := dialPartition(ctx, s, s.timeout, addr, topic, partition)
	if err != nil {
		return nil, fmt.Errorf("leader of %s/%d (%s): %w", topic, partition, addr, s.explain(ctx, addr, err))
	}
	return c, nil
}

// Connection describes one established broker connection (check).
type Connection struct {
	Broker    string
	TLS       string // secure.State: version, cipher, verification; "" plaintext
	Mechanism string // SASL mechanism, "" none
}

// Probe connects to each bootstrap broker as the producer does (TLS,
// SASL, API versions) and sends a metadata request, returning what each
// connection uses; the first failure is returned (a *SecurityError when
// no retry fixes it).
func Probe(ctx context.Context, cfg Config) ([]Connection, error) {
	s := NewSecurity(cfg)
	var out []Connection
	for _, b := range cfg.Brokers {
		bc, err := dialBroker(ctx, b, s.timeout, s)
		if err != nil {
			return out, err
		}
		conn := Connection{Broker: b, Mechanism: s.mechName}
		if tc, ok := bc.nc.(*tls.Conn); ok {
			conn.TLS = secure.State(tc.ConnectionState(), s.verify)
		}
		// ApiVersions is allowed before a SASL login: a metadata request
		// tells a SASL_SSL listener that wants one.
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err = bc.roundTrip(tctx, &metadataAPI.Request{TopicNames: []string{"cdc-outbox-probe"}}, s.timeout, withinDial)
		cancel()
		bc.close()
		if err != nil {
			return out, s.explain(ctx, b, err)
		}
		out = append(out, conn)
	}
	return out, nil
}
