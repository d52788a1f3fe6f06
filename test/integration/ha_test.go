//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/redis/go-redis/v9"
)

// The HA tests run 2 instances with the same configuration (ha.lease-ttl
// 3s, renewed every 1s, stopping 0.6s before expiry) under a continuous
// load, and check every event against what was committed.
const haBound = 10 * time.Second // failover bound (issue 16: ≤ 10 s)

// owner returns the instance id a publisher logged at start.
func owner(t *testing.T, p *publisher) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		f, err := os.Open(p.log)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l struct {
				Msg   string `json:"msg"`
				Owner string `json:"owner"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && strings.HasPrefix(l.Msg, "instance starting") {
				f.Close()
				return l.Owner
			}
		}
		f.Close()
	}
	t.Fatalf("no instance id in %s", p.log)
	return ""
}

// holders returns, per instance id, how many of keys' leases it holds.
func holders(keys ...string) map[string]int {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	out := map[string]int{}
	for _, k := range keys {
		h, err := rdb.Get(context.Background(), checkpoint.LeaseKey(k)).Result()
		if err == nil {
			id, _, _ := strings.Cut(h, " ")
			out[id]++
		}
	}
	return out
}

// waitHolds waits until id holds n of keys' leases and returns how long
// that took since since.
func waitHolds(t *testing.T, id string, n int, since time.Time, timeout time.Duration, keys ...string) time.Duration {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if holders(keys...)[id] == n {
			return time.Since(since)
		}
	}
	t.Fatalf("%s does not hold %d of the leases within %s: %v", id, n, timeout, holders(keys...))
	return 0
}

// Two instances, the owner killed (-9), paused (SIGSTOP longer than the
// lease), its replication connection killed, or Redis restarted: the
// source goes on within the bound with nothing lost or reordered; the
// duplicates are counted.
func TestHAFailover(t *testing.T) {
	for i, fault := range []string{"kill9", "sigstop", "cut_mysql", "redis_restart"} {
		t.Run(fault, func(t *testing.T) {
			e := newEnv(t)
			a := e.start()
			ida := owner(t, a)
			waitHolds(t, ida, 1, time.Now(), 10*time.Second, e.key)
			b := e.launch()
			idb := owner(t, b)
			e.waitLog(b, "standing by", 30*time.Second)
			plan := workload.Generate(uint64(1600+i), 0, 100, 6000, 1, 200, 200)
			pr := e.produceBackground(plan, 1500)
			e.waitPublished(plan, 500, time.Minute)
			at := time.Now()
			var rec time.Duration
			switch fault {
			case "kill9":
				a.kill(t)
				base := endOffsets(e.topic) // the rows committed from now on only b can publish
				took := waitHolds(t, idb, 1, at, haBound, e.key)
				e.waitLog(b, "streaming binlog", haBound)
				rec = waitGrowthFrom(e.topic, base, at, haBound)
				t.Logf("kill -9: lease taken over after %s, publishing again after %s", took.Round(time.Millisecond), rec.Round(time.Millisecond))
			case "sigstop":
				before := e.checkpoint()
				_ = a.cmd.Process.Signal(syscall.SIGSTOP)
				t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) })
				base := endOffsets(e.topic) // the rows committed from now on only b can publish
				took := waitHolds(t, idb, 1, at, haBound, e.key)
				e.waitLog(b, "streaming binlog", haBound)
				rec = waitGrowthFrom(e.topic, base, at, haBound)
				t.Logf("SIGSTOP: lease taken over after %s, publishing again after %s", took.Round(time.Millisecond), rec.Round(time.Millisecond))
				// The new owner's first checkpoint, then the old owner
				// resumes: it must never write one again.
				var taken *checkpoint.Checkpoint
				for deadline := time.Now().Add(haBound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if cp := e.checkpoint(); cp != nil && cp.Owner == idb {
						taken = cp
						break
					}
				}
				if taken == nil || taken.Token <= before.Token {
					t.Fatalf("no checkpoint of the new owner with a greater token: before %+v, now %+v", before, e.checkpoint())
				}
				_ = a.cmd.Process.Signal(syscall.SIGCONT)
				e.waitLog(a, "lease lost", 10*time.Second)
				for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
					if cp := e.checkpoint(); cp.Owner != idb || cp.Token != taken.Token {
						t.Fatalf("checkpoint written by the resumed old owner: %+v", cp)
					}
				}
				if logHas(a.log, `"msg":"checkpoint written"`) {
					t.Fatal("the resumed old owner logged a checkpoint write")
				}
			case "cut_mysql":
				if e.killDumpThreads() == 0 {
					t.Fatal("no binlog dump thread to kill")
				}
				rec = waitGrowth(e.topic, at, haBound)
				t.Logf("replication connection killed: publishing again after %s (the owner reconnects, keeping its lease)", rec.Round(time.Millisecond))
			case "redis_restart":
				stack(t, "restart-redis")
				rec = waitGrowth(e.topic, at, haBound)
				t.Logf("Redis restarted: publishing again after %s, leases %v", rec.Round(time.Millisecond), holders(e.key))
			}
			if rec < 0 {
				t.Fatalf("%s: nothing published within %s", fault, haBound)
			}
			rep := e.finish("HA, 2 instances: "+fault, pr, rec)
			t.Logf("%s: %d events, %d duplicates", fault, plan.Total, rep.Duplicates)
		})
	}
}

// Four sources over two instances: each holds two; one killed (-9), the
// other holds all four within the bound, and every source's events are
// complete and in order.
func TestHASpread(t *testing.T) {
	envs := make([]*env, 4)
	var src strings.Builder
	keys := make([]string, 4)
	for i := range envs {
		envs[i] = newEnvNamed(t, fmt.Sprintf("%s_%d", t.Name(), i))
		keys[i] = envs[i].key
		fmt.Fprintf(&src, "  - name: s%d\n    source: {server-id: %d, table: %s}\n    router: {topic: %s}\n    checkpoint: {key: %q}\n",
			i, envs[i].serverID, envs[i].outbox, envs[i].topic, envs[i].key)
	}
	e := envs[0]
	e.configText = fmt.Sprintf(`source:
  addr: %s
  user: %s
  password: %s
  schema: %s
  start: latest
  heartbeat-period: 1s
  read-timeout: 5s
kafka:
  brokers: [%s]
checkpoint:
  addr: %s
  interval: 200ms
log:
  format: json
shutdown-timeout: 10s
retry-backoff-max: 2s
ha:
  lease-ttl: 3s
  group: %q
sources:
%s`, mysqlAddr, mysqlUser, mysqlPass, mysqlDB, strings.Join(brokers, ","), redisAddr, e.key+":instances", src.String())
	a, b := e.launch(), e.launch()
	ida, idb := owner(t, a), owner(t, b)
	began := time.Now()
	waitHolds(t, ida, 2, began, time.Minute, keys...)
	waitHolds(t, idb, 2, began, time.Minute, keys...)
	t.Logf("spread: %v after %s", holders(keys...), time.Since(began).Round(time.Millisecond))
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for id, n := range holders(keys...) {
			if n > 2 {
				t.Fatalf("%s holds %d of 4 sources while 2 instances are alive", id, n)
			}
		}
	}
	prs := make([]*producer, 4)
	for i, se := range envs {
		// streaming: the owner logged it for each source
		prs[i] = se.produceBackground(workload.Generate(uint64(1700+i), 0, 50, 3000, 1, 100, 100), 600)
	}
	for i, se := range envs {
		se.waitPublished(prs[i].plan, 200, time.Minute)
	}
	at := time.Now()
	a.kill(t)
	took := waitHolds(t, idb, 4, at, haBound, keys...)
	t.Logf("kill -9 of one of 2 instances: the survivor holds all 4 sources after %s", took.Round(time.Millisecond))
	for i, se := range envs {
		rep := se.finish("HA, 4 sources over 2 instances, one killed", prs[i], took)
		t.Logf("s%d: %d events, %d duplicates", i, prs[i].plan.Total, rep.Duplicates)
	}
}

// check FAILs an evicting maxmemory-policy (allkeys-lru with a maxmemory)
// and passes volatile-lru, which spares the checkpoint (no TTL).
func TestCheckEvictionPolicy(t *testing.T) {
	e := newEnv(t)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() }) // after the restore below (cleanups run last first)
	ctx := context.Background()
	old, _ := rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	oldMax, _ := rdb.ConfigGet(ctx, "maxmemory").Result()
	t.Cleanup(func() {
		rdb.ConfigSet(ctx, "maxmemory-policy", old["maxmemory-policy"])
		rdb.ConfigSet(ctx, "maxmemory", oldMax["maxmemory"])
	})
	if err := rdb.ConfigSet(ctx, "maxmemory", "1gb").Err(); err != nil {
		t.Fatal(err)
	}
	rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru")
	out, code := e.cli(nil, "check")
	if code != 1 || !strings.Contains(out, "FAIL  redis") || !strings.Contains(out, "maxmemory-policy allkeys-lru may evict the checkpoint key") {
		t.Fatalf("check under allkeys-lru: exit %d\n%s", code, out)
	}
	rdb.ConfigSet(ctx, "maxmemory-policy", "volatile-lru")
	out, code = e.cli(nil, "check")
	if code != 0 || !strings.Contains(out, "maxmemory-policy volatile-lru does not evict the checkpoint") {
		t.Fatalf("check under volatile-lru: exit %d\n%s", code, out)
	}
}

// A checkpoint key deleted under a running publisher (FLUSHALL, eviction)
// is logged as an error and written again; a second publisher writing
// the key without a lease (ha.enabled: false) behind the first one's
// position is refused and stops with both positions named.
func TestCheckpointVanishedAndBackwards(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	plan := workload.Generate(1800, 0, 50, 2000, 1, 50, 50)
	pr := e.produceBackground(plan, 1000)
	e.waitPublished(plan, 300, time.Minute)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	rdb.Del(context.Background(), e.key)
	e.waitLog(p, "checkpoint key vanished under the running publisher", 10*time.Second)
	e.finish("checkpoint key deleted under the publisher", pr, -1)
	if e.checkpoint() == nil {
		t.Fatal("checkpoint not written again")
	}
	p.stop(t, 20*time.Second)
	// An old position written behind the stored one by a writer of the
	// same server: refused.
	cp := e.checkpoint()
	old := *cp
	old.Pos = 4
	s := checkpoint.NewStore(checkpoint.Config{Addr: redisAddr, Key: e.key, Timeout: 2 * time.Second})
	defer s.Close()
	err := s.Save(context.Background(), old, checkpoint.WriteOptions{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s:%d", cp.File, cp.Pos)) || !strings.Contains(err.Error(), fmt.Sprintf("%s:4", cp.File)) {
		t.Fatalf("backwards write: %v", err)
	}
	if now := e.checkpoint(); now.Pos != cp.Pos {
		t.Fatalf("refused write moved the checkpoint to %d", now.Pos)
	}
}

// Wrong Redis credentials (WRONGPASS) stop the publisher at once
// (exit 1) naming the settings to fix, instead of retrying for ever.
func TestRedisWrongPassword(t *testing.T) {
	e := newEnv(t)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	user := "it-" + runID
	if err := rdb.Do(ctx, "ACL", "SETUSER", user, "on", ">right-"+runID, "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Do(ctx, "ACL", "DELUSER", user) })
	began := time.Now()
	out, code := e.cli([]string{"CDC_OUTBOX_CHECKPOINT_USERNAME=" + user, "CDC_OUTBOX_CHECKPOINT_PASSWORD=wrong-" + runID}, "run")
	if code != 1 || !strings.Contains(out, "checkpoint.password") || strings.Contains(out, "wrong-"+runID) {
		t.Fatalf("run with a wrong Redis password: exit %d after %s, want 1 naming checkpoint.password (and not the password):\n%s", code, time.Since(began), tail(out, 10))
	}
	t.Logf("exit 1 after %s", time.Since(began).Round(time.Millisecond))
}

// SIGTERM while Redis is down (no lease: ha.enabled false): the final
// checkpoint write fails, and the process exits 1, not 0.
func TestTermFinalCheckpointFails(t *testing.T) {
	e := newEnv(t)
	e.noHA = true
	p := e.start()
	plan := workload.Generate(1900, 0, 50, 1000, 1, 50, 50)
	pr := e.produceBackground(plan, 1000)
	e.waitPublished(plan, 200, time.Minute)
	stack(t, "stop-redis")
	t.Cleanup(func() { stack(t, "start-redis") })
	e.waitPublished(plan, 600, time.Minute) // acknowledged, not stored
	if code := p.stop(t, 30*time.Second); code != 1 || !logHas(p.log, "stopping: ") {
		b, _ := os.ReadFile(p.log)
		t.Fatalf("exit %d after SIGTERM with the final checkpoint write failing, want 1:\n%s", code, tail(string(b), 10))
	}
	stack(t, "start-redis")
	e.start()
	e.finish("SIGTERM with Redis down (final write fails), restart", pr, -1)
}
