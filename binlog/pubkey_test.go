package binlog

import (
	"errors"
	"net"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
)

// TestKeyGuard: the public key request of the login (one byte 0x02,
// sequence > 0) among the first three writes is refused with the fix; a
// command packet (sequence 0),
// longer packets and writes after the login pass.
func TestKeyGuard(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var g0 errgroup.Group
	defer g0.Wait()
	defer a.Close()
	g0.Go(func() error { // the server side reads whatever passes
		buf := make([]byte, 64)
		for {
			if _, err := b.Read(buf); err != nil {
				return nil
			}
		}
	})
	r := &refusal{}
	g := &keyGuard{Conn: a, addr: "db:3306", r: r}
	for _, tc := range []struct {
		p       []byte
		refused bool
	}{
		{[]byte{40, 0, 0, 1, 0x8d, 0xa6}, false}, // handshake response
		{[]byte{1, 0, 0, 0, 2}, false},           // COM_INIT_DB "" (sequence 0)
		{[]byte{1, 0, 0, 3, 2}, true},            // the public key request
		{[]byte{1, 0, 0, 5, 2}, false},           // after the login's writes
	} {
		_, err := g.Write(tc.p)
		var pk *ErrPublicKeyRetrieval
		if tc.refused != errors.As(err, &pk) || (err != nil && !tc.refused) {
			t.Fatalf("write %v: %v", tc.p, err)
		}
		if tc.refused && (!errors.Is(err, ErrAuth) || !IsFatal(err) || !strings.Contains(err.Error(), "source.allow-public-key-retrieval: true") ||
			!strings.Contains(err.Error(), "db:3306")) {
			t.Fatalf("refusal: %v", err)
		}
		if tc.refused && r.err.Load() == nil {
			t.Fatal("the refusal is not recorded")
		}
	}
}

func TestAllowPublicKeyRetrievalValidate(t *testing.T) {
	for mode, ok := range map[string]bool{"": true, SSLDisabled: true, SSLPreferred: true, SSLRequired: false, SSLVerifyIdentity: false} {
		c := DefaultConfig()
		c.SSLMode, c.AllowPublicKeyRetrieval = mode, true
		if mode == SSLVerifyIdentity {
			c.SSLCA = ""
		}
		err := c.Validate()
		if got := err == nil || !strings.Contains(err.Error(), "source.allow-public-key-retrieval"); got != ok {
			t.Errorf("ssl-mode %q: %v", mode, err)
		}
	}
}
