package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/redis/go-redis/v9"
)

// The ACL rules that checkpoint.ACLRules names (in the error of a user
// lacking a permission, and in docs/security.md) are enough for
// everything a publisher does in Redis: the lease scripts and the
// instances' heartbeat, the fenced checkpoint writes, reads and checks.
// A user with only them (and every command else refused) runs it all,
// for a plain key and for one with a hash tag (Redis Cluster).
func TestACLRulesSuffice(t *testing.T) {
	admin := startRedis(t)
	ctx := context.Background()
	const group = "cdc-outbox:acl-instances"
	for _, key := range []string{"cdc-outbox:checkpoint:acl", "cdc-outbox:{acl}:checkpoint"} {
		t.Run(key, func(t *testing.T) {
			rules := checkpoint.ACLRules(key, group)
			args := []any{"ACL", "SETUSER", "publisher", "reset", "on", ">pw"}
			for _, r := range strings.Fields(rules) {
				args = append(args, r)
			}
			if err := admin.Do(ctx, args...).Err(); err != nil {
				t.Fatalf("ACL SETUSER publisher %s: %v", rules, err)
			}
			rdb := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: "publisher", Password: "pw", MaxRetries: -1})
			defer rdb.Close()
			must := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s as a user with %q: %v", what, rules, err)
				}
			}
			_, err := Heartbeat(ctx, rdb, group, "a", time.Second)
			must("Heartbeat", err)
			l, _, _, err := Acquire(ctx, rdb, key, "a", time.Second)
			must("Acquire", err)
			if l == nil {
				t.Fatal("Acquire: not acquired")
			}
			_, _, _, err = Acquire(ctx, rdb, key, "b", time.Second)
			must("Acquire while held", err)
			_, err = Holder(ctx, rdb, key)
			must("Holder", err)
			_, err = LastToken(ctx, rdb, key)
			must("LastToken", err)

			s := checkpoint.NewStore(checkpoint.Config{Addr: admin.Options().Addr, Username: "publisher", Password: "pw", Key: key, Timeout: time.Second})
			defer s.Close()
			w := checkpoint.NewWriter(s, checkpoint.Source{ServerID: 1}, nil)
			f := l.Fence()
			w.SetFence(&f)
			_, err = checkpoint.Apply(ctx, w, checkpoint.Intent{Why: "test", At: binlog.Position{File: "b.000001", Pos: 4}})
			must("fenced Write", err)
			_, err = s.Load(ctx)
			must("Load", err)
			_, err = s.Persistent(ctx)
			must("Persistent", err)
			_, _, err = s.MaxMemoryPolicy(ctx)
			must("MaxMemoryPolicy", err)
			_, err = s.TTL(ctx)
			must("TTL", err)
			must("SaveStop", s.SaveStop(ctx, checkpoint.Stop{Reason: "r"}))
			_, err = s.LoadStop(ctx)
			must("LoadStop", err)
			must("ClearStop", s.ClearStop(ctx))
			ok, err := Release(ctx, rdb, l)
			must("Release", err)
			if !ok {
				t.Fatal("Release: not released")
			}
			must("Leave", Leave(ctx, rdb, group, "a"))
			_, err = s.Delete(ctx, checkpoint.WriteOptions{})
			must("Delete", err)
		})
	}
}

// A user the ACL refuses a lease command (here the scripts) stops with
// checkpoint.ErrAuth (fatal) naming the rules, not a retried error.
func TestACLRefusalNamesRules(t *testing.T) {
	admin := startRedis(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "publisher", "reset", "on", ">pw", "~*", "+get", "+set", "+ping").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: "publisher", Password: "pw", MaxRetries: -1})
	defer rdb.Close()
	_, err := Heartbeat(ctx, rdb, "cdc-outbox:acl-instances", "a", time.Second)
	if !errors.Is(err, checkpoint.ErrAuth) || !strings.Contains(err.Error(), "ACL SETUSER <user> ~<checkpoint.key>") {
		t.Fatalf("Heartbeat without +evalsha = %v, want checkpoint.ErrAuth naming the ACL rules", err)
	}
	_, _, _, err = Acquire(ctx, rdb, "cdc-outbox:checkpoint:acl", "a", time.Second)
	if !errors.Is(err, checkpoint.ErrAuth) || !strings.Contains(err.Error(), "+evalsha") {
		t.Fatalf("Acquire without +evalsha = %v, want checkpoint.ErrAuth naming the ACL rules", err)
	}
}
