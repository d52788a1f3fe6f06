package checkpoint

import "errors"

// ErrCorrupt reports a checkpoint value that is not a valid Checkpoint.
// Inspect it with redis-cli GET <key>; delete it and start with an explicit
// source.start to recover.
var ErrCorrupt = errors.New("checkpoint: corrupt value")
