// Package deploy holds no code: its tests check the monitoring files
// beside them (grafana/, prometheus/) against the metrics the publisher
// registers (package health), and with promtool when it is installed.
package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/ha"
	"github.com/cdc-outbox/cdc-outbox/health"
	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"
)

const (
	dashboardFile = "grafana/cdc-outbox.json"
	rulesFile     = "prometheus/cdc-outbox-alerts.yaml"
	rulesTestFile = "prometheus/cdc-outbox-alerts.test.yaml"
)

// builtin are series Prometheus itself makes for every scrape.
var builtin = map[string]bool{"up": true, "scrape_duration_seconds": true}

// registered returns the series names the publisher exposes: every family
// of a health.Metrics registry (with the _bucket/_sum/_count series of
// histograms and summaries).
func registered(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	m := health.NewMetrics(health.BuildInfo{Version: "test"})
	m.Source("s").InitTopics("t")                     // per-source families exist once a source is published, per-topic ones once a topic is known
	m.Registry().MustRegister(health.NewSources("s")) // the per-source states, as run registers them
	m.Audit("s", "t").Progress("t", 1, 0)             // the audit's series, where it runs
	m.Audit("s").Read(1, 1)
	ha.NewMetrics(m.Registry()).Init("s") // the lease metrics, as run registers them with ha.enabled
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]dto.MetricType{}
	for _, f := range fams {
		names[f.GetName()] = f.GetType()
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names[f.GetName()+"_bucket"] = f.GetType()
			fallthrough
		case dto.MetricType_SUMMARY:
			names[f.GetName()+"_sum"] = f.GetType()
			names[f.GetName()+"_count"] = f.GetType()
		}
	}
	return names
}

var (
	reString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	reMatchers = regexp.MustCompile(`\{[^}]*\}`)
	reRange    = regexp.MustCompile(`\[[^\]]*\]`)
	reNumber   = regexp.MustCompile(`(^|[^a-zA-Z0-9_:])[0-9][0-9a-zA-Z._]*`)
	reLabels   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	reIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	keywords   = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
)

// metricNames returns the series names a PromQL expression selects:
// identifiers outside label matchers, ranges, strings and label lists
// that are neither functions nor keywords.
func metricNames(expr string) []string {
	s := reString.ReplaceAllString(expr, `""`)
	s = reMatchers.ReplaceAllString(s, " ")
	s = reRange.ReplaceAllString(s, " ")
	s = reLabels.ReplaceAllString(s, " ")
	s = reNumber.ReplaceAllString(s, "$1 ")
	var out []string
	for _, m := range reIdent.FindAllStringSubmatch(s, -1) {
		if m[1] != "" { // a function call or an aggregation
			continue
		}
		if name := m[0]; !keywords[strings.ToLower(name)] {
			out = append(out, name)
		}
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want string
	}{
		{`sum by (job, instance) (rate(cdc_outbox_records_produced_total{topic=~"a|b"}[5m])) == 0 and on (job) up`, "cdc_outbox_records_produced_total up"},
		{`histogram_quantile(0.99, sum by (le) (rate(x_bucket{instance=~"$instance"}[$__rate_interval])))`, "x_bucket"},
		{`time() - y offset 5m > 6 * 3600`, "y"},
	} {
		if got := strings.Join(metricNames(c.expr), " "); got != c.want {
			t.Errorf("metricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

type rulesDoc struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string            `yaml:"alert"`
			Record string            `yaml:"record"`
			Expr   string            `yaml:"expr"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T) rulesDoc {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc rulesDoc
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(false)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return doc
}

// dashboardExprs returns "panel title: refId" → expression of every query
// of the dashboard, rows' nested panels included, and the templating
// queries' metrics.
func dashboardExprs(t *testing.T) (map[string]string, []string) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	}
	var d struct {
		UID        string  `json:"uid"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs := map[string]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs[p.Title+": "+tg.RefID] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	var vars []string
	reLabelValues := regexp.MustCompile(`label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	for _, v := range d.Templating.List {
		if m := reLabelValues.FindStringSubmatch(v.Definition); m != nil {
			vars = append(vars, m[1])
		}
	}
	return exprs, vars
}

// Every metric the dashboard and the alert rules use is one the publisher
// registers, and every cdc_outbox_* metric it registers is on the dashboard.
func TestMonitoringUsesRegisteredMetrics(t *testing.T) {
	known := registered(t)
	check := func(where, expr string) []string {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", where, expr)
		}
		for _, n := range names {
			if _, ok := known[n]; !ok && !builtin[n] {
				t.Errorf("%s: %q uses %s, which the publisher does not register", where, expr, n)
			}
		}
		return names
	}
	doc := loadRules(t)
	// Series recorded by the rules themselves (the latency objective's
	// ratios) are known to the rules that use them.
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				known[r.Record] = dto.MetricType_GAUGE
			}
		}
	}
	alerts := 0
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			check(rulesFile+" "+r.Alert+r.Record, r.Expr)
			if r.Alert != "" {
				alerts++
				if r.Labels["severity"] == "" {
					t.Errorf("alert %s has no severity label", r.Alert)
				}
			}
		}
	}
	if alerts == 0 {
		t.Fatalf("%s: no alerts", rulesFile)
	}
	exprs, vars := dashboardExprs(t)
	if len(exprs) == 0 {
		t.Fatalf("%s: no queries", dashboardFile)
	}
	shown := map[string]bool{}
	for where, e := range exprs {
		for _, n := range check(dashboardFile+" "+where, e) {
			shown[n] = true
		}
	}
	for _, v := range vars {
		check(dashboardFile+" variable", v)
	}
	var missing []string
	for n, typ := range known {
		if !strings.HasPrefix(n, health.Prefix) || typ == dto.MetricType_HISTOGRAM && !strings.HasSuffix(n, "_bucket") {
			continue
		}
		if !shown[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s does not show %s: add a panel", dashboardFile, strings.Join(missing, ", "))
	}
}

// The alert rules pass promtool check rules and their unit tests, and
// every dashboard query is valid PromQL (checked as recording rules).
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus); .ci/run installs it")
	}
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(".", "check", "rules", rulesFile)
	run(filepath.Dir(rulesTestFile), "test", "rules", filepath.Base(rulesTestFile))

	exprs, _ := dashboardExprs(t)
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$instance", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, k := range keys {
		e, _ := json.Marshal(grafana.Replace(exprs[k])) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query_%d  # %s\n        expr: %s\n", i, strings.ReplaceAll(k, "#", ""), e)
	}
	f := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run(".", "check", "rules", f)
}
