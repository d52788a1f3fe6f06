// Package consumer reads cdc-outbox's topics and hands each record to a
// Handler once, in the publisher's order: the consumer side of the outbox
// (the seeds' "idempotent consumer keyed by message id"), for every
// mapping layout. The guide is docs/consumer.md.
//
// What it does, per record (see Consumer.Run):
//
//   - Joins a Kafka consumer group (segmentio/kafka-go's ConsumerGroup:
//     JoinGroup/SyncGroup/Heartbeat, KIP-62 session and rebalance timeouts)
//     and reads the assigned partitions as the Java consumer does, one
//     Fetch v4+ request per leader broker for all the partitions it leads
//     (sink.Reader; fetch.go), not one per partition, so that the broker
//     serves one request per round whatever the partition count, in
//     Config.Isolation, read_uncommitted or read_committed (KIP-98). Under
//     read_committed nothing past the last stable offset is read and the
//     records of aborted transactions are dropped by each Fetch answer's
//     aborted-transactions list, as the Java consumer does; transaction
//     markers (COMMIT/ABORT control records) are skipped at both levels and
//     never reach the handler nor OnInvalid. (kafka-go's own Reader passes
//     both on, segmentio/kafka-go#1332, which is why the consumer reads
//     partitions itself.) With the publisher in exactly-once mode and
//     read_committed, the handler gets each event once without a Store,
//     except after this consumer's own crash (below).
//   - Decodes the record by Config.Layout: which header holds the event id,
//     which the sequence number and the event type, and whether the
//     ordering key is the record key or a header. The presets (im,
//     debezium, generic) take their headers from package mapping's own
//     definitions (mapping.PublishedHeaders); LayoutOf derives the layout of
//     a publisher's mapping. The im layout also fills the Record's typed
//     fields (ConversationID, MessageID, ...). Every record keeps the
//     publisher's binlog_pos, binlog_txn_end, gtid and replayed/replay_id or
//     backfill headers, and all its headers.
//   - Dedupes by event id: a bounded in-memory window per partition
//     (Config.Window ids), then the optional Store (RedisStore: SET NX with a
//     TTL) for duplicates older than the window or from before a restart.
//     Re-published records of "cdc-outbox replay" carry the same event id
//     and are deduped like any other.
//   - Orders: records of one partition are handled one at a time, in
//     offset order, which is the publisher's commit order per key (the key
//     pins it to one partition). With a sequence number (the im layout's
//     seq_no), Decide (a pure function) gives each record's Verdict from
//     its key's (and event type's) last handled sequence number: the next
//     one is handled; a jump (seq > last+1) is a Gap, reported to
//     Options.OnGap and the cdc_consumer_gaps_total metric and then handled,
//     never dropped; an unseen record behind the last one (a replay filling
//     an earlier gap) is handled with Record.Late set. Without a sequence
//     number (the debezium and generic layouts by default) the order is the
//     offset order only and gap detection is off: Run logs so at start.
//   - Commits, per partition, the offset after the highest record handled
//     or skipped (duplicates, transaction markers, aborted records), every
//     Config.CommitInterval and when the partition is revoked or Run
//     returns. A crash redelivers what was handled but not committed: the
//     Store (or an idempotent handler) drops it.
//
// Security: Config.TLS and Config.SASL are the publisher's kafka.tls and
// kafka.sasl (TLS with a CA file and client certificates; SASL PLAIN,
// SCRAM-SHA-256/512, OAUTHBEARER, AWS_MSK_IAM), used for every connection
// of the group and of the partition readers. Each connection's dial, TLS
// handshake and SASL login end within Config.DialTimeout: the logins are
// done by package sink under a deadline (sink.Security's Dialer for the
// group, the publisher's own broker connections for the partition
// readers), as kafka-go's own has none and a paused broker would hold it
// for ever. A certificate or login
// the broker refuses ends Run with a *sink.SecurityError naming the
// setting.
//
// Back-pressure: each partition's prefetch queue holds at most
// Config.QueueCapacity records (plus one Fetch answer, at most
// Config.MaxBytes); a partition whose queue is full is left out of its
// leader's next requests (paused) until its handler drained it, so a slow
// handler slows its partition only, and memory stays bounded (window,
// sequence state and queue sizes are all limits). A paused partition is
// fetched again after the request in flight, within Config.MaxWait.
//
// Failures: a passing error of a read (a broker unreachable, a leader
// moving, a temporary Kafka error) is logged (at most 3 warnings per
// 10 s) and the reads grouped again by fresh metadata after a backoff
// (100 ms doubling to 2 s), the partitions without a leader looked up
// again while the others are read; an offset past a partition's end is
// tried again with a backoff of its own; an offset below the log start (deleted by retention before it was
// handled) moves to the log start with an error log; a refused login or a
// Kafka error that is not temporary (authorization failed) ends Run. A
// handler error is retried Config.HandlerAttempts times with
// backoff, then Run returns a *HandlerError (that record not committed, so
// it is redelivered on the next start). Store errors are retried the same
// way and end in a *StoreError. A record that does not fit the layout
// (missing or malformed header: another producer's, or a layout that is
// not the publisher's) goes to Options.OnInvalid; without one it is
// logged, counted in cdc_consumer_records_total{result="invalid"} and
// skipped.
//
// Sequence state (the last sequence number per key and event type) is kept
// per partition in memory, at most Config.Conversations keys; it starts
// empty when a partition is assigned at an offset this process did not
// reach itself, so the first record of a key after a start or a rebalance
// is its baseline (no gap is reported before it).
package consumer
