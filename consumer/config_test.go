package consumer

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	c := Config{}.WithDefaults()
	err := c.Validate()
	if err == nil {
		t.Fatal("empty config validated")
	}
	for _, field := range []string{"consumer.brokers", "consumer.topics", "consumer.group"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
	c = Config{Brokers: []string{"b:9092"}, Topics: []string{"im.events"}, Group: "g", Isolation: "committed", Start: "first"}.WithDefaults()
	err = c.Validate()
	if err == nil || !strings.Contains(err.Error(), "consumer.isolation") || !strings.Contains(err.Error(), "consumer.start") {
		t.Fatalf("want isolation and start errors, got %v", err)
	}
	c = Config{Brokers: []string{"b:9092"}, Topics: []string{"im.events"}, Group: "g", Isolation: ReadCommitted}.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Window != DefaultConfig().Window || c.Start != StartEarliest {
		t.Fatalf("defaults not applied: %+v", c)
	}
	c = Config{Brokers: []string{"b:9092"}, Topics: []string{"im.events"}, Group: "g", DialTimeout: -time.Second,
		TLS: TLS{CAFile: "/no/such/ca.pem"}, SASL: SASL{Mechanism: "PLAINTEXT"}}.WithDefaults()
	err = c.Validate()
	for _, want := range []string{"consumer.dial-timeout", "kafka.tls", "kafka.sasl.mechanism", `"PLAINTEXT"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad TLS and SASL: %v, want %q", err, want)
		}
	}
	if d := (Config{}).WithDefaults().DialTimeout; d != 10*time.Second {
		t.Errorf("dial-timeout default %s, want 10s", d)
	}
}
