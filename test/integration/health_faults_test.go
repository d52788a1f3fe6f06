//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/redis/go-redis/v9"
)

// pauseProxy is a TCP proxy the test owns between one publisher and
// Redis. While paused, nothing is forwarded either way and new
// connections are accepted but wait too; on resume everything held is
// delivered, as after a kill -STOP / kill -CONT of redis-server for this
// publisher alone (Redis then executes the late commands).
// Cut (setDown) closes every connection and refuses new ones (accepted,
// then closed at once), as a server that is down.
type pauseProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	down   bool
	closed bool
	conns  []net.Conn
	// atQuery: pause when a client sends its next COM_QUERY (a packet of
	// sequence 0 starting with 0x03: a statement, after the handshake;
	// plaintext MySQL protocol only), before forwarding it.
	atQuery bool
}

// pauseAtQuery pauses p when a client next sends a statement: a server
// frozen after the handshake, with a statement in flight.
func (p *pauseProxy) pauseAtQuery() {
	p.mu.Lock()
	p.atQuery = true
	p.mu.Unlock()
}

// query pauses p if it waits for a statement and b, read from a client,
// starts with one (a COM_QUERY packet).
func (p *pauseProxy) query(b []byte) {
	if len(b) < 5 || b[3] != 0 || b[4] != 0x03 {
		return
	}
	p.mu.Lock()
	if p.atQuery {
		p.atQuery, p.paused = false, true
	}
	p.mu.Unlock()
}

func newPauseProxy(t *testing.T, target string) *pauseProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pauseProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.closed, p.paused = true, false
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	return p
}

func (p *pauseProxy) addr() string { return p.ln.Addr().String() }

func (p *pauseProxy) setPaused(v bool) {
	p.mu.Lock()
	p.paused = v
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *pauseProxy) setDown(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = v
	if v {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// track keeps c to close at a cut; false (c closed) while down.
func (p *pauseProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

// wait blocks while paused.
func (p *pauseProxy) wait() {
	p.mu.Lock()
	for p.paused && !p.closed {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

func (p *pauseProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			p.wait()
			if !p.track(c) {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			if !p.track(up) {
				c.Close()
				return
			}
			go p.pipe(c, up, true)
			go p.pipe(up, c, false)
		}()
	}
}

// pipe forwards src to dst; fromClient: src is the client.
func (p *pauseProxy) pipe(src, dst net.Conn, fromClient bool) {
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if fromClient {
			p.query(buf[:n])
		}
		p.wait()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a closed connection: both ends are closed
			return
		}
	}
}

// metric returns the value of the series whose line starts with name
// (e.g. `cdc_outbox_standby{source="default"}`) on addr's /metrics, or ""
// when absent.
func metric(addr, name string) string {
	_, body := httpGet(addr, "/metrics")
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`)
	if m := re.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// The owner cut from Redis (every byte held, both ways) for longer than
// its lease while a standby can reach Redis (issue 30 item 1): the owner
// stops publishing before the standby takes over; once Redis answers it
// again, its late checkpoint write is fenced and it becomes a standby
// within the bound (it used to hang for good, /readyz 200 streaming,
// cdc_outbox_standby 0, SIGTERM ignored), and it answers SIGTERM with
// exit 0. Nothing is lost.
func TestHARedisPauseOwner(t *testing.T) {
	e := newEnv(t)
	proxy := newPauseProxy(t, redisAddr)
	e.redisYAML = "addr: " + proxy.addr()
	a := e.launch()
	ida := owner(t, a) // read its configuration: b's may differ
	e.waitLog(a, "streaming binlog", time.Minute)
	e.redisYAML = ""
	b := e.launch()
	idb := owner(t, b)
	waitReady(t, b, "standby", 30*time.Second)
	plan := workload.Generate(3001, 0, 100, 40000, 1, 5, 200) // small transactions: many rounds, each acknowledged apart
	pr := e.produceBackground(plan, 2000)
	e.waitPublished(plan, 2000, time.Minute)

	at := time.Now()
	proxy.setPaused(true)
	took := waitHolds(t, idb, 1, at, haBound, e.key)
	e.waitLog(a, "lease lost", haBound)
	// Long enough for the acknowledgements' buffer to fill while the old
	// owner's committer waits on the paused Redis.
	time.Sleep(time.Until(at.Add(12 * time.Second))) // the fault's length, as in the report
	proxy.setPaused(false)
	resumed := time.Now()
	t.Logf("Redis paused for the owner %s for %s; the standby %s took over after %s", ida, time.Since(at).Round(time.Millisecond), idb, took.Round(time.Millisecond))

	addr := metricsAddrOf(t, a)
	const bound = 20 * time.Second
	for deadline := time.Now().Add(bound); ; time.Sleep(100 * time.Millisecond) {
		code, body := httpGet(addr, "/readyz")
		standby := metric(addr, `cdc_outbox_standby{source="default"}`)
		if code == 200 && strings.Contains(body, `"standby"`) && standby == "1" {
			t.Logf("the old owner is a standby %s after Redis answered again: %s", time.Since(resumed).Round(time.Millisecond), body)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old owner is not a standby %s after Redis answered: /readyz %d %s, cdc_outbox_standby %q", bound, code, body, standby)
		}
	}
	if h := holders(e.key); h[idb] != 1 {
		t.Fatalf("leases %v, want the new owner %s to keep it", h, idb)
	}
	rep := e.finish("HA, Redis paused for the owner", pr, took)
	t.Logf("%d events, %d duplicates", plan.Total, rep.Duplicates)
	if code := a.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("the old owner exited %d after SIGTERM, want 0", code)
	}
}

// /readyz, the per-source state metric and cdc_outbox_ready follow the
// pipeline, with and without HA (issue 30 items 5 and 10): 200 streaming
// once the binlog streams (with ha.enabled false it stayed 503
// "connecting to the source" for ever), 503 degraded while the pipeline
// restarts because the database is down (it stayed 200), 200 streaming
// again once it is back.
func TestReadinessFollowsPipeline(t *testing.T) {
	for _, noHA := range []bool{true, false} {
		t.Run(map[bool]string{true: "unfenced", false: "ha"}[noHA], func(t *testing.T) {
			e := newEnv(t)
			e.noHA = noHA
			db := newPauseProxy(t, mysqlAddr)
			e.sourceAddr = db.addr()
			p := e.start()
			waitReady(t, p, "streaming", 30*time.Second)
			addr := metricsAddrOf(t, p)
			if v := metric(addr, `cdc_outbox_source_state{source="default",state="streaming"}`); v != "1" {
				t.Errorf("cdc_outbox_source_state streaming = %q, want 1", v)
			}
			if v := metric(addr, "cdc_outbox_ready"); v != "1" {
				t.Errorf("cdc_outbox_ready = %q, want 1", v)
			}
			db.setDown(true)
			var code int
			var body string
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				code, body = httpGet(addr, "/readyz")
				if code == 503 && strings.Contains(body, `"degraded"`) && strings.Contains(body, "restarting") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/readyz with the database down: %d %s, want 503 degraded (restarting)", code, body)
				}
			}
			if v := metric(addr, `cdc_outbox_source_state{source="default",state="degraded"}`); v != "1" {
				t.Errorf("cdc_outbox_source_state degraded = %q, want 1", v)
			}
			if v := metric(addr, "cdc_outbox_ready"); v != "0" {
				t.Errorf("cdc_outbox_ready = %q, want 0", v)
			}
			db.setDown(false)
			waitReady(t, p, "streaming", time.Minute)
			if code := p.stop(t, 30*time.Second); code != 0 {
				t.Fatalf("exit %d after SIGTERM", code)
			}
		})
	}
}

// The owner cannot reach the database (its packets held, not refused)
// while a standby can (issue 30 item 3b): after ha.handover-after of
// pipeline restarts the owner releases the lease and the standby takes
// over; nothing is lost. It used to keep the lease: 41 s without a
// publisher in the report, for as long as the cut lasted.
func TestHAHandOverWhenSourceUnreachable(t *testing.T) {
	e := newEnv(t)
	e.haExtra = "  handover-after: 4s\n"
	db := newPauseProxy(t, mysqlAddr)
	e.sourceAddr = db.addr()
	a := e.launch()
	ida := owner(t, a)
	e.waitLog(a, "streaming binlog", time.Minute)
	e.sourceAddr = ""
	b := e.launch()
	idb := owner(t, b)
	waitReady(t, b, "standby", 30*time.Second)
	plan := workload.Generate(3002, 0, 100, 20000, 1, 20, 200)
	pr := e.produceBackground(plan, 1000)
	e.waitPublished(plan, 1000, time.Minute)
	at := time.Now()
	db.setPaused(true) // a's packets to the database are held from now on
	t.Cleanup(func() { db.setPaused(false) })
	// read-timeout 5 s, then restarts for handover-after 4 s, then the
	// release; the standby acquires within a renew interval.
	const bound = 30 * time.Second
	took := waitHolds(t, idb, 1, at, bound, e.key)
	e.waitLog(a, "handing the source over", 5*time.Second)
	t.Logf("the owner %s cut from the database; the standby %s took over after %s", ida, idb, took.Round(time.Millisecond))
	// The old owner: degraded during its cool-down (one lease TTL), then
	// a standby; never streaming.
	addr := metricsAddrOf(t, a)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, body := httpGet(addr, "/readyz")
		if (code == 503 && strings.Contains(body, "handed the source over")) || (code == 200 && strings.Contains(body, `"standby"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz of the old owner: %d %s, want 503 handed over or 200 standby", code, body)
		}
	}
	rep := e.finish("HA, owner cut from the database (packets held)", pr, took)
	t.Logf("%d events, %d duplicates", plan.Total, rep.Duplicates)
	if h := holders(e.key); h[idb] != 1 {
		t.Fatalf("leases %v, want %s to keep it", h, idb)
	}
}

// logTimes returns the times of the lines of the JSON log at path whose
// msg starts with prefix.
func logTimes(t *testing.T, path, prefix string) []time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, line := range strings.Split(string(b), "\n") {
		var l struct {
			TS  string `json:"ts"`
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, prefix) {
			at, err := time.Parse("2006-01-02T15:04:05.000Z0700", l.TS)
			if err != nil {
				t.Fatalf("%s: ts %q: %v", path, l.TS, err)
			}
			out = append(out, at)
		}
	}
	return out
}

// The lease key lost right after the owner's renewal (a Redis failover to
// a replica that missed it; emulated by DEL) while the owner publishes
// (issue 30 item 3): no instance takes the source until the old owner,
// whose next renewal finds the key gone, has stopped: the standby waits
// until the lost lease would have expired (the old owner itself may take
// it again at once, as its own term has stopped); before, the standby
// acquired at its next try and both published (0.35 s measured in the
// report). Nothing is lost.
func TestHALeaseKeyVanished(t *testing.T) {
	e := newEnv(t)
	a := e.start()
	ida := owner(t, a)
	waitHolds(t, ida, 1, time.Now(), 10*time.Second, e.key)
	b := e.launch()
	idb := owner(t, b)
	waitReady(t, b, "standby", 30*time.Second)
	// The owner idle: no checkpoint write finds the key gone before its
	// next renewal (a publishing owner's write, every checkpoint.interval,
	// is refused by the fence at once).
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ctx := context.Background()
	// Right after a renewal: the PTTL jumps up.
	lk := checkpoint.LeaseKey(e.key)
	prev := rdb.PTTL(ctx, lk).Val()
	for deadline := time.Now().Add(10 * time.Second); ; {
		cur := rdb.PTTL(ctx, lk).Val()
		if cur > prev+100*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no renewal of the owner's lease seen in 10 s")
		}
		prev = cur
		time.Sleep(5 * time.Millisecond)
	}
	at := time.Now()
	if n := rdb.Del(ctx, lk).Val(); n != 1 {
		t.Fatalf("DEL %s = %d", lk, n)
	}
	e.waitLog(a, "lease lost", haBound)
	var held map[string]int
	for deadline := time.Now().Add(haBound); len(held) == 0; time.Sleep(20 * time.Millisecond) {
		if held = holders(e.key); time.Now().After(deadline) {
			t.Fatalf("nobody holds the lease %s after its key was deleted", haBound)
		}
	}
	took := time.Since(at)
	lost := logTimes(t, a.log, "lease lost")[0]
	t.Logf("lease key deleted; the owner %s stopped %s later; the lease held again %s after the deletion: %v (standby %s)",
		ida, lost.Sub(at).Round(time.Millisecond), took.Round(time.Millisecond), held, idb)
	// The standby's acquisitions after the deletion came after the old
	// owner stopped (the old owner's own comes after its term ended).
	for _, acquired := range logTimes(t, b.log, "lease acquired") {
		if !acquired.After(lost) {
			t.Fatalf("the standby acquired the source at %s, before the old owner stopped at %s: both could publish",
				acquired.Format(time.RFC3339Nano), lost.Format(time.RFC3339Nano))
		}
	}
	plan := workload.Generate(3003, 0, 100, 5000, 1, 20, 200)
	pr := e.produceBackground(plan, 1500)
	rep := e.finish("HA, the lease key lost after a renewal", pr, took)
	t.Logf("%d events, %d duplicates", plan.Total, rep.Duplicates)
}

// metricFloat is metric parsed as a float (NaN when absent).
func metricFloat(t *testing.T, addr, name string) float64 {
	t.Helper()
	v := metric(addr, name)
	if v == "" {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", name, v, err)
	}
	return f
}

// Lag that means something (issue 30 item 5): a frozen source (its
// packets held: no event, no heartbeat) is not "caught up, 0 s behind"
// for a read timeout, and after the pipeline restart its lag counts from
// when it was last heard, not from the restart; source_heard_age_seconds
// grows throughout. A restart on an idle server reports no lag once the
// dump starts (it reported the downtime).
func TestLagFrozenSourceAndIdleRestart(t *testing.T) {
	e := newEnv(t)
	e.noHA = true
	db := newPauseProxy(t, mysqlAddr)
	e.sourceAddr = db.addr()
	p := e.start()
	addr := metricsAddrOf(t, p)
	const behind, heard = `cdc_outbox_seconds_behind_source{source="default"}`, `cdc_outbox_source_heard_age_seconds{source="default"}`
	// Caught up (other tests' traffic on a shared server may keep it just
	// behind: under a second then).
	for deadline := time.Now().Add(30 * time.Second); metricFloat(t, addr, behind) >= 1 || !(metricFloat(t, addr, heard) < 2); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never caught up: behind %v, heard %v s ago", metricFloat(t, addr, behind), metricFloat(t, addr, heard))
		}
	}
	at := time.Now()
	db.setPaused(true)
	// heartbeat-period 1 s: stale after 3 s; read-timeout 5 s restarts.
	for deadline := at.Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if b := metricFloat(t, addr, behind); b >= 1 {
			t.Logf("frozen: %.0f s behind %s after the freeze, before the read timeout", b, time.Since(at).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			_, body := httpGet(addr, "/metrics")
			t.Fatalf("frozen source still 0 s behind %s after the freeze:\n%s", time.Since(at), grepLines(body, "cdc_outbox_source_", "cdc_outbox_seconds_behind"))
		}
	}
	e.waitLog(p, "pipeline stopped; restarting", 30*time.Second)
	time.Sleep(time.Until(at.Add(9 * time.Second))) // past the restart, still frozen
	b, h := metricFloat(t, addr, behind), metricFloat(t, addr, heard)
	if b < 7.5 || h < 7.5 {
		t.Fatalf("9 s after the freeze, after the restart: %v s behind, heard %v s ago; want both >= 8 (counted from the last heartbeat, not from the restart)", b, h)
	}
	db.setPaused(false)
	for deadline := time.Now().Add(30 * time.Second); metricFloat(t, addr, behind) != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not caught up again after the freeze: %v", metricFloat(t, addr, behind))
		}
	}
	// A restart on the idle server: no lag once streaming.
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	time.Sleep(4 * time.Second) // the downtime the old code reported as lag
	p = e.start()
	addr = metricsAddrOf(t, p)
	// 0 on an idle server (the dump starts at the end of the binlog, with
	// everything acknowledged); other tests' traffic on a shared server
	// may leave it a moment behind, but never the downtime (4 s and more).
	if b := metricFloat(t, addr, behind); !(b < 3) {
		t.Fatalf("right after a restart on an idle server: %v s behind, want 0 (not the downtime)", b)
	}
}
