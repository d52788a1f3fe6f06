package pipeline

// startedMsg is the Info line of a StartAt decision d once its position is
// stored as the checkpoint: the configured start (configured: Facts.Start)
// only when d starts there; a position the decision found elsewhere (the
// last committed transaction of exactly-once, a checkpoint recovered from
// the topic) was named by d's notes, and a checkpoint may exist (an
// exactly-once resume after it), so the line says neither "no checkpoint"
// nor "the configured start" then.
func startedMsg(d Decision, configured string) string {
	if d.Start == configured {
		return "no checkpoint; starting from the configured start (stored as the first checkpoint)"
	}
	return "starting from the position decided above (stored as the checkpoint)"
}
