package testcerts

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files written by Generate into its directory (PEM; keys PKCS#8, unencrypted).
const (
	CA            = "ca.pem"             // the CA that signs everything below but other-*
	Server        = "server.pem"         // localhost, 127.0.0.1; valid for a year
	ServerKey     = "server-key.pem"     //
	ServerBundle  = "server-bundle.pem"  // key then certificate (Kafka's PEM keystore)
	Expired       = "expired.pem"        // like server.pem, expired an hour ago
	ExpiredKey    = "expired-key.pem"    //
	ExpiredBundle = "expired-bundle.pem" //
	Client        = "client.pem"         // CN=cdc-outbox, client auth
	ClientKey     = "client-key.pem"     //
	OtherCA       = "other-ca.pem"       // a CA nobody trusts
	OtherClient   = "other-client.pem"   // a client certificate signed by other-ca
	OtherKey      = "other-client-key.pem"
)

type pair struct {
	cert *x509.Certificate
	der  []byte
	key  *rsa.PrivateKey
}

// Generate writes the files into dir (created, mode 0700; keys 0600).
// The server certificates name localhost, 127.0.0.1 and ::1, and the
// extra host names given (docker-compose.secure.yml: its service names).
func Generate(dir string, hosts ...string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now()
	ca, err := issue(nil, &x509.Certificate{Subject: pkix.Name{CommonName: "cdc-outbox test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(2 * 365 * 24 * time.Hour)})
	if err != nil {
		return err
	}
	other, err := issue(nil, &x509.Certificate{Subject: pkix.Name{CommonName: "another CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(2 * 365 * 24 * time.Hour)})
	if err != nil {
		return err
	}
	server := func(from, to time.Time) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: "localhost"}, DNSNames: append([]string{"localhost"}, hosts...),
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: from, NotAfter: to}
	}
	client := func(cn string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour)}
	}
	srv, err := issue(&ca, server(now.Add(-time.Hour), now.Add(365*24*time.Hour)))
	if err != nil {
		return err
	}
	exp, err := issue(&ca, server(now.Add(-48*time.Hour), now.Add(-time.Hour)))
	if err != nil {
		return err
	}
	cli, err := issue(&ca, client("cdc-outbox"))
	if err != nil {
		return err
	}
	ocli, err := issue(&other, client("cdc-outbox"))
	if err != nil {
		return err
	}
	files := []struct {
		name string
		p    pair
		what string // cert, key, bundle
	}{
		{CA, ca, "cert"}, {OtherCA, other, "cert"},
		{Server, srv, "cert"}, {ServerKey, srv, "key"}, {ServerBundle, srv, "bundle"},
		{Expired, exp, "cert"}, {ExpiredKey, exp, "key"}, {ExpiredBundle, exp, "bundle"},
		{Client, cli, "cert"}, {ClientKey, cli, "key"},
		{OtherClient, ocli, "cert"}, {OtherKey, ocli, "key"},
	}
	for _, f := range files {
		var out []byte
		mode := os.FileMode(0o644)
		if f.what != "cert" {
			kb, err := x509.MarshalPKCS8PrivateKey(f.p.key)
			if err != nil {
				return err
			}
			out = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
			mode = 0o600
		}
		if f.what != "key" {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.p.der})...)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), out, mode); err != nil {
			return err
		}
	}
	return nil
}

func issue(parent *pair, tmpl *x509.Certificate) (pair, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return pair{}, err
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return pair{}, err
	}
	tmpl.SerialNumber = sn
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		return pair{}, fmt.Errorf("testcerts: %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return pair{}, err
	}
	return pair{cert: cert, der: der, key: key}, nil
}
