package main

import "errors"

// Sentinel errors of the commands. Test with errors.Is.
var (
	// ErrPartitionsChanged reports a topic whose partition count differs
	// from the one stored with the checkpoint: the key → partition mapping
	// changed, so a conversation's records before and after the change are
	// on different partitions and consumers may see them out of order.
	// Confirm with run --accept-partition-change or "checkpoint set".
	ErrPartitionsChanged = errors.New("topic partition count changed")
	// ErrRecover reports a checkpoint recovery (--recover-checkpoint,
	// checkpoint.recover) that cannot be done.
	ErrRecover = errors.New("checkpoint recovery")
	// ErrPublisherRunning reports a publisher that seems to be running
	// (its server_id is registered as a replica) while "checkpoint set"
	// would overwrite its checkpoint.
	ErrPublisherRunning = errors.New("a publisher seems to be running")
	// ErrTopicMissing reports, at start, that the fixed router.topic does
	// not exist and kafka.allow-auto-topic-creation is off: every write
	// would fail, so run refuses to start instead of retrying for ever.
	ErrTopicMissing = errors.New("topic does not exist")
)
