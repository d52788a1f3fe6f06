// Package kubernetes holds no code: its test validates the manifests beside
// it offline (no cluster, no schema download) by strict decoding into the
// Kubernetes API types (k8s.io/api) and the prometheus-operator types
// (ServiceMonitor) — an unknown or misspelt field, or a value of the wrong
// type, fails — and by checking the references between the objects
// (selectors, named ports, probe paths, ConfigMap and Secret names).
// It is its own module so that the Kubernetes types stay out of the
// publisher's go.mod; run it with make deploy-check.
package kubernetes
