// Package check is the preflight: the start-up checks of run (source
// settings and privileges, the outbox table, the topics, Redis persistence,
// the stored checkpoint against the server and the topics' partition
// counts), each printed as an OK, WARN or FAIL line naming the fix.
package check
