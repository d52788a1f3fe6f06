package check

import (
	"errors"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

func TestServerIDFindings(t *testing.T) {
	rep := func(id uint32, host string) binlog.Replica { return binlog.Replica{ServerID: id, Host: host} }
	type want struct {
		level level
		has   []string
	}
	ha := serverIDFacts{Base: 100, N: 16, Own: 1, Leases: true}
	with := func(f serverIDFacts, edit func(*serverIDFacts)) serverIDFacts { edit(&f); return f }
	for _, tc := range []struct {
		name string
		f    serverIDFacts
		want []want
	}{
		{"no leases, unused", serverIDFacts{Base: 100, N: 1, Own: 1, Replicas: []binlog.Replica{rep(7, "r")}},
			[]want{{levelOK, []string{"server_id 100 unused"}}}},
		{"no leases, taken", serverIDFacts{Base: 100, N: 1, Own: 1, Replicas: []binlog.Replica{rep(100, "db2")}},
			[]want{{levelFail, []string{"replica db2 already uses server_id 100", "set source.server-id", "SHOW SLAVE HOSTS / SHOW REPLICAS"}}}},
		{"no leases, own id", serverIDFacts{Base: 100, N: 1, Own: 100},
			[]want{{levelFail, []string{"source.server-id 100 is the source's own @@server_id"}}}},
		{"leases, unused", with(ha, func(f *serverIDFacts) { f.Replicas = []binlog.Replica{rep(99, "a"), rep(116, "b")} }),
			[]want{{levelOK, []string{"server_ids 100–115 (source.server-id 100 + lease token mod ha.server-ids 16) unused by other replicas"}}}},
		{"leases, own id in the range", with(ha, func(f *serverIDFacts) { f.Own = 105 }),
			[]want{{levelFail, []string{"own @@server_id 105 is one of the server_ids 100–115", "excludes 105"}}}},
		{"leases, the holder's registration", with(ha, func(f *serverIDFacts) {
			f.Holder, f.Token, f.Last = "pod-a-1f", 19, 19
			f.Replicas = []binlog.Replica{rep(103, "pod-a")}
		}), []want{{levelOK, []string{"unused by other replicas; server_id 103 is the lease holder's (pod-a-1f, token 19, host pod-a)"}}}},
		{"leases, another replica in the range besides the holder", with(ha, func(f *serverIDFacts) {
			f.Holder, f.Token = "pod-a-1f", 19
			f.Replicas = []binlog.Replica{rep(107, "db2"), rep(103, "pod-a")}
		}), []want{{levelFail, []string{"replica db2 uses server_id 107", "server_ids 100–115", "the lease holder pod-a-1f (token 19) registers as 103",
			"set source.server-id so that 100–115 are unused by other replicas", "SHOW SLAVE HOSTS / SHOW REPLICAS", "or lower ha.server-ids"}}}},
		{"leases, free, the last term's registration lingers", with(ha, func(f *serverIDFacts) {
			f.Last = 21
			f.Replicas = []binlog.Replica{rep(105, "pod-b")}
		}), []want{{levelWarn, []string{"replica pod-b uses server_id 105, the id of this source's last lease term (token 21)", "goes away within seconds"}},
			{levelOK, []string{": see WARN"}}}},
		{"leases, free, another id", with(ha, func(f *serverIDFacts) {
			f.Last = 21
			f.Replicas = []binlog.Replica{rep(106, "db2")}
		}), []want{{levelFail, []string{"replica db2 uses server_id 106", "no instance holds the lease"}}}},
		{"leases, free, never held", with(ha, func(f *serverIDFacts) { f.Replicas = []binlog.Replica{rep(100, "db2")} }),
			[]want{{levelFail, []string{"replica db2 uses server_id 100"}}}},
		{"leases, the lease unreadable", with(ha, func(f *serverIDFacts) {
			f.LeaseErr = errors.New("connection refused")
			f.Replicas = []binlog.Replica{rep(101, "x")}
		}), []want{{levelWarn, []string{"replica x uses server_id 101", "connection refused", "not checked"}}, {levelOK, []string{": see WARN"}}}},
		{"replicas not listed", with(ha, func(f *serverIDFacts) { f.ListErr = errors.New("GRANT REPLICATION MASTER ADMIN") }),
			[]want{{levelWarn, []string{"cannot list replicas", "GRANT REPLICATION MASTER ADMIN"}}, {levelOK, []string{"not checked (see WARN)"}}}},
		{"one id under leases, the holder's", serverIDFacts{Base: 100, N: 1, Own: 1, Leases: true, Holder: "p", Token: 7, Replicas: []binlog.Replica{rep(100, "h")}},
			[]want{{levelOK, []string{"server_id 100 unused by other replicas; server_id 100 is the lease holder's"}}}},
		{"several replicas in the range: one line each, by id", with(ha, func(f *serverIDFacts) {
			f.Holder, f.Token = "p", 1
			f.Replicas = []binlog.Replica{rep(115, "z"), rep(102, "y")}
		}), []want{{levelFail, []string{"server_id 102"}}, {levelFail, []string{"server_id 115"}}}},
	} {
		got := serverIDFindings(tc.f)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %d findings, want %d: %v", tc.name, len(got), len(tc.want), got)
			continue
		}
		for i, w := range tc.want {
			if got[i].level != w.level {
				t.Errorf("%s: finding %d level %d, want %d: %s", tc.name, i, got[i].level, w.level, got[i].msg)
			}
			for _, s := range w.has {
				if !strings.Contains(got[i].msg, s) {
					t.Errorf("%s: finding %d lacks %q: %s", tc.name, i, s, got[i].msg)
				}
			}
		}
	}
}
