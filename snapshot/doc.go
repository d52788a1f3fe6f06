// Package snapshot is the backfill's Source: the outbox rows of a
// consistent snapshot (START TRANSACTION WITH CONSISTENT SNAPSHOT; MariaDB's
// binlog_snapshot_file/position status variables, or on MySQL the binlog
// status read under FLUSH TABLES WITH READ LOCK, giving the binlog
// position it is consistent with), read in id order and sent as
// transactions that all end at that position, so that the binlog stream
// can start exactly there: every row committed before the snapshot comes
// from the snapshot, every row committed after it from the binlog.
package snapshot
