//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/lease"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/redis/go-redis/v9"
)

// fakeReplica registers a binlog dump with serverID, reporting host, at
// the server's current binlog end (as another replica would); the returned
// func closes it and waits until the server no longer lists it.
func fakeReplica(t *testing.T, e *env, serverID uint32, host string) func() {
	t.Helper()
	c := e.sql()
	r, err := binlogStatus(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	file, _ := r.GetString(0, 0)
	pos, _ := r.GetUint(0, 1)
	h, p, _ := net.SplitHostPort(mysqlAddr)
	port, _ := strconv.Atoi(p)
	s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: serverID, Flavor: serverFlavor(), Host: h, Port: uint16(port),
		User: mysqlUser, Password: mysqlPass, Localhost: host, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if _, err := s.StartSync(mysql.Position{Name: file, Pos: uint32(pos)}); err != nil {
		s.Close()
		t.Fatalf("fake replica %d: %v", serverID, err)
	}
	waitReplica(t, e, serverID, true)
	closed := false
	stop := func() {
		if !closed {
			closed = true
			s.Close()
			waitReplica(t, e, serverID, false)
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitReplica waits until SHOW SLAVE HOSTS / SHOW REPLICAS lists
// serverID (listed) or no longer does.
func waitReplica(t *testing.T, e *env, serverID uint32, listed bool) {
	t.Helper()
	q := "SHOW SLAVE HOSTS"
	if isMySQL() {
		q = "SHOW REPLICAS"
	}
	c := e.sql()
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.Execute(q)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for i := 0; i < r.RowNumber(); i++ {
			if id, _ := r.GetUint(i, 0); uint32(id) == serverID {
				found = true
			}
		}
		if found == listed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: server_id %d listed %v after 30s, want %v", q, serverID, found, listed)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Under leases a source's publishers register as source.server-id + token
// mod ha.server-ids: check passes with the running lease holder's own
// registration (naming it), FAILs another replica on any id of that range
// (naming the id, its host and the fix), and ignores one outside it.
func TestCheckServerIDRange(t *testing.T) {
	e := newEnv(t)
	p := e.start()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	h, err := lease.Holder(context.Background(), rdb, e.key)
	if err != nil {
		t.Fatal(err)
	}
	owner, token, ok := lease.ParseHolder(h)
	if !ok {
		t.Fatalf("lease holder %q", h)
	}
	const n = 16 // ha.server-ids' default
	mine := lease.ServerID(e.serverID, token, n)
	waitReplica(t, e, mine, true)
	out, code := e.cli(nil, "check")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("server_id %d is the lease holder's (%s, token %d", mine, owner, token)) || strings.Contains(out, "FAIL") {
		t.Fatalf("check with the lease holder publishing as server_id %d: exit %d, want 0 naming the holder's registration:\n%s", mine, code, out)
	}

	// Another replica on an id of the range, but not the current term's.
	other := lease.ServerID(e.serverID, token+5, n)
	stop := fakeReplica(t, e, other, "db-replica-"+runID)
	out, code = e.cli(nil, "check")
	want := fmt.Sprintf("FAIL  source       replica db-replica-%s uses server_id %d, one of the server_ids %d–%d", runID, other, e.serverID, e.serverID+n-1)
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("registers as %d", mine)) ||
		!strings.Contains(out, "set source.server-id so that") || !strings.Contains(out, "SHOW SLAVE HOSTS / SHOW REPLICAS") {
		t.Fatalf("check with replica %d in the range: exit %d, want 1 with %q:\n%s", other, code, want, out)
	}
	stop()

	// Outside the range (replay's default id): not this source's concern.
	fakeReplica(t, e, e.serverID+n, "replay-"+runID)
	if out, code := e.cli(nil, "check"); code != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("check with a replica at server_id %d, outside the range: exit %d, want 0:\n%s", e.serverID+n, code, out)
	}

	// Stopped, the lease released: a registration on the last term's id is
	// what a killed publisher leaves for a few seconds: a WARN, not a FAIL.
	p.stop(t, 20*time.Second)
	waitReplica(t, e, mine, false)
	if h, _ := lease.Holder(context.Background(), rdb, e.key); h != "" {
		t.Fatalf("lease still held by %q after a clean stop", h)
	}
	fakeReplica(t, e, mine, "killed-"+runID)
	out, code = e.cli(nil, "check")
	want = fmt.Sprintf("WARN  source       replica killed-%s uses server_id %d, the id of this source's last lease term (token %d)", runID, mine, token)
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("check with the last term's id registered and the lease free: exit %d, want 0 with %q:\n%s", code, want, out)
	}
}

// A replica that is not a publisher (a database replica, another tool)
// registered with the server_id the next lease term draws: that term
// waits source.server-id-wait for it to go, gives the term up and the next
// one registers with the next id of the range, publishing every row.
// Before, the source stopped with a fatal server_id conflict.
func TestHAServerIDTakenByAnotherReplica(t *testing.T) {
	e := newEnv(t)
	e.sourceExtra = "  server-id-wait: 1s\n"
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ctx := context.Background()
	last, err := lease.LastToken(ctx, rdb, e.key)
	if err != nil {
		t.Fatal(err)
	}
	const n = 16 // ha.server-ids' default
	taken := lease.ServerID(e.serverID, last+1, n)
	fakeReplica(t, e, taken, "db-replica-"+runID)
	p := e.start()
	if !logHas(p.log, "the term's server_id is taken on the source") {
		t.Fatal("streaming without having met the replica on its first term's server_id")
	}
	h, err := lease.Holder(ctx, rdb, e.key)
	if err != nil {
		t.Fatal(err)
	}
	_, token, ok := lease.ParseHolder(h)
	if !ok || token <= last+1 {
		t.Fatalf("lease holder %q: want a term after token %d", h, last+1)
	}
	mine := lease.ServerID(e.serverID, token, n)
	if mine == taken {
		t.Fatalf("streaming as server_id %d, the taken one", mine)
	}
	waitReplica(t, e, mine, true)
	if err := produce(e.writer(), workload.Generate(7, 0, 5, 40, 1, 5, 100)); err != nil {
		t.Fatal(err)
	}
	if recs := e.readTopic(40, time.Minute); len(recs) != 40 {
		t.Fatalf("%d records, want 40", len(recs))
	}
}

// source.server-id equal to the source's own @@server_id, with the
// default ha.server-ids 16: whatever id its lease term draws, the start
// refuses the range that holds it (exit 1, naming the range, the id and the
// fix), as it refuses the single id without leases. Before, a term drawing
// another id of the range streamed, and one drawing the source's own gave
// the term up and went on with the next id.
func TestHAServerIDRangeHoldsSourcesOwn(t *testing.T) {
	e := newEnv(t)
	own := e.sourceServerID()
	e.serverID = own
	p := e.launch()
	if code := p.waitExit(t, time.Minute); code != 1 {
		t.Fatalf("publisher with source.server-id %d (the source's own) and ha.server-ids 16: exit %d, want 1", own, code)
	}
	want := fmt.Sprintf("the source's own @@server_id %d is one of the server_ids %d–%d (source.server-id %d + lease token mod ha.server-ids 16) this source's publishers register as: set source.server-id so that the range excludes %d",
		own, own, own+15, own, own)
	if !logHas(p.log, want) {
		t.Fatalf("the log does not say %q", want)
	}
	if logHas(p.log, "streaming binlog") {
		t.Fatal("a term streamed with a server_id range holding the source's own")
	}
}
