package ha

import (
	"testing"

	"github.com/cdc-outbox/cdc-outbox/checkpoint"
)

// Sources on one Redis share a client (each with its own key); another
// Redis, database or login gets its own.
func TestStoresShareAClientPerRedis(t *testing.T) {
	var ss stores
	defer ss.close()
	cfg := func(key string, mod func(*checkpoint.Config)) checkpoint.Config {
		c := checkpoint.DefaultConfig()
		c.Addr, c.Key = "127.0.0.1:6379", key
		if mod != nil {
			mod(&c)
		}
		return c
	}
	a, b := ss.get(cfg("k:a", nil)), ss.get(cfg("k:b", nil))
	if a.Client() != b.Client() || a.Key() != "k:a" || b.Key() != "k:b" {
		t.Fatalf("two keys on one Redis: clients %p %p, keys %s %s", a.Client(), b.Client(), a.Key(), b.Key())
	}
	for name, mod := range map[string]func(*checkpoint.Config){
		"addr":     func(c *checkpoint.Config) { c.Addr = "127.0.0.1:6380" },
		"db":       func(c *checkpoint.Config) { c.DB = 1 },
		"username": func(c *checkpoint.Config) { c.Username = "cdc" },
		"tls":      func(c *checkpoint.Config) { c.TLS.Enabled = true },
		"addrs":    func(c *checkpoint.Config) { c.Cluster, c.Addrs = true, []string{"127.0.0.1:7000"} },
	} {
		if o := ss.get(cfg("k:c", mod)); o.Client() == a.Client() {
			t.Errorf("another %s shares the client", name)
		}
	}
	if len(ss.byConn) != 6 {
		t.Errorf("%d clients, want 6", len(ss.byConn))
	}
}
