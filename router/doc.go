// Package router maps outbox events to Kafka records.
//
// Topic: a fixed name ("im.events") or a template over the event type
// ("im.{event_type}"); characters Kafka does not allow in topic names are
// rejected, not rewritten, and so are Kafka's internal names, an empty
// placeholder value and the publisher's own topics (CheckTopic, one
// decision for every record on every path). Key: conversation_id as a decimal string, so that
// with the Java client's default partitioner (murmur2, see Partition and
// KIP-480 for the keyless case) all events of a conversation land in one
// partition, in binlog order. Value: the payload bytes exactly as stored.
// Headers: the event id and the row's other fields, and the source binlog
// position, so a consumer can dedupe by event id and trace a record to its
// transaction.
package router
