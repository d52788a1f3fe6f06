// Package debezium reads where a Debezium MySQL (or MariaDB) connector
// stopped, from Kafka Connect's stored offsets, so that cdc-outbox can take
// over from it (docs/migrate-from-debezium.md): the offset file of the
// embedded engine or a standalone worker (FileOffsetBackingStore: a Java
// serialized HashMap<byte[], byte[]> of JSON keys and values), or the
// records of a distributed worker's offsets topic (offset.storage.topic).
//
// A key is ["<connector name>", {"server": "<topic.prefix>"}]; a value is
// {"file": ..., "pos": ..., "gtids": ..., "event": ..., "row": ...,
// "server_id": ..., "ts_sec": ..., "snapshot": ...} (Debezium's
// MySqlOffsetContext / BinlogOffsetContext). Takeover decides where
// cdc-outbox starts from an offset: file:pos, or the GTID set in GTID mode.
// Debezium restarts at file:pos (the BEGIN of the transaction it was in)
// skipping "event" events and "row" rows; cdc-outbox starts at that
// transaction's start, so that it republishes at most that one transaction
// (the restart GTID set likewise excludes it).
package debezium
