// Package ha runs the configured sources (config.Config.Pipelines), each
// an independent pipeline.Publisher, under leases (package lease): an
// instance publishes a source only while it holds the source's lease,
// every checkpoint write is fenced by the lease's token, and a source
// whose lease is lost stops at once (pipeline.ErrLeaseLost) and waits as
// a standby again. Instances with the same configuration spread the
// sources: none takes more than lease.Share of them while the others are
// alive, an instance above its share hands the excess over (a graceful
// stop: drain, final checkpoint, release), and the survivors take the
// sources of an instance that died once its leases expire.
//
// A source that fails fatally stops alone (logged, its lease released);
// the others go on. Run returns the failed sources' errors when it ends.
// docs/ha.md is the failure model.
package ha
