// Package lease makes one instance the owner of a source: a lease in
// Redis per source, carrying a fencing token that only grows, renewed
// well before it expires, and the instance liveness that spreads several
// sources over several instances. Package ha runs the sources under it;
// docs/ha.md is the failure model.
//
// Keys, for the source whose checkpoint key is K (all in K's Redis
// Cluster slot, so that one script sees them together):
//
//	{K}:lease   "<owner> <token>", PX ttl: who publishes the source now
//	{K}:fence   the token counter, INCR at each acquisition, no TTL
//	K           the checkpoint (package checkpoint), written only while
//	            {K}:lease holds the writer's "<owner> <token>"
//
// and one sorted set per group (Config.Group) of instance ids scored by
// the Redis time (ms) until which each is alive.
//
// Acquire takes a free lease: INCR of the counter, raised above the token
// stored with the checkpoint if a Redis restart without persistence (or a
// FLUSHALL) reset the counter, so a token never repeats for a source
// whose checkpoint survived. Keeper renews it every Config.Renew and
// closes Lost when a renewal is refused (someone else holds it) or when
// Config.TTL − Config.Margin passed on this instance's monotonic clock
// since the last renewal that succeeded was sent (Deadline): the owner
// stops before Redis lets the lease expire, so before a standby can
// acquire it, whatever the wall clocks do.
//
// The decisions are pure functions tested by tables: Deadline, Share
// and Excess (how many sources an instance may hold), ServerID (the
// replica server_id of an ownership term).
package lease
