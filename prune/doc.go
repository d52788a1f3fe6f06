// Package prune deletes outbox rows already published: rows older than a
// given age whose id is below the smallest id inserted between the
// checkpoint and a consistent snapshot (so known to be acknowledged), in
// small batches. MariaDB only (binlog_snapshot_file/position); see
// docs/operations.md, prune.
package prune
