package binlog

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/rawconn"
)

// ErrPublicKeyRetrieval is a plaintext login that needed the server's
// RSA public key: caching_sha2_password's full authentication (the first
// login of a user after FLUSH PRIVILEGES or a server restart, MySQL
// manual "Caching SHA-2 Pluggable Authentication") over a connection
// without TLS sends the password encrypted with a key the server sends
// unauthenticated, which an active attacker can replace to read the
// password. It wraps ErrAuth (fatal); the fix is TLS or
// source.allow-public-key-retrieval.
type ErrPublicKeyRetrieval struct{ Addr string }

func (e *ErrPublicKeyRetrieval) Error() string {
	return fmt.Sprintf("%v: %s: the server asks for caching_sha2_password's full authentication over a plaintext connection, which needs its RSA public key: use TLS (source.ssl-mode: verify-identity with source.ssl-ca, or required), or set source.allow-public-key-retrieval: true to fetch the key from the server unauthenticated (as the mysql client's --get-server-public-key)", ErrAuth, e.Addr)
}

func (e *ErrPublicKeyRetrieval) Unwrap() error { return ErrAuth }

// dialer returns the dialer of every connection to the source: TCP with
// timeout, and without AllowPublicKeyRetrieval a guard that refuses to
// send the public key request (keyGuard). go-mysql keeps only the text of
// the write error, so the refusal is also recorded in the returned
// *refusal, which Dial reports instead (the binlog stream logs in after
// Dial's connection did, with the fast authentication).
func (c Config) dialer(timeout time.Duration) (func(ctx context.Context, network, addr string) (net.Conn, error), *refusal) {
	r := &refusal{}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
		if err == nil {
			nc = rawconn.Wrap(nc) // no wake-up of the runtime's monitor per read
		}
		if err != nil || c.AllowPublicKeyRetrieval {
			return nc, err
		}
		return &keyGuard{Conn: nc, addr: addr, r: r}, nil
	}, r
}

// refusal is the public key request a keyGuard refused, if any.
type refusal struct {
	err atomic.Pointer[ErrPublicKeyRetrieval]
}

// keyGuard is a connection to the source that fails the client's request
// for the server's RSA public key: a packet of one byte 0x02 with a
// non-zero sequence number, among the first three writes (the handshake
// response, an auth switch response, then the request; commands
// start at sequence 0). With TLS the guard sees TLS records, whose first
// byte is never 0x01, and lets them pass.
type keyGuard struct {
	net.Conn
	addr   string
	r      *refusal
	writes int
}

func (g *keyGuard) Write(p []byte) (int, error) {
	if g.writes < 3 {
		g.writes++
		if len(p) == 5 && p[0] == 1 && p[1] == 0 && p[2] == 0 && p[3] != 0 && p[4] == 2 {
			e := &ErrPublicKeyRetrieval{Addr: g.addr}
			g.r.err.Store(e)
			return 0, e
		}
	}
	return g.Conn.Write(p)
}
