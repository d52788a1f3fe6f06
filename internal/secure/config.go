package secure

import (
	"crypto/tls"
	"errors"
	"fmt"
)

// TLS is the tls section of the kafka and checkpoint settings.
type TLS struct {
	// Enabled turns TLS on; the other fields need it.
	Enabled bool `yaml:"enabled" env:"ENABLED" doc:"Turn TLS on; the other tls keys need it." rule:"true when another tls key is set"`
	// CAFile: PEM file of the CAs that sign the servers' certificates;
	// empty: the system's trusted CAs.
	CAFile string `yaml:"ca-file" env:"CA_FILE" doc:"PEM file of the CAs that sign the servers' certificates; empty: the system's trusted CAs." rule:"a readable PEM file; not with insecure-skip-verify"`
	// CertFile and KeyFile: client certificate and key (PEM) for servers
	// that require mutual TLS.
	CertFile string `yaml:"cert-file" env:"CERT_FILE" doc:"Client certificate (PEM) for servers that require mutual TLS." rule:"with key-file; a readable PEM file"`
	KeyFile  string `yaml:"key-file" env:"KEY_FILE" doc:"The client certificate's private key (PEM)." rule:"with cert-file; a readable PEM file"`
	// ServerName is the name the servers' certificates must carry when it
	// is not the host in the address (an IP address, a load balancer).
	ServerName string `yaml:"server-name" env:"SERVER_NAME" doc:"The name the servers' certificates must carry when it is not the host in the address." rule:"-"`
	// InsecureSkipVerify accepts any server certificate: encryption
	// without authentication, for tests only (logged as a warning).
	InsecureSkipVerify bool `yaml:"insecure-skip-verify" env:"INSECURE_SKIP_VERIFY" doc:"Accept any server certificate: encryption without authentication, for tests only (logged as a warning)." rule:"not with ca-file"`
}

// Options returns the client options of t.
func (t TLS) Options() Options {
	v := VerifyIdentity
	if t.InsecureSkipVerify {
		v = VerifyNone
	}
	return Options{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName, Verify: v}
}

// Validate checks t; the errors name the settings under prefix (e.g.
// "kafka.tls"). The files are read and parsed.
func (t TLS) Validate(prefix string) error {
	if !t.Enabled {
		if t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify {
			return fmt.Errorf("%s.enabled: false, but other %s settings are set: set %s.enabled: true, or remove them", prefix, prefix, prefix)
		}
		return nil
	}
	var errs []error
	if t.InsecureSkipVerify && t.CAFile != "" {
		errs = append(errs, fmt.Errorf("%s.insecure-skip-verify: true makes %s.ca-file unused: remove one", prefix, prefix))
	}
	if err := CheckFiles(t.Options(), Section(prefix)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Client returns the *tls.Config of t, nil when TLS is off.
func (t TLS) Client(prefix string) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	return Client(t.Options(), Section(prefix))
}

// Verify is how much t verifies.
func (t TLS) Verify() Verify {
	return t.Options().Verify
}
