package secure

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// Verify is how much of the server's certificate a TLS client checks.
type Verify int

const (
	// VerifyNone accepts any certificate (encryption only: a man in the
	// middle is not detected).
	VerifyNone Verify = iota
	// VerifyCA checks that the chain leads to a trusted CA and that the
	// certificate is within its validity period, not the host name.
	VerifyCA
	// VerifyIdentity is VerifyCA plus the host name (or ServerName)
	// against the certificate's subject alternative names (RFC 6125).
	VerifyIdentity
)

// Options are the PEM files and checks of one TLS client.
type Options struct {
	// CAFile: PEM certificates of the CAs to trust; empty: the system's.
	CAFile string
	// CertFile and KeyFile: the client certificate chain and its private
	// key (PEM), for servers that require one (mutual TLS); both or none.
	CertFile, KeyFile string
	// ServerName is the name checked against the certificate and sent in
	// SNI; empty: the host of the address dialled.
	ServerName string
	Verify     Verify
}

// Keys are the names of one TLS client's settings, as the configuration
// spells them, for the messages of Client and Explain.
type Keys struct {
	CAFile, CertFile, KeyFile, ServerName string
	// Off is the setting that turns TLS off ("kafka.tls.enabled: false").
	Off string
}

// Section returns the Keys of a tls section (TLS) at prefix, e.g.
// "kafka.tls": kafka.tls.ca-file, kafka.tls.cert-file, ...
func Section(prefix string) Keys {
	return Keys{CAFile: prefix + ".ca-file", CertFile: prefix + ".cert-file", KeyFile: prefix + ".key-file",
		ServerName: prefix + ".server-name", Off: prefix + ".enabled: false"}
}

// Client returns a *tls.Config for opts (TLS 1.2 or later). Files that
// cannot be read or parsed give an error naming the file and its setting
// (keys).
func Client(opts Options, keys Keys) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: opts.ServerName}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keys.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", keys.CAFile, opts.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case opts.CertFile != "" && opts.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %s, %s: %w", keys.CertFile, keys.KeyFile, opts.CertFile, opts.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case opts.CertFile != "" || opts.KeyFile != "":
		return nil, fmt.Errorf("%s and %s: give both or neither", keys.CertFile, keys.KeyFile)
	}
	switch opts.Verify {
	case VerifyNone:
		cfg.InsecureSkipVerify = true
	case VerifyCA:
		// Chain and validity only (MySQL's VERIFY_CA): crypto/tls cannot
		// skip just the name check, so the chain is verified here.
		cfg.InsecureSkipVerify = true
		roots := cfg.RootCAs
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			if err != nil {
				return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
			}
			return nil
		}
	}
	return cfg, nil
}

// CheckFiles reads and parses the files of opts without connecting, for a
// Validate: the errors name the settings (keys).
func CheckFiles(opts Options, keys Keys) error {
	_, err := Client(opts, keys)
	return err
}

// State describes an established TLS connection for check: the version,
// the cipher suite and whether the server's certificate was verified.
func State(cs tls.ConnectionState, v Verify) string {
	what := "certificate not verified (insecure)"
	switch v {
	case VerifyCA:
		what = "certificate verified against the CA (host name not checked)"
	case VerifyIdentity:
		what = "certificate and host name verified"
	}
	return fmt.Sprintf("%s, %s, %s", tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite), what)
}

// Explain returns what a failed TLS handshake means and the setting to
// fix (named by keys), or "" when err is no TLS failure.
// Cases: an unknown CA, an expired or not yet valid certificate, a host
// name mismatch, a plaintext server (the answer is no TLS record), a
// client certificate the server rejected or did not get (a TLS alert from
// the server).
func Explain(err error, keys Keys) string {
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	var he x509.HostnameError
	var rh tls.RecordHeaderError
	var op *net.OpError
	switch {
	case errors.As(err, &ua):
		return fmt.Sprintf("the server's certificate is not signed by a CA in %s (or the system's CAs when it is empty): give the CA that signed the server's certificate", keys.CAFile)
	case errors.As(err, &ci) && ci.Reason == x509.Expired:
		if ci.Cert != nil && time.Now().Before(ci.Cert.NotBefore) {
			return fmt.Sprintf("the server's certificate (%s) is not valid before %s: check this host's clock", ci.Cert.Subject, ci.Cert.NotBefore.UTC().Format(time.RFC3339))
		}
		na := ""
		if ci.Cert != nil {
			na = fmt.Sprintf(" (%s, expired %s)", ci.Cert.Subject, ci.Cert.NotAfter.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("the server's certificate has expired%s: renew it on the server", na)
	case errors.As(err, &ci):
		return fmt.Sprintf("the server's certificate is not valid for this use (%v): fix the certificate or %s", ci, keys.CAFile)
	case errors.As(err, &he):
		names := ""
		if he.Certificate != nil {
			names = strings.Join(append(he.Certificate.DNSNames, ipStrings(he.Certificate.IPAddresses)...), ", ")
		}
		return fmt.Sprintf("the server's certificate is for %s, not %q: connect by one of its names, or set %s to one of them", names, he.Host, keys.ServerName)
	case errors.As(err, &rh):
		return fmt.Sprintf("the server did not answer with TLS (a plaintext listener?): connect to its TLS port, or set %s for this listener", keys.Off)
	case remoteAlert(err) != nil:
		op = remoteAlert(err)
		return fmt.Sprintf("the server refused the TLS handshake (%v): it requires a client certificate it trusts; set %s and %s to one signed by a CA the server trusts", op.Err, keys.CertFile, keys.KeyFile)
	}
	return ""
}

// IsTLSFailure reports whether err is a failed TLS handshake that a
// retry cannot fix (see Explain).
func IsTLSFailure(err error) bool {
	var ve *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	return errors.As(err, &ve) || errors.As(err, new(x509.UnknownAuthorityError)) || errors.As(err, new(x509.CertificateInvalidError)) ||
		errors.As(err, new(x509.HostnameError)) || errors.As(err, &rh) || remoteAlert(err) != nil
}

// remoteAlert returns the TLS alert the server sent, found anywhere in
// err's chain (crypto/tls reports it as a *net.OpError "remote error",
// which callers may wrap in another *net.OpError), or nil.
func remoteAlert(err error) *net.OpError {
	for err != nil {
		if op, ok := err.(*net.OpError); ok && op.Op == "remote error" {
			return op
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if op := remoteAlert(e); op != nil {
					return op
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}
