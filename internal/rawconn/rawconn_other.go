//go:build !linux

package rawconn

import "net"

// Wrap returns c: the raw reads and writes are Linux only.
func Wrap(c net.Conn) net.Conn { return c }
