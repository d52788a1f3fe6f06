package ha

import (
	"fmt"
	"sync"

	"github.com/cdc-outbox/cdc-outbox/checkpoint"
)

// stores are the supervisor's Redis clients: one per distinct Redis (a
// checkpoint configuration but its key), shared by the lease scripts of
// every source on it. A client per source would hold an idle connection
// per source and instance (64 sources, 3 instances: 192 connections for
// the standbys alone); a shared pool opens what the sources use at once.
// Safe for concurrent use.
type stores struct {
	mu     sync.Mutex
	byConn map[string]*checkpoint.Store
}

// get returns a Store of cfg.Key on the shared client of cfg's Redis
// (created at the first call for it).
func (ss *stores) get(cfg checkpoint.Config) *checkpoint.Store {
	conn := cfg
	conn.Key = ""
	id := fmt.Sprintf("%#v", conn) // no pointers: equal settings, equal text
	ss.mu.Lock()
	defer ss.mu.Unlock()
	st, ok := ss.byConn[id]
	if !ok {
		if ss.byConn == nil {
			ss.byConn = map[string]*checkpoint.Store{}
		}
		st = checkpoint.NewStore(cfg)
		ss.byConn[id] = st
	}
	return st.WithKey(cfg)
}

// close closes every client, once no source uses them.
func (ss *stores) close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for id, st := range ss.byConn {
		_ = st.Close()
		delete(ss.byConn, id)
	}
}
