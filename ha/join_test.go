package ha

import "testing"

func TestJoinWait(t *testing.T) {
	for _, c := range []struct {
		sources  int
		previous string
		want     bool
	}{
		{1, "", false},                     // one source: nothing to spread
		{2, "", true},                      // several: see the others first
		{64, "", true},                     //
		{64, "vm-0123456789abcdef", false}, // a restart taking its predecessor's leases at once
		{1, "vm-0123456789abcdef", false},
	} {
		if got := joinWait(c.sources, c.previous); got != c.want {
			t.Errorf("joinWait(%d, %q) = %v, want %v", c.sources, c.previous, got, c.want)
		}
	}
}
