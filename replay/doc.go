// Package replay re-publishes the outbox events of a binlog range, from the
// server (as a replica with its own server_id) or from archived binlog
// files, through pipeline.Run with the live router plus the headers
// replayed=true and replay_id. It never touches the checkpoint.
//
// A range is given by positions (ParsePoint): <file>:<pos> (a transaction
// boundary), gtid:<set>, or an RFC 3339 time standing for the start of the
// first transaction committed at or after it (binlog timestamps have a
// one-second resolution). NewPlan resolves and checks the range; Run reads
// and publishes it.
package replay
