package binlog

import (
	"errors"
	"strings"
	"testing"
)

// The source's own @@server_id is refused as source.server-id and, under
// leases, anywhere in the range of ids the terms draw from (source.server-id
// + token mod ha.server-ids): every term's start refuses it, not only the
// term that draws it (which, before, was given up as "taken" while the
// other terms streamed). It is ErrOwnServerID, never ErrServerID (which
// the ha supervisor answers with the next id of the range).
func TestOwnServerID(t *testing.T) {
	for _, c := range []struct {
		name string
		own  uint32
		cfg  Config
		want string // "" accepted
	}{
		{"single id, another", 1, Config{ServerID: 5701}, ""},
		{"single id, the source's", 1, Config{ServerID: 1}, "source.server-id 1 is the source's own @@server_id: choose another"},
		{"range of 1 is the single id", 7, Config{ServerID: 7, ServerIDFrom: 7, ServerIDCount: 1}, "source.server-id 7 is the source's own"},
		{"range from the source's id, this term on another", 1, Config{ServerID: 5, ServerIDFrom: 1, ServerIDCount: 16},
			"the source's own @@server_id 1 is one of the server_ids 1–16 (source.server-id 1 + lease token mod ha.server-ids 16) this source's publishers register as: set source.server-id so that the range excludes 1, or lower ha.server-ids"},
		{"inside the range", 10, Config{ServerID: 3, ServerIDFrom: 1, ServerIDCount: 16}, "the source's own @@server_id 10 is one of the server_ids 1–16"},
		{"the range's last id", 16, Config{ServerID: 3, ServerIDFrom: 1, ServerIDCount: 16}, "server_ids 1–16"},
		{"just past the range", 17, Config{ServerID: 3, ServerIDFrom: 1, ServerIDCount: 16}, ""},
		{"just before the range", 5700, Config{ServerID: 5703, ServerIDFrom: 5701, ServerIDCount: 16}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ownServerID(c.own, c.cfg)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrOwnServerID) || errors.Is(err, ErrServerID) || !IsFatal(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrOwnServerID (fatal, not ErrServerID) with %q", err, c.want)
			}
		})
	}
}
