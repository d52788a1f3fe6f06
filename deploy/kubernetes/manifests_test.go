package kubernetes

import (
	"os"
	"path/filepath"
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
	"sigs.k8s.io/yaml"
)

// objects are the decoded manifests of this directory.
type objects struct {
	deployment     *appsv1.Deployment
	configMap      *corev1.ConfigMap
	secret         *corev1.Secret
	service        *corev1.Service
	serviceMonitor *monitoringv1.ServiceMonitor
	pdb            *policyv1.PodDisruptionBudget
	kustomization  struct {
		APIVersion string              `json:"apiVersion"`
		Kind       string              `json:"kind"`
		Labels     []map[string]any    `json:"labels"`
		Resources  []string            `json:"resources"`
		Images     []map[string]string `json:"images,omitempty"`
	}
}

// strict decodes b into v, refusing unknown fields and duplicate keys.
func strict(t *testing.T, file string, b []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func load(t *testing.T) objects {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var o objects
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\n---") {
			t.Fatalf("%s: one object per file, please", f)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(b, &tm); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			o.deployment = new(appsv1.Deployment)
			strict(t, f, b, o.deployment)
		case "v1 ConfigMap":
			o.configMap = new(corev1.ConfigMap)
			strict(t, f, b, o.configMap)
		case "v1 Secret":
			o.secret = new(corev1.Secret)
			strict(t, f, b, o.secret)
		case "v1 Service":
			o.service = new(corev1.Service)
			strict(t, f, b, o.service)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			o.serviceMonitor = new(monitoringv1.ServiceMonitor)
			strict(t, f, b, o.serviceMonitor)
		case "policy/v1 PodDisruptionBudget":
			o.pdb = new(policyv1.PodDisruptionBudget)
			strict(t, f, b, o.pdb)
		case "kustomize.config.k8s.io/v1beta1 Kustomization":
			strict(t, f, b, &o.kustomization)
			for _, r := range o.kustomization.Resources {
				if _, err := os.Stat(r); err != nil {
					t.Errorf("kustomization.yaml lists %s: %v", r, err)
				}
			}
			for _, other := range files {
				if other != f && other != "secret.example.yaml" && !slices.Contains(o.kustomization.Resources, other) {
					t.Errorf("kustomization.yaml does not list %s", other)
				}
			}
		default:
			t.Fatalf("%s: unexpected %s %s", f, tm.APIVersion, tm.Kind)
		}
	}
	for name, missing := range map[string]bool{"Deployment": o.deployment == nil, "ConfigMap": o.configMap == nil,
		"Secret": o.secret == nil, "Service": o.service == nil, "ServiceMonitor": o.serviceMonitor == nil,
		"PodDisruptionBudget": o.pdb == nil, "Kustomization": o.kustomization.Kind == ""} {
		if missing {
			t.Fatalf("no %s manifest", name)
		}
	}
	return o
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
	o := load(t)
	for _, m := range []metav1.ObjectMeta{o.deployment.ObjectMeta, o.configMap.ObjectMeta, o.secret.ObjectMeta,
		o.service.ObjectMeta, o.serviceMonitor.ObjectMeta, o.pdb.ObjectMeta} {
		for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
			t.Errorf("name %q: %s", m.Name, msg)
		}
	}

	d := o.deployment
	pod := d.Spec.Template
	selects(t, "Deployment", d.Spec.Selector, pod.Labels)
	// One publisher until high availability lands (see deployment.yaml):
	// two would both publish, and a rolling update would run two at once.
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("Deployment: replicas %v, strategy %q; want 2 (one publishing, one standing by under the lease) and RollingUpdate", d.Spec.Replicas, d.Spec.Strategy.Type)
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

	// The config file comes from the ConfigMap, the secrets from the Secret as files.
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
			secVol = v.Secret.SecretName == o.secret.Name && mounted && m.ReadOnly && m.SubPath == ""
		}
	}
	if !cmVol || !secVol {
		t.Errorf("volumes: ConfigMap %s mounted at /etc/cdc-outbox/config.yaml: %v; Secret %s mounted read-only as files: %v",
			o.configMap.Name, cmVol, o.secret.Name, secVol)
	}
	if !slices.Contains(c.Args, "/etc/cdc-outbox/config.yaml") {
		t.Errorf("args %v do not name /etc/cdc-outbox/config.yaml", c.Args)
	}
	for _, e := range c.Env {
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
			_, inData := o.secret.StringData[r.SecretKeyRef.Key]
			if r.SecretKeyRef.Name != o.secret.Name || !inData {
				t.Errorf("env %s: secret %s key %s not in secret.example.yaml", e.Name, r.SecretKeyRef.Name, r.SecretKeyRef.Key)
			}
		}
	}

	// The configuration serves metrics on the container port, on every
	// interface of the pod, and shuts down within the grace period.
	var cfg struct {
		MetricsAddr     string `json:"metrics-addr"`
		ShutdownTimeout string `json:"shutdown-timeout"`
		Source          struct {
			Password string `json:"password"`
		} `json:"source"`
	}
	if err := yaml.Unmarshal([]byte(o.configMap.Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("configmap config.yaml: %v", err)
	}
	if want := ":" + strconv.Itoa(int(metricsPort.ContainerPort)); cfg.MetricsAddr != want {
		t.Errorf("config metrics-addr %q, want %q (the container port, every interface)", cfg.MetricsAddr, want)
	}
	if cfg.Source.Password != "" {
		t.Errorf("the ConfigMap holds source.password: it belongs in the Secret")
	}
	st, err := time.ParseDuration(cfg.ShutdownTimeout)
	if err != nil {
		t.Fatalf("config shutdown-timeout: %v", err)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= st {
		t.Errorf("terminationGracePeriodSeconds %v must exceed shutdown-timeout %v", g, st)
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
	selects(t, "ServiceMonitor", &o.serviceMonitor.Spec.Selector, o.service.Labels)
	if eps := o.serviceMonitor.Spec.Endpoints; len(eps) != 1 || eps[0].Port != svcPort || eps[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want port %q path /metrics", eps, svcPort)
	}
	selects(t, "PodDisruptionBudget", o.pdb.Spec.Selector, pod.Labels)
	if o.pdb.Spec.MinAvailable != nil && o.pdb.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
		t.Errorf("PodDisruptionBudget minAvailable %v with %d replicas blocks every node drain", o.pdb.Spec.MinAvailable, *d.Spec.Replicas)
	}
}
