package checkpoint

// The Redis client of the Store: one server, Sentinel or Cluster through
// go-redis's UniversalClient, with TLS, the ACL login and the password
// read from a file at each connection. Every command that touches Redis
// builds its client here (newClient).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/redis/go-redis/v9"
)

// ErrAuth reports a login or permission Redis refused (WRONGPASS,
// NOAUTH, NOPERM): fatal, with the settings to fix.
var ErrAuth = errors.New("checkpoint: Redis refused the login")

// ErrTLS reports a TLS set-up with Redis that a retry cannot fix: a
// failed handshake, or TLS against a plaintext port and the other way round.
var ErrTLS = errors.New("checkpoint: TLS to Redis")

func (c *Config) validateClient(errs *[]error) {
	if err := c.TLS.Validate("checkpoint.tls"); err != nil {
		*errs = append(*errs, err)
	}
	secret := func(field, v, file string) {
		if v != "" && file != "" {
			*errs = append(*errs, fmt.Errorf("checkpoint.%s-file: set either checkpoint.%s or checkpoint.%s-file, not both", field, field, field))
		} else if file != "" {
			if _, _, err := secure.ReadSecret(file, "checkpoint."+field+"-file"); err != nil {
				*errs = append(*errs, err)
			}
		}
	}
	secret("password", c.Password, c.PasswordFile)
	secret("sentinel-password", c.SentinelPassword, c.SentinelPasswordFile)
	for _, a := range c.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			*errs = append(*errs, fmt.Errorf("checkpoint.addrs: %q: want host:port", a))
		}
	}
	switch {
	case c.SentinelMaster != "" && c.Cluster:
		*errs = append(*errs, errors.New("checkpoint.cluster: not with checkpoint.sentinel-master: choose Sentinel or Cluster"))
	case c.SentinelMaster != "" && len(c.Addrs) == 0:
		*errs = append(*errs, errors.New("checkpoint.addrs: required with checkpoint.sentinel-master: the Sentinels' host:port"))
	case len(c.Addrs) > 0 && c.SentinelMaster == "" && !c.Cluster:
		*errs = append(*errs, fmt.Errorf("checkpoint.addrs: %v: only used with checkpoint.sentinel-master (the Sentinels) or checkpoint.cluster: true (seed nodes): set one of them, or give the one Redis server as checkpoint.addr", c.Addrs))
	case c.Cluster && c.DB != 0:
		*errs = append(*errs, fmt.Errorf("checkpoint.db: %d: Redis Cluster has only database 0", c.DB))
	}
}

// addrs is where the client connects: Addrs (Sentinels, or Cluster seed
// nodes) or else Addr.
func (c Config) addrs() []string {
	if len(c.Addrs) > 0 {
		return c.Addrs
	}
	return []string{c.Addr}
}

// Where names the Redis the client reaches, for messages and logs: Addr,
// or "Sentinel master NAME via ADDRS", or "Redis Cluster ADDRS" (Addrs, or
// Addr as the only seed).
func (c Config) Where() string {
	switch {
	case c.SentinelMaster != "":
		return fmt.Sprintf("Sentinel master %s via %s", c.SentinelMaster, strings.Join(c.addrs(), ","))
	case c.Cluster:
		return "Redis Cluster " + strings.Join(c.addrs(), ",")
	}
	return c.Addr
}

// AddrKey names the setting holding the addresses the client connects to:
// checkpoint.addrs when set (Sentinels, Cluster seeds), else checkpoint.addr.
func (c Config) AddrKey() string {
	if len(c.Addrs) > 0 {
		return "checkpoint.addrs"
	}
	return "checkpoint.addr"
}

// newClient returns the Redis client of a validated Config: a Sentinel
// client when SentinelMaster is set, a Cluster client when Cluster is,
// else a single-server client. A TLS file that can no longer be read
// fails every connection with ErrTLS.
func newClient(cfg Config) redis.UniversalClient {
	tc, tlsErr := cfg.TLS.Client("checkpoint.tls")
	opts := &redis.UniversalOptions{
		Addrs: cfg.addrs(), DB: cfg.DB, MasterName: cfg.SentinelMaster, IsClusterMode: cfg.Cluster,
		SentinelUsername: cfg.SentinelUsername, SentinelPassword: cfg.SentinelPassword,
		Dialer:      tlsDialer(tc, cfg.Timeout),
		DialTimeout: cfg.Timeout, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout,
		MaxRetries: 1,
		CredentialsProvider: func() (string, string) {
			pw := cfg.Password
			if cfg.PasswordFile != "" {
				// Validate read it; an error now leaves the password
				// empty and the server's NOAUTH/WRONGPASS says so.
				pw, _, _ = secure.ReadSecret(cfg.PasswordFile, "checkpoint.password-file")
			}
			return cfg.Username, pw
		},
	}
	if cfg.SentinelPasswordFile != "" {
		opts.SentinelPassword, _, _ = secure.ReadSecret(cfg.SentinelPasswordFile, "checkpoint.sentinel-password-file")
	}
	if tlsErr != nil {
		opts.Dialer = func(context.Context, string, string) (net.Conn, error) {
			return nil, fmt.Errorf("%w: %v", ErrTLS, tlsErr)
		}
	}
	if cfg.SentinelMaster == "" && !cfg.Cluster {
		// One server: a plain client even with several Addrs listed.
		o := opts.Simple()
		return redis.NewClient(o)
	}
	return redis.NewUniversalClient(opts)
}

// explain wraps a failed Redis command: ErrAuth for a refused login or
// permission, ErrTLS for TLS problems (probing the address to tell TLS
// and plaintext ports apart when the connection was dropped), otherwise
// err as it is.
func (s *Store) explain(ctx context.Context, err error) error {
	addr := s.cfg.Where()
	switch {
	case err == nil:
		return nil
	case redis.IsAuthError(err):
		return fmt.Errorf("%w: %s: %v; check checkpoint.username and checkpoint.password or checkpoint.password-file (CDC_OUTBOX_CHECKPOINT_USERNAME, CDC_OUTBOX_CHECKPOINT_PASSWORD), and that the ACL user is on", ErrAuth, addr, err)
	case redis.IsPermissionError(err):
		return fmt.Errorf("%w: %s: %v; the ACL user needs the checkpoint's keys and commands: ACL SETUSER <user> %s (with ha.enabled, also ~<ha.group>, by default ~cdc-outbox:instances)", ErrAuth, addr, err, ACLRules(s.key, ""))
	case errors.Is(err, ErrTLS):
		return err
	}
	if fix := secure.Explain(err, secure.Section("checkpoint.tls")); fix != "" {
		return fmt.Errorf("%w: %s: %v; %s", ErrTLS, addr, err, fix)
	}
	var ne net.Error
	if s.cfg.TLS.Enabled && (errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())) &&
		speaksPlainRedis(context.WithoutCancel(ctx), s.cfg.addrs()[0]) {
		// The command's deadline ran out in the TLS handshake with a
		// plaintext port (which waits for a line, answering nothing)
		// before the dialer could tell why (tlsDialer).
		return fmt.Errorf("%w: %s: %v; this is a plaintext port: give the server's tls-port in checkpoint.addr, or set checkpoint.tls.enabled: false", ErrTLS, addr, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		if !s.cfg.TLS.Enabled && speaksTLS(ctx, s.cfg.addrs()[0]) {
			return fmt.Errorf("%w: %s: %v; this port speaks TLS (tls-port): set checkpoint.tls.enabled: true (with checkpoint.tls.ca-file)", ErrTLS, addr, err)
		}
		if s.cfg.TLS.Enabled && s.cfg.TLS.CertFile != "" {
			// TLS 1.3: the server checks the client certificate after
			// the handshake; its refusal may arrive as a reset of the
			// first write rather than as the alert.
			return fmt.Errorf("%w: %s: %v; the server closed the connection after the TLS handshake: it probably refused the client certificate (checkpoint.tls.cert-file and key-file: signed by a CA in the server's tls-ca-cert-file?)", ErrTLS, addr, err)
		}
	}
	return err
}

// ACLRules returns the Redis ACL rules (ACL SETUSER syntax) a publisher's
// user needs for the checkpoint key and the keys stored beside it in its
// hash slot (SlotKey: lease, fence, term), and, when group is not empty,
// the instances' key ha.group: the key patterns, then the commands of the
// Store and of package lease, including those its Lua scripts call (Redis
// checks a script's calls against the user's ACL too).
func ACLRules(key, group string) string {
	rules := []string{"~" + key, "~" + SlotKey(key, "*")}
	if group != "" {
		rules = append(rules, "~"+group)
	}
	for _, c := range []string{"get", "set", "del", "incr", "pexpire", "pttl", "time",
		"zadd", "zcard", "zrem", "zremrangebyscore", "eval", "evalsha", "ping", "config|get"} {
		rules = append(rules, "+"+c)
	}
	return strings.Join(rules, " ")
}

// Explain is explain for the commands other packages send on Client()
// (the lease scripts of package lease): an error wrapping ErrAuth or
// ErrTLS that names the settings to fix (checkpoint.username/password,
// checkpoint.tls.*: a plaintext client on a TLS port and the reverse, a
// certificate not signed by checkpoint.tls.ca-file), else err unchanged.
// It may probe the address (at most 2 s) when the connection was dropped.
func (s *Store) Explain(ctx context.Context, err error) error { return s.explain(ctx, err) }

// tlsDialer dials TCP and, with tc, completes the TLS handshake itself
// (the name checked: tc's ServerName, else the host dialled), so that a
// handshake that fails or gets no answer says why: a plaintext port
// answers a ClientHello with nothing or an error line.
func tlsDialer(tc *tls.Config, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil || tc == nil {
			return c, err
		}
		conf := tc.Clone()
		if conf.ServerName == "" {
			conf.ServerName, _, _ = net.SplitHostPort(addr)
		}
		t := tls.Client(c, conf)
		hctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := t.HandshakeContext(hctx); err != nil {
			c.Close()
			var ne net.Error
			var rh tls.RecordHeaderError
			if (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &rh) || errors.Is(err, io.EOF) {
				if speaksPlainRedis(context.WithoutCancel(ctx), addr) { // ctx may have run out in the handshake
					return nil, fmt.Errorf("%w: %s: %v; this is a plaintext port: give the server's tls-port in checkpoint.addr, or set checkpoint.tls.enabled: false", ErrTLS, addr, err)
				}
			}
			return nil, err
		}
		return t, nil
	}
}

// speaksPlainRedis reports whether addr answers PING in plaintext
// (+PONG, or an error such as -NOAUTH: RESP either way).
func speaksPlainRedis(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	var b [1]byte
	_, err = io.ReadFull(c, b[:])
	return err == nil && (b[0] == '+' || b[0] == '-')
}

func speaksTLS(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// hashTag returns the hash tag of key (Redis Cluster specification,
// "Hash tags": the bytes between the first '{' and the first '}' after it,
// when not empty) and whether it has one.
func hashTag(key string) (string, bool) {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j], true
		}
	}
	return "", false
}

// validateKeyTag rejects a key whose braces do not make a hash tag: the
// keys SlotKey derives from it would hash to another Cluster slot.
func validateKeyTag(key string) error {
	if _, ok := hashTag(key); ok || !strings.ContainsAny(key, "{}") {
		return nil
	}
	return fmt.Errorf("checkpoint.key: %q: a '{' or '}' that is not a Redis Cluster hash tag (a non-empty {…}) would put the lease and fence keys in another hash slot than the checkpoint: use a hash tag such as \"cdc-outbox:{im}:checkpoint\", or no braces", key)
}

// SlotKey returns the key named key+":"+suffix placed in key's Redis
// Cluster hash slot, for anything stored beside the checkpoint (a lease,
// a history) that a Lua script or MULTI must touch with it: if key has a
// hash tag ({…}, Redis Cluster specification, "Hash tags"), the tag
// carries over; otherwise key becomes the tag, whose slot is key's own.
func SlotKey(key, suffix string) string {
	if _, ok := hashTag(key); ok {
		return key + ":" + suffix
	}
	return "{" + key + "}:" + suffix
}

// TLSState reports how the Store's connection is protected, for check:
// "" when plaintext. It opens one connection of its own.
func (s *Store) TLSState(ctx context.Context) (string, error) {
	if !s.cfg.TLS.Enabled {
		return "", nil
	}
	tc, err := s.cfg.TLS.Client("checkpoint.tls")
	if err != nil {
		return "", err
	}
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(s.cfg.addrs()[0])
	}
	d := tls.Dialer{Config: tc}
	c, err := d.DialContext(ctx, "tcp", s.cfg.addrs()[0])
	if err != nil {
		return "", s.explain(ctx, err)
	}
	defer c.Close()
	return secure.State(c.(*tls.Conn).ConnectionState(), s.cfg.TLS.Verify()), nil
}
