// Package kubernetes holds no code: its test validates the manifests beside
// it offline (no cluster, no schema download): kustomize builds (in process,
// sigs.k8s.io/kustomize/api) of the base and of the base with its components
// (monitoring, managed-kafka), every object decoded strictly into the
// Kubernetes API types (k8s.io/api) and the prometheus-operator types
// (ServiceMonitor) — an unknown or misspelt field, or a value of the wrong
// type, fails —, the ConfigMap's config.yaml loaded and validated by the
// publisher's own loader with the Secret example's keys as files, and the
// references between the objects (selectors, named ports, probe paths,
// ConfigMap and Secret names, the *-file keys and the Secret's keys).
// It is its own module so that the Kubernetes types stay out of the
// publisher's go.mod; run it with make deploy-check.
package kubernetes
