package ha

// joinWait reports whether a starting instance with sources configured
// waits one renew interval, and a second heartbeat, before it takes any
// source's lease. Instances started together (a deployment, a
// scale-up) each see at their first heartbeat only those that beat
// before them: the first would take every source and hand most of them
// over a renew interval later, a storm of pipeline starts and stops with
// many sources (docs/ha.md, "Many sources"). Not with one source (no
// spreading), nor after a restart that found its previous process's id
// in ha.instance-file (previous: it takes that process's leases at once;
// the others alive were already counted).
func joinWait(sources int, previous string) bool {
	return sources > 1 && previous == ""
}
