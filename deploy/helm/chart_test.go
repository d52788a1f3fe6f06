package helm

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/cdc-outbox/cdc-outbox/config"
)

const chartDir = "cdc-outbox"

// valueSets are the values files the chart is checked with: its defaults
// and each example of testdata/.
func valueSets(t *testing.T) map[string]map[string]any {
	t.Helper()
	sets := map[string]map[string]any{"defaults": {}}
	files, _ := filepath.Glob("testdata/*.yaml")
	if len(files) < 3 {
		t.Fatalf("testdata: %d values files, want the examples", len(files))
	}
	for _, f := range files {
		v, err := common.ReadValuesFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sets[filepath.Base(f)] = v
	}
	return sets
}

// helm lint, in process (the same rules as the CLI): no warning or error
// with any values file.
func TestLint(t *testing.T) {
	for name, vals := range valueSets(t) {
		l := lint.RunAll(chartDir, vals, "cdc-outbox")
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: %s", name, m)
			}
		}
	}
}

// rendered are the typed objects of one helm template.
type rendered struct {
	deployment     *appsv1.Deployment
	configMap      *corev1.ConfigMap
	service        *corev1.Service
	serviceAccount *corev1.ServiceAccount
	pdb            *policyv1.PodDisruptionBudget
	serviceMonitor *monitoringv1.ServiceMonitor
	rule           *monitoringv1.PrometheusRule
}

// render is helm template with vals, each manifest decoded strictly into
// its API type (an unknown or misspelt field, a value of the wrong type fails).
func render(t *testing.T, vals map[string]any) (rendered, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := util.ToRenderValues(ch, vals, common.ReleaseOptions{Name: "cdc-outbox", Namespace: "outbox", IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		return rendered{}, err
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return rendered{}, err
	}
	var r rendered
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(out[name], "\n---") {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var v any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				r.deployment = new(appsv1.Deployment)
				v = r.deployment
			case "v1 ConfigMap":
				r.configMap = new(corev1.ConfigMap)
				v = r.configMap
			case "v1 Service":
				r.service = new(corev1.Service)
				v = r.service
			case "v1 ServiceAccount":
				r.serviceAccount = new(corev1.ServiceAccount)
				v = r.serviceAccount
			case "policy/v1 PodDisruptionBudget":
				r.pdb = new(policyv1.PodDisruptionBudget)
				v = r.pdb
			case "monitoring.coreos.com/v1 ServiceMonitor":
				r.serviceMonitor = new(monitoringv1.ServiceMonitor)
				v = r.serviceMonitor
			case "monitoring.coreos.com/v1 PrometheusRule":
				r.rule = new(monitoringv1.PrometheusRule)
				v = r.rule
			default:
				t.Fatalf("%s: unexpected %s %s", name, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
		}
	}
	if r.deployment == nil || r.configMap == nil || r.service == nil {
		t.Fatalf("no Deployment, ConfigMap or Service rendered: %v", slices.Sorted(maps.Keys(out)))
	}
	return r, nil
}

func selects(t *testing.T, what string, sel *metav1.LabelSelector, l map[string]string) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() || !s.Matches(labels.Set(l)) {
		t.Errorf("%s: selector %v does not select %v (%v)", what, sel, l, err)
	}
}

func TestRender(t *testing.T) {
	for name, vals := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			r, err := render(t, vals)
			if err != nil {
				t.Fatal(err)
			}
			checkRendered(t, r, vals)
		})
	}
}

func checkRendered(t *testing.T, r rendered, vals map[string]any) {
	d := r.deployment
	pod := d.Spec.Template
	selects(t, "Deployment", d.Spec.Selector, pod.Labels)
	want := int32(2)
	if n, ok := vals["replicaCount"].(float64); ok {
		want = int32(n)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != want || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("replicas %v, strategy %q; want %d and RollingUpdate", d.Spec.Replicas, d.Spec.Strategy.Type, want)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	for probe, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != probe || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe %s: %+v", probe, p)
		}
	}
	if c.StartupProbe == nil || c.StartupProbe.HTTPGet == nil || c.StartupProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("startupProbe %+v, want /healthz", c.StartupProbe)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9108 {
		t.Errorf("ports %+v, want metrics 9108", c.Ports)
	}

	// Non-root as the image's user, nothing writable but the emptyDir, no capability.
	ps, sc := pod.Spec.SecurityContext, c.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 65532 ||
		ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, uid 65532, seccomp RuntimeDefault", ps)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil ||
		*sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation, drop ALL", sc)
	}
	if c.Resources.Limits.Memory().IsZero() {
		t.Errorf("no memory limit")
	}
	if len(pod.Spec.TopologySpreadConstraints) == 0 || pod.Spec.TopologySpreadConstraints[0].TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("topologySpreadConstraints %+v: want the replicas spread across nodes", pod.Spec.TopologySpreadConstraints)
	}
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		selects(t, "topologySpreadConstraint "+tsc.TopologyKey, tsc.LabelSelector, pod.Labels)
	}

	// Secrets only as files: no environment variable from a Secret.
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("env %s from Secret %s: secrets are files (a *-file key)", e.Name, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["CDC_OUTBOX_METRICS_ADDR"] != ":9108" {
		t.Errorf("CDC_OUTBOX_METRICS_ADDR %q, want :9108 (the container port, every interface)", env["CDC_OUTBOX_METRICS_ADDR"])
	}

	// Mounts: the ConfigMap's config.yaml, the Secret as files, the emptyDir of ha.instance-file.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	var dirs []string // where a *-file key may point
	var cmVol, secVol, runVol bool
	for _, v := range pod.Spec.Volumes {
		m, mounted := mounts[v.Name]
		if !mounted {
			t.Errorf("volume %s not mounted", v.Name)
			continue
		}
		dirs = append(dirs, m.MountPath+"/")
		switch {
		case v.ConfigMap != nil && v.Name == "config":
			cmVol = v.ConfigMap.Name == r.configMap.Name && m.SubPath == "config.yaml" && m.MountPath == "/etc/cdc-outbox/config.yaml"
		case v.Secret != nil && v.Name == "secrets":
			secVol = m.ReadOnly && m.SubPath == "" && m.MountPath == "/etc/cdc-outbox/secrets" && *v.Secret.DefaultMode == 0o400
		case v.EmptyDir != nil && v.Name == "run":
			runVol = strings.HasPrefix(env["CDC_OUTBOX_HA_INSTANCE_FILE"], m.MountPath+"/") && !m.ReadOnly
		}
	}
	if !cmVol || !secVol || !runVol {
		t.Errorf("volumes: config.yaml from the ConfigMap %v, the Secret as read-only files %v, ha.instance-file on an emptyDir %v", cmVol, secVol, runVol)
	}
	if !slices.Equal(c.Args, []string{"run", "--config", "/etc/cdc-outbox/config.yaml"}) {
		t.Errorf("args %v", c.Args)
	}

	// The configuration: loaded by the publisher's own loader (unknown keys
	// refused, every setting validated), no secret in it, every file it names
	// mounted, the shutdown within the grace period.
	raw := r.configMap.Data["config.yaml"]
	for _, secretKey := range regexp.MustCompile(`(?m)^\s*(password|client-secret|aws-secret-access-key):`).FindAllString(raw, -1) {
		t.Errorf("config.yaml holds %s: secrets belong in the Secret, named by a *-file key", strings.TrimSpace(secretKey))
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*[a-z-]*(-file|ssl-ca|ssl-cert|ssl-key):\s*(\S+)`).FindAllStringSubmatch(raw, -1) {
		if !slices.ContainsFunc(dirs, func(d string) bool { return strings.HasPrefix(m[2], d) }) {
			t.Errorf("config.yaml names %s, under no mounted volume %v", m[2], dirs)
		}
	}
	f := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(f, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() { // the caller's own settings (the dev stack's) do not count
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "CDC_OUTBOX_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("CDC_OUTBOX_METRICS_ADDR", env["CDC_OUTBOX_METRICS_ADDR"])
	t.Setenv("CDC_OUTBOX_HA_INSTANCE_FILE", env["CDC_OUTBOX_HA_INSTANCE_FILE"])
	cfg, err := config.Load(f)
	if err != nil {
		t.Fatalf("the publisher refuses config.yaml: %v\n%s", err, raw)
	}
	if !cfg.HA.Enabled && *d.Spec.Replicas > 1 {
		t.Errorf("%d replicas without ha.enabled: they would all publish", *d.Spec.Replicas)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= cfg.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %v must exceed shutdown-timeout %v", g, cfg.ShutdownTimeout)
	}
	if pod.Annotations["checksum/config"] == "" {
		t.Errorf("no checksum/config annotation: a changed configuration would not roll the pods")
	}

	if r.serviceAccount != nil && r.serviceAccount.Name != pod.Spec.ServiceAccountName {
		t.Errorf("ServiceAccount %s, pods run as %s", r.serviceAccount.Name, pod.Spec.ServiceAccountName)
	}
	selects(t, "Service", &metav1.LabelSelector{MatchLabels: r.service.Spec.Selector}, pod.Labels)
	if len(r.service.Spec.Ports) != 1 || r.service.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service ports %+v, want one to the container's metrics port", r.service.Spec.Ports)
	}
	if r.pdb == nil {
		t.Errorf("no PodDisruptionBudget")
	} else {
		selects(t, "PodDisruptionBudget", r.pdb.Spec.Selector, pod.Labels)
		if r.pdb.Spec.MaxUnavailable == nil || r.pdb.Spec.MaxUnavailable.IntValue() >= int(*d.Spec.Replicas) {
			t.Errorf("PodDisruptionBudget maxUnavailable %v with %d replicas: a drain could take every publisher", r.pdb.Spec.MaxUnavailable, *d.Spec.Replicas)
		}
	}
	mon, _ := vals["metrics"].(map[string]any)
	sm, _ := mon["serviceMonitor"].(map[string]any)
	pr, _ := mon["prometheusRule"].(map[string]any)
	if on := sm["enabled"] == true; on != (r.serviceMonitor != nil) {
		t.Errorf("ServiceMonitor rendered %v, enabled %v", r.serviceMonitor != nil, on)
	} else if on {
		selects(t, "ServiceMonitor", &r.serviceMonitor.Spec.Selector, r.service.Labels)
		if eps := r.serviceMonitor.Spec.Endpoints; len(eps) != 1 || eps[0].Port != r.service.Spec.Ports[0].Name || eps[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v", eps)
		}
	}
	if on := pr["enabled"] == true; on != (r.rule != nil) {
		t.Errorf("PrometheusRule rendered %v, enabled %v", r.rule != nil, on)
	} else if on {
		checkRules(t, r.rule)
	}
}

// checkRules: the PrometheusRule holds exactly the rules of
// deploy/prometheus/cdc-outbox-alerts.yaml (the file promtool tests).
func checkRules(t *testing.T, rule *monitoringv1.PrometheusRule) {
	b, err := os.ReadFile("../prometheus/cdc-outbox-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(b, &want); err != nil {
		t.Fatal(err)
	}
	got, _ := yaml.Marshal(rule.Spec)
	wantY, _ := yaml.Marshal(want)
	if !bytes.Equal(got, wantY) {
		t.Errorf("the PrometheusRule differs from deploy/prometheus/cdc-outbox-alerts.yaml")
	}
	n := 0
	for _, g := range rule.Spec.Groups {
		n += len(g.Rules)
	}
	if n < 5 {
		t.Errorf("the PrometheusRule has %d rules", n)
	}
}

// The chart's copy of the alert rules is the file of deploy/prometheus
// (helm cannot read outside the chart): cp ../prometheus/cdc-outbox-alerts.yaml cdc-outbox/files/.
func TestRulesInStep(t *testing.T) {
	a, err := os.ReadFile("../prometheus/cdc-outbox-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(chartDir + "/files/cdc-outbox-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("deploy/helm/cdc-outbox/files/cdc-outbox-alerts.yaml differs from deploy/prometheus/cdc-outbox-alerts.yaml: cp deploy/prometheus/cdc-outbox-alerts.yaml deploy/helm/cdc-outbox/files/")
	}
}

// The chart's appVersion and image are the plain manifests' image.
func TestImageInStep(t *testing.T) {
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	b, err := os.ReadFile(chartDir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	r, err := render(t, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	img := r.deployment.Spec.Template.Spec.Containers[0].Image
	if !strings.HasSuffix(img, ":"+chart.AppVersion) {
		t.Errorf("the chart's image %s is not its appVersion %s", img, chart.AppVersion)
	}
	b, err = os.ReadFile("../kubernetes/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if k := d.Spec.Template.Spec.Containers[0].Image; k != img {
		t.Errorf("deploy/kubernetes/deployment.yaml runs %s, the chart %s: the same release image in both", k, img)
	}
}

// A digest pins the image; values the schema refuses are refused at render time.
func TestRenderValues(t *testing.T) {
	r, err := render(t, map[string]any{"image": map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)}})
	if err != nil {
		t.Fatal(err)
	}
	if img := r.deployment.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, "@sha256:"+strings.Repeat("ab", 32)) {
		t.Errorf("image %s, want the digest", img)
	}
	// values.schema.json: an empty Secret name, a misspelt or mistyped value refused, named
	for _, c := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"secret": map[string]any{"name": ""}}, "/secret/name"},
		{map[string]any{"replicaCont": 3}, "replicaCont"},
		{map[string]any{"replicaCount": "two"}, "/replicaCount"},
		{map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enable": true}}}, "enable"},
		{map[string]any{"image": map[string]any{"digest": "latest"}}, "/image/digest"},
	} {
		if _, err := render(t, c.vals); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %v rendered (%v), want an error naming %s", c.vals, err, c.want)
		}
	}
	r, err = render(t, map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}, "serviceAccount": map[string]any{"create": false}})
	if err != nil {
		t.Fatal(err)
	}
	if r.pdb != nil || r.serviceAccount != nil || r.deployment.Spec.Template.Spec.ServiceAccountName != "default" {
		t.Errorf("PDB and ServiceAccount off: %v %v %s", r.pdb, r.serviceAccount, r.deployment.Spec.Template.Spec.ServiceAccountName)
	}
}

// Every values example the chart's own files and docs/install.md point to
// (testdata/<name>.yaml; in install.md's Helm section, each `<name>.yaml`
// but the chart's values.yaml and the reader's own my-values.yaml) exists:
// a reader sent to one finds it.
func TestNamedExamplesExist(t *testing.T) {
	named := regexp.MustCompile(`testdata/([A-Za-z0-9._-]+\.yaml)`)
	quoted := regexp.MustCompile("`([A-Za-z0-9._-]+\\.yaml)`")
	for _, f := range []string{chartDir + "/values.yaml", chartDir + "/templates/NOTES.txt", "../../docs/install.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms := named.FindAllSubmatch(b, -1)
		if _, helm, ok := bytes.Cut(b, []byte("\n## Kubernetes with Helm\n")); ok {
			helm, _, _ = bytes.Cut(helm, []byte("\n## "))
			ms = append(ms, quoted.FindAllSubmatch(helm, -1)...)
		}
		for _, m := range ms {
			if n := string(m[1]); n == "values.yaml" || n == "my-values.yaml" {
				continue
			}
			if _, err := os.Stat(filepath.Join("testdata", string(m[1]))); err != nil {
				t.Errorf("%s points to testdata/%s, which does not exist (the examples: deploy/helm/testdata/*.yaml)", f, m[1])
			}
		}
	}
}
