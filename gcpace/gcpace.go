package gcpace

import (
	"context"
	"os"
	"runtime"
)

// Ballast holds the headroom's allocation while Run runs.
type Ballast struct {
	b []byte
}

// New allocates a ballast of headroom bytes, or returns nil when headroom
// is 0 or less, or the operator set GOGC or GOMEMLIMIT in the environment
// (then the runtime's own pacing stays). Call it early: an allocation this
// large taken from memory the runtime has not used yet needs no zeroing,
// so its pages stay untouched.
func New(headroom int64) *Ballast {
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, ok := os.LookupEnv(k); ok {
			return nil
		}
	}
	if headroom <= 0 {
		return nil
	}
	return &Ballast{b: make([]byte, headroom)}
}

// Size returns the ballast's size in bytes (0 once Run returned).
func (b *Ballast) Size() int { return len(b.b) }

// Run keeps the ballast until ctx is cancelled, then releases it (the next
// collection frees it) and returns nil.
func (b *Ballast) Run(ctx context.Context) error {
	<-ctx.Done()
	runtime.KeepAlive(b.b)
	b.b = nil
	return nil
}
