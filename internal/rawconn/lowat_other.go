//go:build !linux || 386

package rawconn

import "net"

// HoldWakeups: the low-water mark is raised on Linux only (not 386).
func HoldWakeups(net.Conn, int) func(on bool) bool { return nil }

// HoldAnswers: the low-water mark is raised on Linux only (not 386).
func HoldAnswers(net.Conn) func(on bool) bool { return nil }
