// Package mapping says how the rows of an outbox table become Kafka
// records: which column is the event id (the dedupe id), the key, the
// payload, the ordering column, the topic (fixed, a template over columns,
// or a column holding the name), the headers, the record timestamp, an
// explicit partition, W3C trace context (traceparent/tracestate, W3C Trace
// Context §3) and the envelope (the raw payload, or CloudEvents 1.0 in the
// Kafka protocol binding's binary mode: ce_* headers).
//
// A Config (YAML source.mapping, or per entry of source.tables) starts from
// a preset — "im" (the im_event_outbox table of schema/*.sql, the default),
// "debezium" (the Debezium outbox event router's defaults) or "generic" (the
// aggregate_type / aggregate_id outbox) — and overrides its fields.
// Compile checks it against the table's columns (information_schema) and
// returns a Mapping: the columns to read, each with a slot number, and the
// record's parts as slots. Compile's errors name the table, the column and
// the fix. The binlog package decodes the mapped columns into an Event's
// Vals by slot; the router builds the record from them. See docs/mapping.md.
package mapping
