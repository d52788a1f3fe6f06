//go:build integration

package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/lease"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
	"github.com/redis/go-redis/v9"
)

// The Redis Sentinel and Cluster set-ups of scripts/dev-stack.sh
// up-redis-ha: its env command exports CDC_REDIS_SENTINEL_* and
// CDC_REDIS_CLUSTER_ADDRS while they run. Without them these tests skip,
// unless CDC_REQUIRE_SECURE=1 (make test-secure) makes that a failure.
type redisHA struct {
	dir       string   // CDC_REDIS_HA_DIR: the nodes' directories
	master    string   // the Sentinels' master name
	sentinels []string // host:port
	nodes     []string // the Sentinel set-up's master and replica, host:port
	cluster   []string // the Cluster's masters, host:port
}

func redisHAStack(t *testing.T) *redisHA {
	t.Helper()
	h := &redisHA{dir: os.Getenv("CDC_REDIS_HA_DIR"), master: os.Getenv("CDC_REDIS_SENTINEL_MASTER")}
	split := func(k string) []string {
		if v := os.Getenv(k); v != "" {
			return strings.Split(v, ",")
		}
		return nil
	}
	h.sentinels, h.nodes, h.cluster = split("CDC_REDIS_SENTINEL_ADDRS"), split("CDC_REDIS_SENTINEL_NODES"), split("CDC_REDIS_CLUSTER_ADDRS")
	if h.dir == "" || h.master == "" || len(h.sentinels) == 0 || len(h.cluster) == 0 {
		if os.Getenv("CDC_REQUIRE_SECURE") == "1" {
			t.Fatal("CDC_REQUIRE_SECURE=1 but Redis Sentinel and Cluster are not up: scripts/dev-stack.sh up-redis-ha, then eval \"$(scripts/dev-stack.sh env)\"")
		}
		t.Skip("Redis Sentinel and Cluster not up (scripts/dev-stack.sh up-redis-ha; eval \"$(scripts/dev-stack.sh env)\")")
	}
	return h
}

// sentinelYAML / clusterYAML are the checkpoint settings of env.redisYAML.
func (h *redisHA) sentinelYAML() string {
	return fmt.Sprintf("sentinel-master: %s\n  addrs: [%s]", h.master, strings.Join(h.sentinels, ", "))
}

func (h *redisHA) clusterYAML() string {
	return fmt.Sprintf("cluster: true\n  addrs: [%s]", strings.Join(h.cluster, ", "))
}

// store opens the checkpoint Store of key through the Sentinels or the Cluster.
func (h *redisHA) store(t *testing.T, key string, cluster bool) *checkpoint.Store {
	cfg := checkpoint.DefaultConfig()
	cfg.Key, cfg.MirrorTopic = key, ""
	if cluster {
		cfg.Cluster, cfg.Addrs = true, h.cluster
	} else {
		cfg.SentinelMaster, cfg.Addrs = h.master, h.sentinels
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st := checkpoint.NewStore(cfg)
	t.Cleanup(func() { st.Close() })
	return st
}

// currentMaster is the master's address as the Sentinels report it.
func (h *redisHA) currentMaster(t *testing.T) string {
	t.Helper()
	s := redis.NewSentinelClient(&redis.Options{Addr: h.sentinels[0]})
	defer s.Close()
	a, err := s.GetMasterAddrByName(context.Background(), h.master).Result()
	if err != nil {
		t.Fatal(err)
	}
	return a[0] + ":" + a[1]
}

// waitCheckpoint waits until the checkpoint in st is at or past the end
// of the binlog now.
func waitCheckpoint(t *testing.T, e *env, st *checkpoint.Store) *checkpoint.Checkpoint {
	t.Helper()
	file, pos := e.masterPos()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cp, err := st.Load(context.Background())
		if err == nil && cp != nil && cp.File == file && cp.Pos >= pos {
			return cp
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %+v (%v) never reached %s:%d", cp, err, file, pos)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisHAClusterSlots: on the real Cluster, the checkpoint key, its
// lease and fence keys and SlotKey's keys hash to one slot (CLUSTER
// KEYSLOT) for a key without braces, with a hash tag, and with a '}'
// before its tag; the lease's three-key script and the fenced checkpoint
// write (two keys) run there without CROSSSLOT.
func TestRedisHAClusterSlots(t *testing.T) {
	h := redisHAStack(t)
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: h.cluster})
	defer rdb.Close()
	for _, key := range []string{"cdc-outbox:it:slots:" + runID, "cdc-outbox:{it-" + runID + "}:checkpoint", "x}y{t" + runID + "}:cp"} {
		t.Run(key, func(t *testing.T) {
			want, err := rdb.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{checkpoint.LeaseKey(key), checkpoint.FenceKey(key), checkpoint.SlotKey(key, "history")} {
				if got, err := rdb.ClusterKeySlot(ctx, k).Result(); err != nil || got != want {
					t.Fatalf("CLUSTER KEYSLOT %s = %d (%v), the checkpoint key %s is in %d", k, got, err, key, want)
				}
			}
			st := h.store(t, key, true)
			l, holder, _, err := lease.Acquire(ctx, st.Client(), key, lease.NewOwner(), 5*time.Second)
			if err != nil || l == nil {
				t.Fatalf("lease on the cluster: %v (holder %q)", err, holder)
			}
			f := l.Fence()
			if err := st.Save(ctx, checkpoint.Checkpoint{File: "mariadb-bin.000001", Pos: 4, Flavor: "mariadb"}, checkpoint.WriteOptions{Fence: &f}); err != nil {
				t.Fatalf("fenced write on the cluster: %v", err)
			}
			if cp, err := st.Load(ctx); err != nil || cp == nil || cp.Pos != 4 || cp.Token != l.Token() {
				t.Fatalf("load: %+v, %v", cp, err)
			}
			if ok, err := lease.Release(ctx, st.Client(), l); err != nil || !ok {
				t.Fatalf("release: %v %v", ok, err)
			}
		})
	}
}

// TestRedisHAClusterPublish: the publisher with its checkpoint (and its
// lease) on a 3-master Redis Cluster publishes every row; SIGKILLed once
// the checkpoint is up to date, it restarts from it without duplicates.
func TestRedisHAClusterPublish(t *testing.T) {
	h := redisHAStack(t)
	e := newEnv(t)
	e.redisYAML, e.noMirror = h.clusterYAML(), true
	st := h.store(t, e.key, true)
	p := e.start()
	w := e.writer()
	plan := workload.Generate(21, 0, 20, 600, 1, 20, 80)
	if err := produce(w, plan); err != nil {
		t.Fatal(err)
	}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute))
	waitCheckpoint(t, e, st)
	p.kill(t)

	e.start()
	more := workload.Generate(22, 1000, 10, 200, 1, 20, 80)
	if err := produce(w, more); err != nil {
		t.Fatal(err)
	}
	maps.Copy(plan.Last, more.Last)
	rep := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
	if rep.Duplicates != 0 {
		t.Fatalf("restart from the Cluster's checkpoint re-published %d records", rep.Duplicates)
	}
	waitCheckpoint(t, e, st)
}

// TestRedisHASentinelFailover: the publisher with its checkpoint behind
// Redis Sentinel keeps publishing while the master is SIGKILLed and a
// Sentinel promotes the replica: nothing is lost (a failover may repeat
// records, never drop them), the checkpoint advances on the new master,
// and a restart from it repeats nothing. The killed node is started
// again and rejoins as a replica.
func TestRedisHASentinelFailover(t *testing.T) {
	h := redisHAStack(t)
	e := newEnv(t)
	e.redisYAML, e.noMirror = h.sentinelYAML(), true
	st := h.store(t, e.key, false)
	p := e.start()
	w := e.writer()
	plan := workload.Generate(31, 0, 20, 400, 1, 20, 80)
	if err := produce(w, plan); err != nil {
		t.Fatal(err)
	}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute))
	waitCheckpoint(t, e, st)

	// The replica has every write (after an earlier run's failover the
	// old master rejoins as a replica only when a Sentinel converts it).
	if err := h.waitReplica("", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	old := h.currentMaster(t)
	_, port, _ := strings.Cut(old, ":")
	nodeDir := filepath.Join(h.dir, "sentinel", "node-"+port)
	b, err := os.ReadFile(filepath.Join(nodeDir, "redis.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restartNode(t, h, nodeDir, old) })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILLed the master %s (pid %d)", old, pid)
	// Rows committed while Redis has no master, then after the failover.
	during := workload.Generate(32, 1000, 10, 200, 1, 20, 80)
	if err := produce(w, during); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for h.currentMaster(t) == old {
		if time.Now().After(deadline) {
			t.Fatal("the Sentinels did not fail over within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the Sentinels promoted %s", h.currentMaster(t))
	after := workload.Generate(33, 2000, 10, 200, 1, 20, 80)
	if err := produce(w, after); err != nil {
		t.Fatal(err)
	}
	maps.Copy(plan.Last, during.Last)
	maps.Copy(plan.Last, after.Last)
	rep := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep)
	t.Logf("failover: %d duplicates", rep.Duplicates)
	waitCheckpoint(t, e, st)

	p.kill(t)
	e.start()
	last := workload.Generate(34, 3000, 10, 100, 1, 20, 80)
	if err := produce(w, last); err != nil {
		t.Fatal(err)
	}
	maps.Copy(plan.Last, last.Last)
	rep2 := e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute)
	requireOK(t, rep2)
	if rep2.Duplicates != rep.Duplicates {
		t.Fatalf("the restart from the new master's checkpoint re-published %d records", rep2.Duplicates-rep.Duplicates)
	}
}

// restartNode starts the killed Sentinel node again from its
// configuration (it comes back as a master) and waits until a Sentinel
// has turned it into a replica in sync (waitReplica).
func restartNode(t *testing.T, h *redisHA, dir, addr string) {
	out, err := exec.Command("redis-server", filepath.Join(dir, "redis.conf")).CombinedOutput()
	if err != nil {
		t.Errorf("restart %s: %v\n%s", addr, err, out)
		return
	}
	if err := h.waitReplica(addr, 60*time.Second); err != nil {
		t.Error(err)
	}
}

// waitReplica waits until the node at addr (any, when "") is a replica
// of the current master with its link up and its replication offset at
// the master's: a failover then promotes a node that has every write.
// A node restarted after a failover reports itself a master until a
// Sentinel converts it (about 10 s).
func (h *redisHA) waitReplica(addr string, timeout time.Duration) error {
	ctx := context.Background()
	s := redis.NewSentinelClient(&redis.Options{Addr: h.sentinels[0]})
	defer s.Close()
	deadline := time.Now().Add(timeout)
	for ; ; time.Sleep(200 * time.Millisecond) {
		m, err := s.GetMasterAddrByName(ctx, h.master).Result()
		if err != nil {
			return err
		}
		master := m[0] + ":" + m[1]
		var last []string
		for _, node := range h.nodes {
			if node == master || (addr != "" && node != addr) {
				continue
			}
			mi, rep := info(ctx, master), info(ctx, node)
			last = append(last, fmt.Sprintf("%s: role %s link %s offset %s (master %s offset %s)", node, rep["role"], rep["master_link_status"],
				rep["slave_repl_offset"], master, mi["master_repl_offset"]))
			got, err1 := strconv.ParseInt(rep["slave_repl_offset"], 10, 64)
			want, err2 := strconv.ParseInt(mi["master_repl_offset"], 10, 64)
			if rep["role"] == "slave" && rep["master_port"] == m[1] && rep["master_link_status"] == "up" && err1 == nil && err2 == nil && got >= want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no replica in sync with the master %s within %s: %v", master, timeout, last)
		}
	}
}

// info is INFO replication of addr as a map.
func info(ctx context.Context, addr string) map[string]string {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	out := map[string]string{}
	s, _ := c.Info(ctx, "replication").Result()
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			out[k] = v
		}
	}
	return out
}
