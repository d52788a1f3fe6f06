// Package pipeline is the one pipeline of every flow and the decisions
// around it.
//
// Run wires a Source (the live server's binlog.Reader, archived files, a
// backfill snapshot, a replay range) to a Writer (sink.Writer) and, when
// the flow checkpoints, a Committer (checkpoint.Committer), under one
// errgroup with one shutdown rule: on a signal the source stops reading,
// what was read is drained within shutdown-timeout, and the committer
// writes the final checkpoint. The acknowledgements travel from the writer
// through Run, which returns the source's budget and hands them, with the
// topics' partition counts, to the committer.
//
// Decide is the start decision, a pure function over Facts (checkpoint,
// server, start option, topic contents, recover and backfill settings);
// the Publisher (run) starts each pipeline through a list of phases
// (phases.go: preflight, load, partitions, resolve with Decide, history,
// catch-up from source.archive, source.on-purged), each returning the
// checkpoint writes it wants as intents that one loop applies
// (applyIntents, the one caller of checkpoint.Apply), and restarts the
// pipeline after retryable errors (IsFatal decides which are not). The
// phases ask the server, Redis, the mirror and Kafka through small
// interfaces (deps.go). docs/operations.md, "Where a run starts", is
// Decide's table; "Retries and timeouts" is Retries'.
package pipeline
