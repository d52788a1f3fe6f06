// Package checkpoint stores the binlog position up to which every record was
// acknowledged by Kafka, in one Redis key per source.
//
// The value is a JSON document (see Checkpoint) written with a single SET,
// so a reader never sees half of it. The Committer writes it only at
// transaction boundaries and only for positions the sink reported as
// acknowledged, periodically and once more when the pipeline stops, so a
// restart resumes exactly after the last acknowledged transaction and at
// most one checkpoint interval of records is published twice.
//
// Redis must persist (appendonly yes, or RDB snapshots): a checkpoint lost
// by a Redis restart makes the next start need an explicit start option.
package checkpoint
