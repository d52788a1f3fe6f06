// Package audit is the continuous delivery audit: verify (package verify)
// made incremental. Behind the checkpoint, it walks the outbox table's id
// ranges that the checkpoint has passed, reads the records of those ids
// back from Kafka (read_committed under kafka.delivery: exactly-once), and
// counts per source and table: events missing, duplicated beyond the
// replay window, reordered within a key, split across partitions, and
// payloads that differ from the row. Missing and reordered are alerts
// (deploy/prometheus); the rest are metrics.
//
// It is its own stage (Auditor.Run) with its own SQL, Kafka and Redis
// connections and its own budget (audit.rows-per-second, audit.sample),
// so it never slows publishing; its cursor is kept in Redis beside the
// checkpoint (checkpoint.AuditKey, written through package checkpoint),
// so that a restarted audit goes on where it was. docs/verify-and-audit.md
// says what it proves and what it costs.
package audit
