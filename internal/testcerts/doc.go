// Package testcerts generates the certificates of the secured test stack
// (scripts/dev-stack.sh up-secure) and of the TLS tests: a CA, server and
// client certificates signed by it, an expired server certificate, and an
// unrelated CA with a client certificate of its own. Nothing it makes is
// committed: the files live in the stack directory or a test's temp dir.
package testcerts
