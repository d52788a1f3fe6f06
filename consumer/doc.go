// Package consumer reads cdc-outbox's topics and hands each conversation's
// records to a Handler in seq_no order, once: the consumer side of the
// outbox (the seeds' "idempotent consumer keyed by message id").
//
// What it does, per record (see Consumer.Run):
//
//   - Reads the topics with a Kafka consumer group (segmentio/kafka-go's
//     ConsumerGroup: JoinGroup/SyncGroup/Heartbeat, KIP-62 session and
//     rebalance timeouts) and one partition reader per assigned partition, in
//     Config.Isolation: read_uncommitted, or read_committed for a publisher in
//     exactly-once mode (KIP-98: nothing past the last stable offset, i.e. no
//     record of a transaction still open, is returned; transaction markers are
//     skipped). Limit: kafka-go does not drop the records of aborted
//     transactions (segmentio/kafka-go#1332); for cdc-outbox that is harmless,
//     since an aborted round is sent again with the same event ids and the
//     second copy is deduped, but a producer that aborts for good would have
//     its aborted records handled.
//   - Decodes the publisher's record (key = conversation_id as a decimal
//     string, value = the payload, headers event_id, event_type, message_id,
//     seq_no, sender_id, receiver_id, created_at, binlog_pos, binlog_txn_end,
//     gtid, and replayed/replay_id or backfill) into a Record.
//   - Dedupes by event id: a bounded in-memory window per partition
//     (Config.Window ids), then the optional Store (RedisStore: SET NX with a
//     TTL) for duplicates older than the window or from before a restart.
//     Re-published records of "cdc-outbox replay" carry the same event_id and
//     are deduped like any other.
//   - Orders: records of one conversation are handled one at a time, in the
//     partition's order, which is the publisher's commit order (the key
//     pins a conversation to one partition). Decide (a pure function) gives
//     each record's Verdict from the conversation's last handled seq_no: the
//     next one is handled; a jump (seq_no > last+1) is a Gap, reported to
//     Options.OnGap and the cdc_consumer_gaps_total metric and then handled,
//     never dropped; an unseen record behind the last seq_no (a replay
//     filling an earlier gap) is handled with Record.Late set.
//   - Commits, per partition, the offset after the highest handled record
//     (records are handled in offset order, so every record below it was
//     handled or skipped as a duplicate), every Config.CommitInterval and
//     when the partition is revoked or Run returns. A crash redelivers what
//     was handled but not committed: dedupe drops it.
//
// Security: Config.TLS and Config.SASL are the publisher's kafka.tls and
// kafka.sasl (TLS with a CA file and client certificates; SASL PLAIN,
// SCRAM-SHA-256/512, OAUTHBEARER, AWS_MSK_IAM), used for every connection
// of the group and of the partition readers. Each connection's dial, TLS
// handshake and SASL login end within Config.DialTimeout: the login is
// done by sink.Security's Dialer under a deadline, as kafka-go's own has
// none and a paused broker would hold it for ever. A certificate or login
// the broker refuses ends Run with a *sink.SecurityError naming the
// setting.
//
// Back-pressure: each partition is read by its own reader whose prefetch
// queue holds at most Config.QueueCapacity records; a slow handler slows its
// partition only, and memory stays bounded (window, conversation state and
// queue sizes are all limits).
//
// Failures: a passing error of a partition read (a broker unreachable, a
// leader moving, a temporary Kafka error) is logged (at most 3 warnings
// per 10 s) while kafka-go's reader tries again; a refused login or a
// Kafka error that is not temporary (authorization failed) ends Run. A
// handler error is retried Config.HandlerAttempts times with
// backoff, then Run returns a *HandlerError (that record not committed, so
// it is redelivered on the next start). Store errors are retried the same
// way and end in a *StoreError. A record that is not the publisher's
// (missing or malformed header) goes to Options.OnInvalid; without one it is
// logged, counted in cdc_consumer_records_total{result="invalid"} and
// skipped.
//
// Sequence state (the last seq_no per conversation and event type) is kept
// per partition in memory, at most Config.Conversations conversations; it
// starts empty when a partition is assigned at an offset this process did
// not reach itself, so the first record of a conversation after a start or
// a rebalance is its baseline (no gap is reported before it).
package consumer
