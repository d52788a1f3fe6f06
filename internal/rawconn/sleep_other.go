//go:build !linux

package rawconn

import "time"

// Sleeper is time.Sleep on systems other than Linux.
type Sleeper struct{}

// NewSleeper returns a Sleeper.
func NewSleeper() (*Sleeper, error) { return &Sleeper{}, nil }

// Sleep is time.Sleep(d).
func (*Sleeper) Sleep(d time.Duration) { time.Sleep(d) }

// Close does nothing.
func (*Sleeper) Close() error { return nil }
