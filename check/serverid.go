package check

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/cdc-outbox/cdc-outbox/lease"
)

// serverIDFacts is what the server_id check of one source decides on.
//
// Under leases (ha.enabled) the publisher of the term with token T
// registers as source.server-id + T mod ha.server-ids (lease.ServerID),
// so every id of that range must be free of other replicas; the one of the
// current term belongs to the lease holder.
type serverIDFacts struct {
	Base uint32 // source.server-id
	N    int    // ids from Base the source's publishers use (lease.Config.IDs)
	Own  uint32 // the source's own @@server_id
	// Leases: ha.enabled (the id comes with the lease's token).
	Leases bool
	// LeaseErr: the lease could not be read (Holder, Token, Last unknown).
	LeaseErr error
	Holder   string // the lease holder's instance id, "" when the lease is free
	Token    uint64 // the holder's token
	Last     uint64 // the last token issued (the fence counter), 0: none yet
	Replicas []binlog.Replica
	// ListErr: the replicas could not be listed (a missing privilege).
	ListErr error
}

// level of a finding.
type level int

const (
	levelOK level = iota
	levelWarn
	levelFail
)

type finding struct {
	level level
	msg   string
}

// inRange reports whether id is one of the source's ids.
func (f serverIDFacts) inRange(id uint32) bool {
	return id >= f.Base && uint64(id) < uint64(f.Base)+uint64(max(f.N, 1))
}

// span names the source's ids for messages.
func (f serverIDFacts) span() string {
	if f.N <= 1 {
		return fmt.Sprintf("server_id %d", f.Base)
	}
	return fmt.Sprintf("server_ids %d–%d (source.server-id %d + lease token mod ha.server-ids %d)", f.Base, f.Base+uint32(f.N)-1, f.Base, f.N)
}

// serverIDFindings decides the server_id check: a FAIL for the source's
// own @@server_id in the range and for each replica in it that is not the
// lease holder's registration; a WARN for the registration of the last
// term while the lease is free (a publisher that stopped or was killed;
// it goes away within seconds), for replicas in the range when the lease
// cannot be read, and when the replicas cannot be listed. When nothing
// failed, the last finding is an OK one summarising the check for the
// source's OK line; it names the holder's registration when seen.
func serverIDFindings(f serverIDFacts) []finding {
	var out []finding
	fix := fmt.Sprintf("set source.server-id so that %s unused by other replicas (see SHOW SLAVE HOSTS / SHOW REPLICAS)", isAre(f))
	if f.N > 1 {
		fix += ", or lower ha.server-ids"
	}
	if f.inRange(f.Own) {
		if f.N <= 1 {
			out = append(out, finding{levelFail, fmt.Sprintf("source.server-id %d is the source's own @@server_id: choose another", f.Base)})
		} else {
			out = append(out, finding{levelFail, fmt.Sprintf("the source's own @@server_id %d is one of the %s this source's publishers register as: set source.server-id so that the range excludes %d",
				f.Own, f.span(), f.Own)})
		}
	}
	if f.ListErr != nil {
		out = append(out, finding{levelWarn, fmt.Sprintf("cannot list replicas, so a server-id conflict is not checked (%v)", f.ListErr)})
	}
	rs := slices.Clone(f.Replicas)
	slices.SortFunc(rs, func(a, b binlog.Replica) int { return cmp.Compare(a.ServerID, b.ServerID) })
	held := ""
	for _, r := range rs {
		if !f.inRange(r.ServerID) {
			continue
		}
		switch {
		case !f.Leases:
			out = append(out, finding{levelFail, fmt.Sprintf("replica %s already uses server_id %d: if it is a cdc-outbox publisher with this configuration, stop it first; otherwise set source.server-id to an unused value (see SHOW SLAVE HOSTS / SHOW REPLICAS)",
				r.Host, r.ServerID)})
		case f.LeaseErr != nil:
			out = append(out, finding{levelWarn, fmt.Sprintf("replica %s uses server_id %d, one of the %s this source's publishers register as; the lease cannot be read (%v), so whether it is this source's publisher is not checked: if it is not, %s",
				r.Host, r.ServerID, f.span(), f.LeaseErr, fix)})
		case f.Holder != "" && r.ServerID == lease.ServerID(f.Base, f.Token, f.N):
			held = fmt.Sprintf("server_id %d is the lease holder's (%s, token %d, host %s)", r.ServerID, f.Holder, f.Token, r.Host)
		case f.Holder == "" && f.Last > 0 && r.ServerID == lease.ServerID(f.Base, f.Last, f.N):
			out = append(out, finding{levelWarn, fmt.Sprintf("replica %s uses server_id %d, the id of this source's last lease term (token %d), and no instance holds the lease: "+
				"a publisher of this configuration that stopped or was killed, whose registration goes away within seconds; if it stays, it is another replica: %s",
				r.Host, r.ServerID, f.Last, fix)})
		default:
			cur := "no instance holds the lease"
			if f.Holder != "" {
				cur = fmt.Sprintf("the lease holder %s (token %d) registers as %d", f.Holder, f.Token, lease.ServerID(f.Base, f.Token, f.N))
			}
			out = append(out, finding{levelFail, fmt.Sprintf("replica %s uses server_id %d, one of the %s this source's publishers register as, and is not the current term's (%s): "+
				"a term that draws %d finds it taken and stops the source on its instance (replica server_id conflict, fatal); %s (a paused or killed publisher of an earlier term shows here only for seconds: check again)",
				r.Host, r.ServerID, f.span(), cur, r.ServerID, fix)})
		}
	}
	warned := false
	for _, x := range out {
		if x.level == levelFail {
			return out
		}
		warned = true
	}
	msg := f.span() + " unused"
	switch {
	case f.ListErr != nil:
		msg = f.span() + " not checked (see WARN)"
	case warned:
		msg = f.span() + ": see WARN"
	case f.N > 1 || f.Leases:
		msg += " by other replicas"
	}
	if held != "" {
		msg += "; " + held
	}
	return append(out, finding{levelOK, msg})
}

func isAre(f serverIDFacts) string {
	if f.N <= 1 {
		return fmt.Sprintf("%d is", f.Base)
	}
	return fmt.Sprintf("%d–%d are", f.Base, f.Base+uint32(f.N)-1)
}

// serverIDFactsOf gathers the facts for cfg's source from srv and, only
// when a replica uses one of the source's ids under leases, from the
// lease in Redis (store).
func serverIDFactsOf(ctx context.Context, cfg config.Config, srv *binlog.Server, store *checkpoint.Store) serverIDFacts {
	f := serverIDFacts{Base: cfg.Source.ServerID, N: cfg.HA.IDs(), Own: srv.ServerID(), Leases: cfg.HA.Enabled}
	rs, err := srv.Replicas()
	if err != nil {
		f.ListErr = err
		return f
	}
	f.Replicas = rs
	if !f.Leases || !slices.ContainsFunc(rs, func(r binlog.Replica) bool { return f.inRange(r.ServerID) }) {
		return f
	}
	h, err := lease.Holder(ctx, store.Client(), store.Key())
	if err != nil {
		f.LeaseErr = err
		return f
	}
	if h != "" {
		owner, token, ok := lease.ParseHolder(h)
		if !ok {
			f.LeaseErr = fmt.Errorf("lease key %s holds %q, not \"<owner> <token>\"", checkpoint.LeaseKey(store.Key()), h)
			return f
		}
		f.Holder, f.Token = owner, token
		return f
	}
	if f.Last, err = lease.LastToken(ctx, store.Client(), store.Key()); err != nil {
		f.LeaseErr = err
	}
	return f
}
