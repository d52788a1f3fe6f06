// Package sink writes routed records to Kafka with acks=all and reports,
// in order, the binlog position of each transaction once every record of it
// and of every transaction before it has been acknowledged.
//
// Ordering invariant: within a partition, no record is written after an
// earlier record of that partition failed. The Writer issues one produce
// round at a time (records ≤ BatchSize and bytes ≤ BatchBytes per round)
// through its Producer, which sends each partition's records of a round
// as one record batch and retries only that same batch, and stops at the
// first round that still failed: the caller restarts the pipeline from the
// last acknowledged position. Records of a round that did succeed are then
// written again: at-least-once, with the same event id header. (kafka-go's
// Writer, used before, could send a partition's later batch after an
// earlier one failed; the Producer encodes the record batches itself and
// uses kafka-go for the connections and the protocol.)
//
// Batching adapts to load: when the binlog reader has nothing queued, a
// round is sent as soon as one transaction is there (low latency); while
// catching up, queued transactions are merged into full rounds (throughput).
//
// Poison records (Check: a payload that is not valid JSON, a record larger
// than BatchBytes, a topic the router refuses (router.CheckTopic), and a record the
// broker rejects alone with MESSAGE_TOO_LARGE) follow Config.OnPoison.
// PolicyFail writes and acknowledges the transactions before the poison
// one and stops with a *PoisonError; PolicyDeadLetter writes everything
// before the poison record, then a dead-letter record in its place
// (DeadLetter) to DeadLetterTopic, and carries on. When the broker rejects
// a partition's batch as too large, its records are sent again one at a
// time, in order, to find the culprits. See docs/poison.md.
package sink
