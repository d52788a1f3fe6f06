package config

import (
	"net"
	"os"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/internal/testcerts"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"gopkg.in/yaml.v3"
)

// composeFile is the part of a Compose file these tests read.
type composeFile struct {
	Services map[string]struct {
		Command     any               `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Secrets     []string          `yaml:"secrets"`
		Volumes     []any             `yaml:"volumes"`
	} `yaml:"services"`
	Secrets map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

func readCompose(t *testing.T, name string) composeFile {
	t.Helper()
	b, err := os.ReadFile("../" + name)
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if _, ok := c.Services["cdc-outbox"]; !ok {
		t.Fatalf("%s: no cdc-outbox service", name)
	}
	return c
}

// commandText is a service's command as one string.
func commandText(cmd any) string {
	switch c := cmd.(type) {
	case string:
		return c
	case []any:
		var parts []string
		for _, p := range c {
			s, _ := p.(string)
			parts = append(parts, s)
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// TestComposeEnvironment: the daemon's CDC_OUTBOX_* variables in both
// Compose files name real settings and parse (the loader's own check).
func TestComposeEnvironment(t *testing.T) {
	for _, name := range []string{"docker-compose.yml", "docker-compose.secure.yml"} {
		t.Run(name, func(t *testing.T) {
			c := readCompose(t, name)
			var environ []string
			for k, v := range c.Services["cdc-outbox"].Environment {
				environ = append(environ, k+"="+v)
			}
			sort.Strings(environ)
			cfg := Default()
			if _, err := applyEnv(&cfg, environ); err != nil {
				t.Fatalf("the cdc-outbox service's environment: %v", err)
			}
		})
	}
}

// TestComposeSecure: docker-compose.secure.yml secures every connection
// of the daemon and is consistent with itself: each secret file the
// daemon reads is a secret it mounts, each certificate one the certs job
// writes into the volume mounted at /certs, the broker address one the
// broker advertises on its SASL_SSL listener, the host names verified
// ones the certificates carry.
func TestComposeSecure(t *testing.T) {
	c := readCompose(t, "docker-compose.secure.yml")
	svc := c.Services["cdc-outbox"]
	env := svc.Environment
	cfg := Default()
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	if _, err := applyEnv(&cfg, environ); err != nil {
		t.Fatal(err)
	}
	if cfg.Source.SSLMode != binlog.SSLVerifyIdentity || cfg.Source.PasswordFile == "" || cfg.Source.Password != "" {
		t.Errorf("source: ssl-mode %q, password-file %q: want verify-identity and the password from a file", cfg.Source.SSLMode, cfg.Source.PasswordFile)
	}
	if !cfg.Kafka.TLS.Enabled || cfg.Kafka.TLS.InsecureSkipVerify || cfg.Kafka.SASL.Mechanism != sink.MechanismSCRAM512 || cfg.Kafka.SASL.PasswordFile == "" {
		t.Errorf("kafka: tls %+v, sasl mechanism %q password-file %q", cfg.Kafka.TLS, cfg.Kafka.SASL.Mechanism, cfg.Kafka.SASL.PasswordFile)
	}
	if !cfg.Checkpoint.TLS.Enabled || cfg.Checkpoint.Username == "" || cfg.Checkpoint.PasswordFile == "" {
		t.Errorf("checkpoint: tls %+v, username %q, password-file %q", cfg.Checkpoint.TLS, cfg.Checkpoint.Username, cfg.Checkpoint.PasswordFile)
	}

	mounted := map[string]bool{}
	for _, s := range svc.Secrets {
		if _, ok := c.Secrets[s]; !ok {
			t.Errorf("cdc-outbox mounts secret %s, not declared at the top level", s)
		}
		mounted["/run/secrets/"+s] = true
	}
	certsMounted := false
	for _, v := range svc.Volumes {
		if m, ok := v.(map[string]any); ok && m["target"] == "/certs" && m["source"] == "certs" {
			certsMounted = true
		}
	}
	certFiles := map[string]bool{testcerts.CA: true, testcerts.Server: true, testcerts.ServerKey: true, testcerts.ServerBundle: true}
	for k, v := range env {
		switch {
		case strings.HasPrefix(v, "/run/secrets/") && !mounted[v]:
			t.Errorf("%s=%s: the service does not mount that secret", k, v)
		case strings.HasPrefix(v, "/certs/") && (!certsMounted || !certFiles[path.Base(v)]):
			t.Errorf("%s=%s: not a file of the certs volume (mounted: %v)", k, v, certsMounted)
		}
	}

	certsCmd := commandText(c.Services["certs"].Command)
	hosts := map[string]bool{"localhost": true}
	if _, after, ok := strings.Cut(certsCmd, "gencerts /certs"); ok {
		line, _, _ := strings.Cut(after, "\n")
		for _, h := range strings.Fields(line) {
			hosts[h] = true
		}
	}
	for setting, addr := range map[string]string{"source.addr": cfg.Source.Addr, "kafka.brokers": cfg.Kafka.Brokers[0], "checkpoint.addr": cfg.Checkpoint.Addr} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil || !hosts[host] {
			t.Errorf("%s %s: the certificates name %v (the certs job's gencerts arguments)", setting, addr, hosts)
		}
	}
	kafkaCmd := commandText(c.Services["kafka"].Command)
	if !strings.Contains(kafkaCmd, "SASL_SSL://"+cfg.Kafka.Brokers[0]) || !strings.Contains(kafkaCmd, "sasl.enabled.mechanisms="+cfg.Kafka.SASL.Mechanism) ||
		!strings.Contains(kafkaCmd, "name="+cfg.Kafka.SASL.Username+",") {
		t.Errorf("the broker does not advertise SASL_SSL://%s with %s for user %s:\n%s", cfg.Kafka.Brokers[0], cfg.Kafka.SASL.Mechanism, cfg.Kafka.SASL.Username, kafkaCmd)
	}
	redisCmd := commandText(c.Services["redis"].Command)
	_, port, _ := net.SplitHostPort(cfg.Checkpoint.Addr)
	if !strings.Contains(redisCmd, "--port 0 --tls-port "+port) || !strings.Contains(redisCmd, "--user "+cfg.Checkpoint.Username+" on") {
		t.Errorf("redis is not TLS-only on %s with user %s:\n%s", port, cfg.Checkpoint.Username, redisCmd)
	}
	if mysqlCmd := commandText(c.Services["mysql"].Command); !strings.Contains(mysqlCmd, "--require-secure-transport=ON") {
		t.Errorf("mysql does not require TLS: %s", mysqlCmd)
	}
}

// TestComposeConfigFile: each Compose file's daemon loads the
// configuration file it mounts together with its environment, as it
// starts: a key of the file that its environment's variable excludes
// (source.password beside CDC_OUTBOX_SOURCE_PASSWORD_FILE) would stop
// it with exit 2.
func TestComposeConfigFile(t *testing.T) {
	for _, name := range []string{"docker-compose.yml", "docker-compose.secure.yml"} {
		t.Run(name, func(t *testing.T) {
			c := readCompose(t, name)
			svc := c.Services["cdc-outbox"]
			file := ""
			for _, v := range svc.Volumes {
				s, _ := v.(string)
				if host, target, ok := strings.Cut(strings.TrimSuffix(s, ":ro"), ":"); ok && target == "/etc/cdc-outbox/config.yaml" {
					file = host
				}
			}
			if file == "" || !strings.Contains(commandText(svc.Command), "/etc/cdc-outbox/config.yaml") {
				t.Fatalf("the cdc-outbox service runs %q and mounts no file at /etc/cdc-outbox/config.yaml (volumes %v)", commandText(svc.Command), svc.Volumes)
			}
			// The secrets and certificates the service mounts, as files
			// here (Validate reads them).
			dir := t.TempDir()
			if err := testcerts.Generate(dir); err != nil {
				t.Fatal(err)
			}
			clearEnv(t)
			for k, v := range svc.Environment {
				switch {
				case strings.HasPrefix(v, "/run/secrets/"):
					v = dir + "/secret-" + path.Base(v)
					if err := os.WriteFile(v, []byte("secret\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				case strings.HasPrefix(v, "/certs/"):
					v = dir + "/" + path.Base(v)
				}
				t.Setenv(k, v)
			}
			cfg, err := Load(path.Join("..", file))
			if err != nil {
				t.Fatalf("%s with the service's environment: %v", file, err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("%s with the service's environment: %v", file, err)
			}
		})
	}
}
