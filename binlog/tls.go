package binlog

// TLS and the password of the source connections: every SQL connection
// (Dial) and every replication stream (syncerConfig) is made here, so
// that source.ssl-mode and source.password-file apply to all of them.

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// SSL modes accepted in Config.SSLMode, as the mysql client's --ssl-mode
// (MySQL manual, "Command Options for Encrypted Connections").
const (
	// SSLDisabled: plaintext.
	SSLDisabled = "disabled"
	// SSLPreferred (the default): TLS when the server offers it, without
	// verifying its certificate; plaintext otherwise.
	SSLPreferred = "preferred"
	// SSLRequired: TLS, the certificate not verified.
	SSLRequired = "required"
	// SSLVerifyCA: TLS, the certificate verified against source.ssl-ca.
	SSLVerifyCA = "verify-ca"
	// SSLVerifyIdentity: SSLVerifyCA plus the host name of source.addr
	// (or source.ssl-server-name) against the certificate.
	SSLVerifyIdentity = "verify-identity"
)

// codeSecureTransportRequired is ER_SECURE_TRANSPORT_REQUIRED (MySQL 5.7+,
// MariaDB 10.5+): a plaintext login to a require_secure_transport=ON server.
const codeSecureTransportRequired = 3159

// ErrTLS reports a TLS set-up with the source that a retry cannot fix: a
// server that does not offer TLS under a mode that requires it, a
// server that requires it under ssl-mode: disabled, or a failed
// handshake (CA, expiry, host name, client certificate). IsFatal reports it.
var ErrTLS = errors.New("binlog: TLS to the source")

// sslKeys name the source's TLS settings in messages.
var sslKeys = secure.Keys{CAFile: "source.ssl-ca", CertFile: "source.ssl-cert", KeyFile: "source.ssl-key",
	ServerName: "source.ssl-server-name", Off: "source.ssl-mode: disabled"}

func (c *Config) validateTLS(bad func(field, format string, a ...any), errs *[]error) {
	switch c.SSLMode {
	case "", SSLDisabled, SSLPreferred, SSLRequired, SSLVerifyCA, SSLVerifyIdentity: // "": preferred
	default:
		bad("ssl-mode", "%q: want disabled, preferred, required, verify-ca or verify-identity", c.SSLMode)
		return
	}
	if c.SSLMode == SSLDisabled || c.SSLMode == SSLPreferred || c.SSLMode == "" {
		if c.SSLCA != "" || c.SSLServerName != "" {
			bad("ssl-mode", "%s does not verify the server: use verify-ca or verify-identity with source.ssl-ca", c.SSLMode)
		}
	}
	if c.AllowPublicKeyRetrieval && c.SSLMode != SSLDisabled && c.SSLMode != SSLPreferred && c.SSLMode != "" {
		bad("allow-public-key-retrieval", "only used without TLS, and ssl-mode %s always uses TLS: remove it", c.SSLMode)
	}
	if c.SSLMode == SSLDisabled && (c.SSLCert != "" || c.SSLKey != "") {
		bad("ssl-cert", "set with ssl-mode: disabled (no TLS): remove it or choose another ssl-mode")
	}
	if c.SSLMode != SSLDisabled {
		if err := secure.CheckFiles(c.tlsOptions(), sslKeys); err != nil {
			*errs = append(*errs, err)
		}
	}
	if c.Password != "" && c.PasswordFile != "" {
		bad("password-file", "set either source.password or source.password-file, not both")
	} else if c.PasswordFile != "" {
		if _, _, err := secure.ReadSecret(c.PasswordFile, "source.password-file"); err != nil {
			*errs = append(*errs, err)
		}
	}
}

func (c Config) tlsOptions() secure.Options {
	o := secure.Options{CAFile: c.SSLCA, CertFile: c.SSLCert, KeyFile: c.SSLKey, ServerName: c.SSLServerName}
	switch c.SSLMode {
	case SSLVerifyCA:
		o.Verify = secure.VerifyCA
	case SSLVerifyIdentity:
		o.Verify = secure.VerifyIdentity
		if o.ServerName == "" {
			o.ServerName, _, _ = net.SplitHostPort(c.Addr)
		}
	}
	return o
}

// Secret returns the source password: source.password, or the content
// of source.password-file read now (so that a rotated Secret is used at
// the next connection).
func (c Config) Secret() (string, error) {
	if c.PasswordFile == "" {
		return c.Password, nil
	}
	pw, _, err := secure.ReadSecret(c.PasswordFile, "source.password-file")
	return pw, err
}

// TLSState reports how a connection made by Dial is protected, for check:
// "" when plaintext.
func TLSState(conn *Conn, cfg Config) string {
	if tc, ok := conn.Conn.Conn.Conn.(*tls.Conn); ok {
		return secure.State(tc.ConnectionState(), cfg.tlsOptions().Verify)
	}
	return ""
}

// tlsFor returns the TLS configuration of a connection to the source: nil
// for plaintext (ssl-mode: disabled, or preferred with a server that does
// not offer TLS: the server's greeting is read first to know).
func (c Config) tlsFor(ctx context.Context) (*tls.Config, error) {
	switch c.SSLMode {
	case SSLDisabled:
		return nil, nil
	case SSLPreferred, "":
		offers, err := offersTLS(ctx, c.Addr, c.probeBound())
		if err != nil || !offers {
			return nil, nil // plaintext; a server that is down fails the real connection
		}
	}
	return secure.Client(c.tlsOptions(), sslKeys)
}

// probeBound is the wait for the server's greeting when it is read to
// learn whether the server offers TLS (ssl-mode: preferred): at most
// 10 s, and no longer than source.read-timeout, which bounds the real
// connection's handshake behind it, so that a server holding the packets
// costs a command about one read-timeout, not 10 s more.
func (c Config) probeBound() time.Duration {
	return min(cmp.Or(c.ReadTimeout, 10*time.Second), 10*time.Second)
}

// offersTLS reads the server's initial handshake packet, waiting at most
// bound, and reports its CLIENT_SSL capability flag (MySQL client/server
// protocol, "Protocol::HandshakeV10").
func offersTLS(ctx context.Context, addr string, bound time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return false, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	body := make([]byte, min(n, 1<<16))
	if _, err := io.ReadFull(c, body); err != nil {
		return false, err
	}
	return greetingOffersTLS(body)
}

// greetingOffersTLS parses a HandshakeV10 payload: protocol version 10,
// the NUL-terminated server version, the 4-byte connection id, 8 bytes
// of auth data, a filler byte, then the lower 2 bytes of the capability
// flags. An error packet (0xff) or another protocol is an error.
func greetingOffersTLS(p []byte) (bool, error) {
	if len(p) == 0 || p[0] != 10 {
		return false, fmt.Errorf("binlog: the server's greeting is not a protocol 10 handshake")
	}
	i := 1
	for i < len(p) && p[i] != 0 {
		i++
	}
	i += 1 + 4 + 8 + 1
	if i+2 > len(p) {
		return false, fmt.Errorf("binlog: the server's greeting is truncated")
	}
	return uint32(binary.LittleEndian.Uint16(p[i:]))&mysql.CLIENT_SSL != 0, nil
}

// Dial opens an SQL connection to the source (cfg.Addr, database db, ""
// for none) with cfg's TLS and password, as every SQL connection of every
// command does. A refused login wraps ErrAuth, a TLS problem ErrTLS, each
// naming the settings to fix. Every wait for the server is bounded by
// source.read-timeout (conn.go): the handshake (or ctx's earlier deadline),
// then each statement's answer, unless the server, asked on a second
// connection, still runs the statement; past it, a *StallError naming
// that setting, not a wait for good on a server that holds the packets.
func Dial(ctx context.Context, cfg Config, db string) (*Conn, error) {
	tc, err := cfg.tlsFor(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTLS, err)
	}
	return dial(ctx, cfg, db, tc, true)
}

// dial is Dial with the TLS configuration chosen (nil: plaintext); with
// probed, a silent statement is checked on a second connection before it
// fails (the probe's own connection is not).
func dial(ctx context.Context, cfg Config, db string, tc *tls.Config, probed bool) (*Conn, error) {
	pw, err := cfg.Secret()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	dialer, refused := cfg.dialer(10 * time.Second)
	// The handshake is bounded by source.read-timeout: go-mysql reads the
	// greeting with no deadline of its own, so a server that holds the
	// packets (SIGSTOPped, a silent network) would keep the command
	// waiting for good.
	bound := cmp.Or(cfg.ReadTimeout, 30*time.Second)
	deadline := time.Now().Add(bound)
	ours := true
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ours = d, false // the caller's bound (status --timeout) names itself
	}
	var w *watchConn
	watched := func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dialer(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		_ = nc.SetDeadline(deadline)
		w = &watchConn{Conn: nc, addr: cfg.Addr, bound: bound}
		return w, nil
	}
	conn, err := client.ConnectWithDialer(ctx, "", cfg.Addr, cfg.User, pw, db, watched, func(c *client.Conn) error {
		if tc != nil {
			c.SetTLSConfig(tc)
		}
		return nil
	})
	if pk := refused.err.Load(); err != nil && pk != nil {
		return nil, pk
	}
	if err != nil && ours && w != nil && w.stalled.Load() {
		return nil, &StallError{Addr: cfg.Addr, Bound: bound, Handshake: true, Err: err}
	}
	if err != nil {
		return nil, cfg.connectError(ctx, tc != nil, err)
	}
	if probed {
		id := conn.GetConnectionID()
		w.probe = func() bool { return running(cfg, tc, id) }
	}
	if err := w.start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("binlog: connect to %s: %w", cfg.Addr, err)
	}
	return &Conn{Conn: conn, w: w}, nil
}

// connectError classifies a failed connection to the source.
func (c Config) connectError(ctx context.Context, usedTLS bool, err error) error {
	var me *mysql.MyError
	switch {
	case errors.As(err, &me) && me.Code == codeAccessDenied:
		hint := ""
		if offers, perr := offersTLS(ctx, c.Addr, c.probeBound()); !usedTLS && perr == nil && offers {
			// MariaDB answers a plaintext login to a server with
			// require_secure_transport=ON with this error too.
			hint = "; this login was in plaintext and the server offers TLS: if it requires TLS (require_secure_transport=ON), set source.ssl-mode: verify-identity (with source.ssl-ca) or required"
		}
		return fmt.Errorf("%w: connect to %s as %q: %v; check source.user and source.password or source.password-file (CDC_OUTBOX_SOURCE_USER, CDC_OUTBOX_SOURCE_PASSWORD) and that the user may connect from this host%s",
			ErrAuth, c.Addr, c.User, err, hint)
	case errors.As(err, &me) && me.Code == codeSecureTransportRequired:
		return fmt.Errorf("%w: connect to %s: %v; the server requires TLS (require_secure_transport=ON): set source.ssl-mode: verify-identity (with source.ssl-ca) or required",
			ErrTLS, c.Addr, err)
	}
	if fix := secure.Explain(err, sslKeys); fix != "" {
		return fmt.Errorf("%w: connect to %s (source.ssl-mode %s): %v; %s", ErrTLS, c.Addr, c.SSLMode, err, fix)
	}
	if usedTLS && errors.Is(err, mysql.ErrBadConn) {
		// go-mysql keeps only the text of the read error, and with TLS 1.3
		// a client certificate the server rejects shows at that first
		// read: repeat the handshake to get the error itself.
		if herr := c.handshakeTLS(ctx); herr != nil {
			if fix := secure.Explain(herr, sslKeys); fix != "" {
				return fmt.Errorf("%w: connect to %s (source.ssl-mode %s): %v; %s", ErrTLS, c.Addr, c.SSLMode, herr, fix)
			}
		}
	}
	if usedTLS {
		if offers, perr := offersTLS(ctx, c.Addr, c.probeBound()); perr == nil && !offers {
			return fmt.Errorf("%w: connect to %s: the server does not offer TLS, and source.ssl-mode is %s: enable TLS on the server (ssl_cert, ssl_key) or set source.ssl-mode: preferred or disabled",
				ErrTLS, c.Addr, c.SSLMode)
		}
	}
	return fmt.Errorf("binlog: connect to %s: %w; check source.addr and that the server is up", c.Addr, err)
}

// syncerConfig returns the go-mysql replication settings shared by every
// binlog stream (Reader.Run and the position look-ups): address, login
// and TLS of cfg.
func syncerConfig(ctx context.Context, cfg Config, flavor string) (replication.BinlogSyncerConfig, error) {
	host, portStr, _ := net.SplitHostPort(cfg.Addr)
	port, _ := strconv.ParseUint(portStr, 10, 16)
	pw, err := cfg.Secret()
	if err != nil {
		return replication.BinlogSyncerConfig{}, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	tc, err := cfg.tlsFor(ctx)
	if err != nil {
		return replication.BinlogSyncerConfig{}, fmt.Errorf("%w: %v", ErrTLS, err)
	}
	dial, _ := cfg.dialer(10 * time.Second)
	return replication.BinlogSyncerConfig{
		ServerID: cfg.ServerID, Flavor: flavor, Host: host, Port: uint16(port),
		User: cfg.User, Password: pw, TLSConfig: tc, Dialer: dial,
	}, nil
}

// handshakeTLS opens a connection, asks for TLS (an SSLRequest packet:
// capability flags with CLIENT_SSL, max packet size, character set and 23
// zero bytes, sequence 1; "Protocol::SSLRequest"), completes the TLS
// handshake and waits briefly for the server's first record: the error of
// a handshake the server rejects, nil when it accepted (it then waits for
// the login, which is not sent).
func (c Config) handshakeTLS(ctx context.Context) error {
	tc, err := secure.Client(c.tlsOptions(), sslKeys)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	var hdr [4]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return err
	}
	if _, err := io.CopyN(io.Discard, conn, int64(int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)); err != nil {
		return err
	}
	req := make([]byte, 4+32)
	req[0], req[3] = 32, 1
	binary.LittleEndian.PutUint32(req[4:], mysql.CLIENT_PROTOCOL_41|mysql.CLIENT_SSL|mysql.CLIENT_SECURE_CONNECTION|mysql.CLIENT_PLUGIN_AUTH)
	binary.LittleEndian.PutUint32(req[8:], 1<<24)
	req[12] = 45 // utf8mb4_general_ci
	if _, err := conn.Write(req); err != nil {
		return err
	}
	tlsConn := tls.Client(conn, tc)
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		return err
	}
	_ = tlsConn.SetReadDeadline(time.Now().Add(time.Second))
	var b [1]byte
	_, err = tlsConn.Read(b[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return err
}
