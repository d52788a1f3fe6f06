//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
)

// sourcesConfig returns a configuration with a sources list, one entry
// per env (named s0, s1, ...), sharing envs[0]'s Redis group; top holds
// extra top-level lines (e.g. the source section's start).
func sourcesConfig(envs []*env, sourceExtra, extra string) string {
	var src strings.Builder
	for i, se := range envs {
		fmt.Fprintf(&src, "  - name: s%d\n    source: {server-id: %d, table: %s}\n    router: {topic: %s}\n    checkpoint: {key: %q}\n",
			i, se.serverID, se.outbox, se.topic, se.key)
	}
	return fmt.Sprintf(`source:
  addr: %s
  user: %s
  password: %s
  schema: %s
  heartbeat-period: 1s
  read-timeout: 5s
%skafka:
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
%ssources:
%s`, mysqlAddr, mysqlUser, mysqlPass, mysqlDB, sourceExtra, strings.Join(brokers, ","), redisAddr, envs[0].key+":instances", extra, src.String())
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// httpGet returns the status code and body of GET http://addr+path (0 and
// the error's text when it cannot connect).
func httpGet(addr, path string) (int, string) {
	res, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Two sources in one configuration, without a configured start: run's
// --start applies to the source --source names (s0 starts, s1 refuses
// alone: no checkpoint, no start option); the operator commands act on the
// source --source names, refuse without it where they need one (naming
// both), and check and status cover both without it; the publishing
// metrics are labelled by source.
func TestSourcesCommands(t *testing.T) {
	envs := []*env{newEnvNamed(t, t.Name()+"_0"), newEnvNamed(t, t.Name()+"_1")}
	e := envs[0]
	metrics := freeAddr(t)
	e.configText = sourcesConfig(envs, "", "metrics-addr: "+metrics+"\n")

	out, code := e.cli(nil, "run", "--start", "latest")
	if code != 2 || !strings.Contains(out, "--start: the configuration has 2 sources (s0, s1) and these options apply to one: add --source NAME") {
		t.Fatalf("run --start without --source: exit %d, want 2 naming the sources", code)
	}

	p := e.launch("--source", "s0", "--start", "latest")
	defer p.stop(t, 30*time.Second)
	e.waitLog(p, `"msg":"streaming binlog"`, time.Minute)
	e.waitLog(p, `source stopped: fatal error (the other sources go on)","source":"s1"`, time.Minute)
	plan := workload.Generate(1801, 0, 20, 300, 1, 20, 50)
	if err := produce(e.writer(), plan); err != nil {
		t.Fatal(err)
	}
	e.waitPublished(plan, plan.Total, time.Minute)
	if envs[1].checkpoint() != nil {
		t.Fatal("s1 has a checkpoint: --start was applied to it too")
	}
	// The checkpoint of s0 catches up with what was published.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c := e.checkpoint(); c != nil && c.Owner != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint of s0 written under its lease")
		}
	}

	want := fmt.Sprintf(`cdc_outbox_records_produced_total{source="s0",table="%s.%s",topic=%q} %d`, mysqlDB, e.outbox, e.topic, plan.Total)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, body := httpGet(metrics, "/metrics")
		if strings.Contains(body, want+"\n") && strings.Contains(body, `cdc_outbox_source_connected{source="s0"} 1`) {
			if strings.Contains(body, `cdc_outbox_records_produced_total{source="s1"`) {
				t.Errorf("series of s1, which this instance does not publish:\n%s", grepLines(body, `source="s1"`))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %q:\n%s", want, grepLines(body, "cdc_outbox_records_produced", "cdc_outbox_source_connected"))
		}
	}

	// status: both sources; s1 has no checkpoint (exit 1).
	out, code = e.cli(nil, "status")
	if code != 1 || !strings.Contains(out, "source s0\ncheckpoint   "+e.key) || !strings.Contains(out, "source s1\ncheckpoint   "+envs[1].key) ||
		!strings.Contains(out, "  lease       held by ") || !strings.Contains(out, "no checkpoint under Redis key "+envs[1].key) {
		t.Fatalf("status of both sources: exit %d, want 1 with both sources, s0's lease holder and s1's missing checkpoint", code)
	}
	out, code = e.cli(nil, "status", "--json", "--source", "s0")
	var st struct {
		Source, Key, Lease string
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &st); code != 0 || err != nil || st.Source != "s0" || st.Key != e.key || st.Lease == "" {
		t.Fatalf("status --json --source s0: exit %d, %+v %v", code, st, err)
	}
	if _, body := httpGet(metrics, "/status"); !strings.Contains(body, `"source": "s1"`) && !strings.Contains(body, `"source":"s1"`) {
		t.Errorf("/status lacks s1: %s", body)
	}

	// checkpoint: one source, named.
	out, code = e.cli(nil, "checkpoint", "show")
	if code != 2 || !strings.Contains(out, "the configuration has 2 sources (s0, s1) and this command acts on one: add --source NAME") {
		t.Fatalf("checkpoint show without --source: exit %d, want 2 naming the sources", code)
	}
	if out, code = e.cli(nil, "checkpoint", "show", "--source", "s0"); code != 0 || !strings.Contains(out, "checkpoint "+e.key) {
		t.Fatalf("checkpoint show --source s0: exit %d", code)
	}
	if out, code = e.cli(nil, "checkpoint", "show", "--source", "s1"); code != 0 || !strings.Contains(out, "no checkpoint under Redis key "+envs[1].key) {
		t.Fatalf("checkpoint show --source s1: exit %d", code)
	}
	if out, code = e.cli(nil, "replay", "--from", "mysql-bin.000001:4", "--dry-run"); code != 2 || !strings.Contains(out, "add --source NAME") {
		t.Fatalf("replay without --source: exit %d, want 2", code)
	}

	// check: both sources without --source (s1: no checkpoint and no
	// start option: FAIL), s0 alone with it.
	out, code = e.cli(nil, "check")
	if code != 1 || !strings.Contains(out, "source s0\n") || !strings.Contains(out, "source s1\n") || !strings.Contains(out, "table "+mysqlDB+"."+envs[1].outbox+" exists") {
		t.Fatalf("check of both sources: exit %d, want 1 with both sources checked", code)
	}
	out, code = e.cli(nil, "check", "--source", "s0")
	if code != 0 || strings.Contains(out, "source s0\n") || strings.Contains(out, envs[1].outbox) || !strings.Contains(out, "table "+mysqlDB+"."+e.outbox+" exists") {
		t.Fatalf("check --source s0: exit %d, want 0 with s0's checks only", code)
	}
}
