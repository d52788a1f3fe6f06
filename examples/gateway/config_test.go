package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/consumer"
)

// The consumer's settings from -consumer-config (the consumer package's
// YAML keys, the publisher's kafka.tls and kafka.sasl), the flags'
// defaults filling what it leaves empty, and an unknown key refused.
func TestConsumerConfigOf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consumer.yaml")
	if err := os.WriteFile(path, []byte(`brokers: [b-1.example:9096]
group: push
isolation: read_committed
dial-timeout: 3s
tls:
  enabled: true
  ca-file: /etc/kafka/ca.pem
sasl:
  mechanism: SCRAM-SHA-512
  username: gateway
  password-file: /run/secrets/kafka
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := consumerConfigOf(path, consumer.Config{SASL: consumer.SASL{Password: "from-env"}}, []string{"127.0.0.1:39092"}, "im.events", "im-gateway", consumer.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Brokers, []string{"b-1.example:9096"}) || !slices.Equal(cfg.Topics, []string{"im.events"}) || cfg.Group != "push" ||
		cfg.Isolation != consumer.ReadCommitted || cfg.DialTimeout != 3*time.Second || !cfg.TLS.Enabled || cfg.TLS.CAFile != "/etc/kafka/ca.pem" ||
		cfg.SASL.Mechanism != "SCRAM-SHA-512" || cfg.SASL.Username != "gateway" || cfg.SASL.PasswordFile != "/run/secrets/kafka" || cfg.SASL.Password != "from-env" {
		t.Fatalf("got %+v", cfg)
	}
	if err := os.WriteFile(path, []byte("tls:\n  ca: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := consumerConfigOf(path, consumer.Config{}, nil, "t", "g", ""); err == nil {
		t.Fatal("an unknown key was accepted")
	}
}
