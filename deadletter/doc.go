// Package deadletter re-publishes the events of the dead-letter topic
// (kafka.dead-letter-topic) once their cause is fixed: each event's current
// outbox row is read again, routed and checked like the live publisher
// does, and published with republished_from=dead-letter. See docs/poison.md.
package deadletter
