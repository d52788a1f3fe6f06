// Package secure holds what the Kafka, MySQL and Redis connections share
// about security: building a *tls.Config from PEM files (TLS), reading a
// secret from a file (ReadSecret, for Kubernetes Secrets mounted as
// files), and explaining a failed TLS handshake in the operator's terms
// (Explain). Each connecting package names its own settings and decides
// itself whether an error is fatal; this package knows no setting names
// beyond the prefix it is given.
package secure
