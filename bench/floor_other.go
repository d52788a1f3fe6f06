//go:build !linux

package main

import (
	"fmt"
	"os"
	"time"
)

// floor is Linux only (timerfd, SO_RCVLOWAT).
func (b *bench) floor(int, int, int, time.Duration) {
	fmt.Fprintln(os.Stderr, "bench: round floor: Linux only")
}

func floorMain(string, float64, string, time.Duration) {
	fail(fmt.Errorf("the round floor is Linux only"))
}
