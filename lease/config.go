package lease

import (
	"errors"
	"fmt"
	"time"
)

// Config configures the leases (the ha section of the configuration).
type Config struct {
	// Enabled: sources are published under a lease (default true). Off,
	// one instance publishes without one, and goes on publishing while
	// Redis is unreachable; two such instances both publish (see
	// docs/ha.md).
	Enabled bool `yaml:"enabled" env:"ENABLED" doc:"Publish each source under a lease in Redis, so that instances with the same configuration stand by for each other (docs/ha.md); false: one instance only, unfenced." rule:"-"`
	// TTL is the lease's time to live in Redis: after a kill -9 the
	// source is taken over within TTL plus one Renew.
	TTL time.Duration `yaml:"lease-ttl" env:"LEASE_TTL" doc:"The lease's time to live: after a kill -9 a standby takes over within lease-ttl plus renew-interval." rule:"at least 1s"`
	// Renew is how often the owner renews (0: TTL/3), and how often a
	// standby tries to acquire.
	Renew time.Duration `yaml:"renew-interval" env:"RENEW_INTERVAL" doc:"How often the owner renews and a standby tries to acquire; 0: lease-ttl/3." rule:">= 0; renew-interval + margin less than lease-ttl"`
	// Margin: the owner stops publishing Margin before the lease could
	// expire in Redis (0: TTL/5), covering clock rate differences and the
	// time to stop.
	Margin time.Duration `yaml:"margin" env:"MARGIN" doc:"The owner stops publishing this long before its lease could expire; 0: lease-ttl/5." rule:">= 0; renew-interval + margin less than lease-ttl"`
	// ServerIDs is how many replica server_ids each source uses, from its
	// source.server-id: a term with token T registers as
	// server-id + T mod ServerIDs, so a new owner never shares the
	// server_id of an old owner whose connection lingers (1: always
	// source.server-id).
	ServerIDs int `yaml:"server-ids" env:"SERVER_IDS" doc:"How many replica server_ids each source uses from source.server-id, so that a new owner never shares an old owner's." rule:"1 to 4096"`
	// Group names the set of instances that share sources (the Redis key
	// of their liveness); instances with the same configuration share it.
	Group string `yaml:"group" env:"GROUP" doc:"The Redis key of the instances' liveness; instances with the same configuration share it." rule:"required"`
	// InstanceFile, when set, is a file on a local file system that this
	// instance alone uses (in Kubernetes: on an emptyDir of the pod). It
	// is locked (flock) while the process runs and keeps the process's id,
	// so that a process restarted after a crash (kill -9, OOM kill) takes
	// over the leases its dead predecessor still holds at once instead of
	// waiting up to TTL for them to expire (ClaimInstance). "": none.
	InstanceFile string `yaml:"instance-file" env:"INSTANCE_FILE" doc:"This instance's own file on local disk (Kubernetes: an emptyDir), so that a process restarted after a crash takes its predecessor's leases at once." rule:"-"`
	// HandOverAfter: an owner whose pipeline has been restarting for
	// longer than this (its source, Kafka or Redis unreachable from this
	// instance: health state degraded) releases the lease, when another
	// instance is alive, and waits one TTL before it tries to acquire
	// again, so that an instance that can reach them takes over. 0: never.
	HandOverAfter time.Duration `yaml:"handover-after" env:"HANDOVER_AFTER" doc:"An owner whose pipeline keeps failing this long releases the lease when another instance is alive; 0: never." rule:">= 0"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Enabled: true, TTL: 10 * time.Second, ServerIDs: 16, Group: "cdc-outbox:instances", HandOverAfter: 30 * time.Second}
}

// RenewEvery returns Renew, or TTL/3 when unset.
func (c Config) RenewEvery() time.Duration {
	if c.Renew > 0 {
		return c.Renew
	}
	return c.TTL / 3
}

// StopMargin returns Margin, or TTL/5 when unset.
func (c Config) StopMargin() time.Duration {
	if c.Margin > 0 {
		return c.Margin
	}
	return c.TTL / 5
}

// IDs is how many replica server_ids from source.server-id a source's
// publishers use: ServerIDs under leases, else 1. Other replicas of the
// same configuration (replay) take source.server-id + IDs().
func (c Config) IDs() int {
	if c.Enabled && c.ServerIDs > 1 {
		return c.ServerIDs
	}
	return 1
}

// Validate checks the configuration and returns all problems joined.
func (c *Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if c.TTL < time.Second {
		errs = append(errs, fmt.Errorf("ha.lease-ttl: %s: want at least 1s", c.TTL))
	}
	if c.Renew < 0 || c.Margin < 0 {
		errs = append(errs, fmt.Errorf("ha.renew-interval, ha.margin: want >= 0 (0: the default)"))
	} else if c.TTL >= time.Second && c.RenewEvery()+c.StopMargin() >= c.TTL {
		errs = append(errs, fmt.Errorf("ha.renew-interval %s + ha.margin %s: want less than ha.lease-ttl %s (the owner must be able to renew before it stops)",
			c.RenewEvery(), c.StopMargin(), c.TTL))
	}
	if c.ServerIDs < 1 || c.ServerIDs > 4096 {
		errs = append(errs, fmt.Errorf("ha.server-ids: %d: want 1 to 4096", c.ServerIDs))
	}
	if c.HandOverAfter < 0 {
		errs = append(errs, fmt.Errorf("ha.handover-after: %s: want >= 0 (0: never)", c.HandOverAfter))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("ha.group: required (the Redis key of the instances' liveness)"))
	}
	return errors.Join(errs...)
}
