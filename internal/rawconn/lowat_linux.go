//go:build linux

package rawconn

import (
	"net"
	"syscall"
	"unsafe"
)

// HoldWakeups returns a function that, with on, raises c's receive
// low-water mark (SO_RCVLOWAT, socket(7)) to at most limit bytes, so that
// segments arriving while nothing reads (a pause between two reads) do
// not wake the runtime's network poller; without on it lowers the mark
// back to one byte. Nil when c has no socket (SyscallConn): a TLS
// connection's records are not its socket's bytes.
//
// The mark is at most a quarter of the socket's receive buffer: Linux
// grows the buffer and clamps the TCP window to the mark when the mark
// needs more room than the buffer has (tcp_set_rcvlowat), and the clamp
// stays after the mark is lowered; below a quarter it never does. A read
// while the mark is raised still returns what is there; the caller lowers
// it before its next read that may wait. The calls are raw, as this
// package's reads: the scheduler's system call hooks would wake its
// monitor thread. Linux only, with or without the race detector.
func HoldWakeups(c net.Conn, limit int) func(on bool) {
	sc, ok := c.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func(on bool) {
		_ = rc.Control(func(fd uintptr) {
			mark := int32(1)
			if on {
				var buf int32
				size := uint32(unsafe.Sizeof(buf))
				if _, _, e := syscall.RawSyscall6(syscall.SYS_GETSOCKOPT, fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF,
					uintptr(unsafe.Pointer(&buf)), uintptr(unsafe.Pointer(&size)), 0); e != 0 {
					return
				}
				mark = max(min(int32(limit), buf/4), 1)
			}
			syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, fd, syscall.SOL_SOCKET, syscall.SO_RCVLOWAT,
				uintptr(unsafe.Pointer(&mark)), unsafe.Sizeof(mark), 0)
		})
	}
}
