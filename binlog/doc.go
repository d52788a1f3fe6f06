// Package binlog streams committed transactions from a MySQL 8 or MariaDB
// binary log and turns the INSERT row events of the outbox table into
// [Event] values, framed into whole [Txn] values.
//
// A Reader registers as a replica (COM_BINLOG_DUMP or COM_BINLOG_DUMP_GTID,
// MySQL manual §17.9 "Replication and Binary Logging Options") through
// github.com/go-mysql-org/go-mysql, and frames each transaction from its
// GTID/BEGIN event to its XID/COMMIT event, so that later stages only ever see
// whole committed transactions together with the binlog position (file/pos and
// GTID set) at their end. That end position is what the checkpoint stores:
// resuming from it re-reads nothing that was acknowledged and skips nothing
// that was not.
//
// Only WRITE_ROWS events (v0, v1, v2 and MariaDB's compressed variants) of the
// configured outbox table produce events; UPDATE and DELETE rows are ignored,
// so the "insert then delete in the same transaction" cleanup pattern works.
// Columns are mapped by name: from the table map's optional metadata when the
// server runs with binlog_row_metadata=FULL, otherwise from
// information_schema.COLUMNS read at start.
package binlog
