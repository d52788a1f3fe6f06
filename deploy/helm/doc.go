// Package helm holds no code: its test checks the Helm chart cdc-outbox/
// offline, with helm's own Go packages (no helm binary, no cluster): helm
// lint's rules, and helm template with the chart's defaults and each values
// file of testdata/, every rendered object decoded strictly into the
// Kubernetes and prometheus-operator API types, their references checked
// (selectors, ports, probes, mounts), the rendered config.yaml loaded by the
// publisher's own config package, the PrometheusRule against
// deploy/prometheus, the image against deploy/kubernetes. It is its own
// module so that helm and the Kubernetes types stay out of the publisher's
// go.mod; make release-check runs it.
package helm
