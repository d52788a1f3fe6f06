package kubernetes

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/cdc-outbox/cdc-outbox/config"
)

// secretsDir is where the Deployment mounts the Secret; the
// configuration's *-file keys name files under it.
const secretsDir = "/etc/cdc-outbox/secrets/"

// objects are the decoded objects of one kustomize build.
type objects struct {
	deployment     *appsv1.Deployment
	configMap      *corev1.ConfigMap
	service        *corev1.Service
	serviceMonitor *monitoringv1.ServiceMonitor
	pdb            *policyv1.PodDisruptionBudget
}

// kustomization is the part of a kustomization.yaml (or Component) the
// manifests use; decoded strictly, so that a misspelt field fails.
type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Labels     []map[string]any `json:"labels,omitempty"`
	Resources  []string         `json:"resources,omitempty"`
	Components []string         `json:"components,omitempty"`
	Patches    []struct {
		Path string `json:"path"`
	} `json:"patches,omitempty"`
}

// strict decodes b into v, refusing unknown fields and duplicate keys.
func strict(t *testing.T, file string, b []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// build is kustomize build of the base (this directory) with components
// (directories of this one), in process, each object decoded strictly into
// its API type (an unknown or misspelt field, a value of the wrong type fails).
func build(t *testing.T, components ...string) objects {
	t.Helper()
	dir := "."
	if len(components) > 0 {
		// An overlay of the user's: the base as a resource, the components.
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		dir = t.TempDir()
		rel, err := filepath.Rel(dir, wd)
		if err != nil {
			t.Fatal(err)
		}
		k := "resources: [" + rel + "]\ncomponents:\n"
		for _, c := range components {
			k += "  - " + filepath.Join(rel, c) + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build with components %v: %v", components, err)
	}
	var o objects
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch r.GetGvk().ApiVersion() + " " + r.GetKind() {
		case "apps/v1 Deployment":
			o.deployment = new(appsv1.Deployment)
			v = o.deployment
		case "v1 ConfigMap":
			o.configMap = new(corev1.ConfigMap)
			v = o.configMap
		case "v1 Service":
			o.service = new(corev1.Service)
			v = o.service
		case "monitoring.coreos.com/v1 ServiceMonitor":
			o.serviceMonitor = new(monitoringv1.ServiceMonitor)
			v = o.serviceMonitor
		case "policy/v1 PodDisruptionBudget":
			o.pdb = new(policyv1.PodDisruptionBudget)
			v = o.pdb
		default:
			t.Fatalf("unexpected %s %s", r.GetGvk().ApiVersion(), r.GetKind())
		}
		strict(t, r.GetKind(), b, v)
	}
	if o.deployment == nil || o.configMap == nil || o.service == nil || o.pdb == nil {
		t.Fatalf("components %v: want a Deployment, a ConfigMap, a Service and a PodDisruptionBudget, got %+v", components, o)
	}
	return o
}

// secretExample decodes a secret.example.yaml.
func secretExample(t *testing.T, file string) *corev1.Secret {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := new(corev1.Secret)
	strict(t, file, b, s)
	return s
}

// Every manifest is in the kustomization.yaml of its directory (a
// resource or a patch), but the Secret examples; one object per file.
func TestKustomizationsListEveryFile(t *testing.T) {
	dirs := []string{"."}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "kustomization.yaml"))
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		var k kustomization
		strict(t, filepath.Join(d, "kustomization.yaml"), b, &k)
		listed := slices.Clone(k.Resources)
		for _, p := range k.Patches {
			listed = append(listed, p.Path)
		}
		files, _ := filepath.Glob(filepath.Join(d, "*.yaml"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "\n---") {
				t.Errorf("%s: one object per file, please", f)
			}
			switch base := filepath.Base(f); {
			case base == "kustomization.yaml" || base == "secret.example.yaml":
			case !slices.Contains(listed, base):
				t.Errorf("%s/kustomization.yaml does not list %s", d, base)
			}
		}
		if d == "." && k.Kind != "Kustomization" {
			t.Errorf("the base is a %s, want a Kustomization", k.Kind)
		} else if d != "." && k.Kind != "Component" {
			t.Errorf("%s is a %s, want a Component (the base is its parent directory: an overlay here could not include it)", d, k.Kind)
		}
	}
}

func selects(t *testing.T, what string, sel *metav1.LabelSelector, l map[string]string) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("%s: selector: %v", what, err)
		return
	}
	if s.Empty() || !s.Matches(labels.Set(l)) {
		t.Errorf("%s: selector %v does not select %v", what, s, l)
	}
}

func TestManifests(t *testing.T) {
	for _, c := range []struct {
		name       string
		components []string
		secret     string // the Secret example of the build
	}{
		{"base", nil, "secret.example.yaml"},
		{"monitoring", []string{"monitoring"}, "secret.example.yaml"},
		{"managed-kafka", []string{"managed-kafka"}, "managed-kafka/secret.example.yaml"},
		{"both", []string{"monitoring", "managed-kafka"}, "managed-kafka/secret.example.yaml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := build(t, c.components...)
			// The base has no ServiceMonitor: without the Prometheus
			// Operator's CRD, kubectl apply would fail on it.
			if want := slices.Contains(c.components, "monitoring"); (o.serviceMonitor != nil) != want {
				t.Errorf("ServiceMonitor built %v, want %v (only with the monitoring component)", o.serviceMonitor != nil, want)
			}
			check(t, o, secretExample(t, c.secret))
			if slices.Contains(c.components, "managed-kafka") {
				cfg := loadConfig(t, o, secretExample(t, c.secret))
				if !cfg.Kafka.TLS.Enabled || cfg.Kafka.TLS.CAFile == "" || !strings.HasPrefix(cfg.Kafka.SASL.Mechanism, "SCRAM-") || cfg.Kafka.SASL.PasswordFile == "" {
					t.Errorf("managed-kafka: kafka.tls %+v, kafka.sasl mechanism %q password-file %q: want SASL_SSL with SCRAM, the CA and the password from files",
						cfg.Kafka.TLS, cfg.Kafka.SASL.Mechanism, cfg.Kafka.SASL.PasswordFile)
				}
			}
		})
	}
}

func check(t *testing.T, o objects, secret *corev1.Secret) {
	for _, m := range []metav1.ObjectMeta{o.deployment.ObjectMeta, o.configMap.ObjectMeta, secret.ObjectMeta, o.service.ObjectMeta, o.pdb.ObjectMeta} {
		for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
			t.Errorf("name %q: %s", m.Name, msg)
		}
	}

	d := o.deployment
	pod := d.Spec.Template
	selects(t, "Deployment", d.Spec.Selector, pod.Labels)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("Deployment: replicas %v, strategy %q; want 2 (one publishing, one standing by under the lease) and RollingUpdate", d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	// The replicas on different nodes: one node's loss leaves the standby.
	if tsc := pod.Spec.TopologySpreadConstraints; len(tsc) == 0 || tsc[0].TopologyKey != "kubernetes.io/hostname" || tsc[0].MaxSkew != 1 {
		t.Errorf("topologySpreadConstraints %+v: want the replicas spread across nodes (kubernetes.io/hostname, maxSkew 1)", tsc)
	}
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		selects(t, "topologySpreadConstraint "+tsc.TopologyKey, tsc.LabelSelector, pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("Deployment: %d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	var metricsPort *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == "metrics" {
			metricsPort = &c.Ports[i]
		}
	}
	if metricsPort == nil {
		t.Fatalf("container has no port named metrics")
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: not an httpGet probe", name)
			return
		}
		if p.HTTPGet.Path != path || p.HTTPGet.Port.String() != metricsPort.Name {
			t.Errorf("%s: %s on port %s, want %s on port metrics", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
		}
	}
	probe("startupProbe", c.StartupProbe, "/healthz")
	probe("livenessProbe", c.LivenessProbe, "/healthz")
	probe("readinessProbe", c.ReadinessProbe, "/readyz")
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext: want readOnlyRootFilesystem and no privilege escalation")
	}
	if ps := pod.Spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Errorf("pod securityContext: want runAsNonRoot")
	}
	if c.Resources.Limits.Memory().IsZero() {
		t.Errorf("container has no memory limit")
	}

	// Secrets only as files: no environment variable from a Secret (a
	// variable keeps its value until the pod restarts; a mounted file follows
	// a rotated Secret, read at each connection).
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("env %s from Secret %s: secrets are files (a *-file key of the ConfigMap)", e.Name, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	for _, e := range c.EnvFrom {
		if e.SecretRef != nil {
			t.Errorf("envFrom Secret %s: secrets are files (a *-file key of the ConfigMap)", e.SecretRef.Name)
		}
	}

	// The config file comes from the ConfigMap, the secrets from the Secret
	// as files: the whole volume (a subPath mount is never updated).
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	var cmVol, secVol bool
	for _, v := range pod.Spec.Volumes {
		m, mounted := mounts[v.Name]
		switch {
		case v.ConfigMap != nil:
			cmVol = v.ConfigMap.Name == o.configMap.Name && mounted && m.SubPath == "config.yaml" && m.MountPath == "/etc/cdc-outbox/config.yaml"
		case v.Secret != nil:
			secVol = v.Secret.SecretName == secret.Name && mounted && m.ReadOnly && m.SubPath == "" &&
				m.MountPath+"/" == secretsDir && v.Secret.DefaultMode != nil && *v.Secret.DefaultMode == 0o400
		}
	}
	if !cmVol || !secVol {
		t.Errorf("volumes: ConfigMap %s mounted at /etc/cdc-outbox/config.yaml: %v; Secret %s mounted read-only (0400, no subPath) at %s: %v",
			o.configMap.Name, cmVol, secret.Name, secretsDir, secVol)
	}
	if !slices.Contains(c.Args, "/etc/cdc-outbox/config.yaml") {
		t.Errorf("args %v do not name /etc/cdc-outbox/config.yaml", c.Args)
	}

	// No secret in the ConfigMap; every file it names is a non-empty key of
	// the Secret (the publisher refuses an empty password file at start: a
	// Redis without AUTH has no checkpoint.password-file).
	raw := o.configMap.Data["config.yaml"]
	for _, k := range regexp.MustCompile(`(?m)^\s*(password|client-secret|aws-secret-access-key|token):`).FindAllString(raw, -1) {
		t.Errorf("config.yaml holds %s: secrets belong in the Secret, named by a *-file key", strings.TrimSpace(k))
	}
	files := regexp.MustCompile(`(?m)^\s*[a-z-]*(-file|ssl-ca|ssl-cert|ssl-key):\s*(\S+)`).FindAllStringSubmatch(raw, -1)
	if !slices.ContainsFunc(files, func(m []string) bool {
		return strings.TrimSpace(m[0]) == "password-file: "+secretsDir+"source-password"
	}) {
		t.Errorf("config.yaml: no source.password-file: %ssource-password", secretsDir)
	}
	for _, m := range files {
		key, ok := strings.CutPrefix(m[2], secretsDir)
		if !ok {
			t.Errorf("config.yaml names %s, not a file of the Secret (%s)", m[2], secretsDir)
		} else if v := secret.StringData[key]; strings.TrimSpace(v) == "" {
			t.Errorf("config.yaml names %s: the Secret example %s has no key %s with a value", m[2], secret.Name, key)
		}
	}
	cfg := loadConfig(t, o, secret)

	// The configuration serves metrics on the container port, on every
	// interface of the pod, and shuts down within the grace period.
	if want := ":" + strconv.Itoa(int(metricsPort.ContainerPort)); cfg.MetricsAddr != want {
		t.Errorf("config metrics-addr %q, want %q (the container port, every interface)", cfg.MetricsAddr, want)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= cfg.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %v must exceed shutdown-timeout %v", g, cfg.ShutdownTimeout)
	}
	if !cfg.HA.Enabled {
		t.Errorf("%d replicas without ha.enabled: they would all publish", *d.Spec.Replicas)
	}

	// Service → pods' metrics port; ServiceMonitor → Service's port; PDB → pods.
	selects(t, "Service", &metav1.LabelSelector{MatchLabels: o.service.Spec.Selector}, pod.Labels)
	var svcPort string
	for _, p := range o.service.Spec.Ports {
		if p.TargetPort.String() == metricsPort.Name || p.TargetPort.IntValue() == int(metricsPort.ContainerPort) {
			svcPort = p.Name
		}
	}
	if svcPort == "" {
		t.Errorf("Service has no port to the container's metrics port")
	}
	if sm := o.serviceMonitor; sm != nil {
		selects(t, "ServiceMonitor", &sm.Spec.Selector, o.service.Labels)
		if eps := sm.Spec.Endpoints; len(eps) != 1 || eps[0].Port != svcPort || eps[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v, want port %q path /metrics", eps, svcPort)
		}
	}
	selects(t, "PodDisruptionBudget", o.pdb.Spec.Selector, pod.Labels)
	if o.pdb.Spec.MinAvailable != nil && o.pdb.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
		t.Errorf("PodDisruptionBudget minAvailable %v with %d replicas blocks every node drain", o.pdb.Spec.MinAvailable, *d.Spec.Replicas)
	}
}

// loadConfig loads the ConfigMap's config.yaml with the publisher's own
// loader and validates it as it would at start, the Secret example's keys
// written as the files it names (a *.pem key: a generated CA certificate;
// the environment's CDC_OUTBOX_* settings do not count).
func loadConfig(t *testing.T, o objects, secret *corev1.Secret) config.Config {
	t.Helper()
	dir := t.TempDir()
	for k, v := range secret.StringData {
		if strings.HasSuffix(k, ".pem") {
			v = testCA(t)
		}
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(dir, "config.yaml")
	raw := strings.ReplaceAll(o.configMap.Data["config.yaml"], secretsDir, dir+"/")
	if err := os.WriteFile(f, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.EnvPrefix) {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for _, e := range o.deployment.Spec.Template.Spec.Containers[0].Env {
		t.Setenv(e.Name, e.Value)
	}
	cfg, err := config.Load(f)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatalf("the publisher refuses the ConfigMap's config.yaml with the Secret %s: %v\n%s", secret.Name, err, raw)
	}
	return cfg
}

// testCA returns a self-signed CA certificate, PEM.
func testCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
