//go:build !linux

package rawconn

import "net"

// HoldWakeups: the low-water mark is raised on Linux only.
func HoldWakeups(net.Conn, int) func(on bool) { return nil }
