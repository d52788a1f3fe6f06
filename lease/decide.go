package lease

import "time"

// Deadline is when an owner must have stopped publishing: Margin before
// the lease could expire in Redis. sent is when the last renewal (or the
// acquisition) that succeeded was sent, on this instance's monotonic
// clock: Redis set the expiry no earlier, so it expires no earlier than
// sent + ttl on any clock that runs at the same rate.
func Deadline(sent time.Time, ttl, margin time.Duration) time.Time {
	return sent.Add(ttl - margin)
}

// Share is how many sources one instance may hold: ceil(sources/alive),
// alive counting this one (at least 1).
func Share(sources, alive int) int {
	alive = max(alive, 1)
	return (sources + alive - 1) / alive
}

// MayAcquire reports whether an instance holding owned sources may take
// one more.
func MayAcquire(owned, sources, alive int) bool { return owned < Share(sources, alive) }

// Excess is how many of its sources an instance should hand over because
// more instances are alive than when it took them.
func Excess(owned, sources, alive int) int { return max(0, owned-Share(sources, alive)) }

// ServerID is the replica server_id of the ownership term with token:
// base + token mod n. Two terms of a source share a server_id only n
// terms apart, and a term's binlog connection ends within its lease (or,
// for a paused process, at the server's net_write_timeout), so with n
// terms taking longer than that no two live connections share one (the
// server would otherwise kill the older with ERROR 4052). The start-up
// check (binlog, source.server-id-wait) waits out any that remains.
func ServerID(base uint32, token uint64, n int) uint32 {
	if n <= 1 {
		return base
	}
	return base + uint32(token%uint64(n))
}

// HandOver reports whether an owner whose pipeline has been failing
// (restarting: degraded) since since should give its lease up at now:
// after more than after (0: never), and only when another instance is
// alive to take it (alive counts this one).
func HandOver(failing bool, since, now time.Time, after time.Duration, alive int) bool {
	return failing && after > 0 && alive > 1 && now.Sub(since) > after
}

// VanishedWait is when a free lease whose last term (token) was not
// released may be taken: when that holder's lease would have expired as
// last seen (seenToken, seenUntil: the answer's receipt plus its PTTL, no
// earlier than the expiry in Redis), or, when that term was never seen,
// one ttl after the lease was first found free (free).
func VanishedWait(seenToken uint64, seenUntil time.Time, token uint64, free time.Time, ttl time.Duration) time.Time {
	if token != 0 && token == seenToken {
		return seenUntil
	}
	return free.Add(ttl)
}
