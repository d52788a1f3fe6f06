//go:build linux && !386

package rawconn

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HoldWakeups returns a function that, with on, raises c's receive
// low-water mark (SO_RCVLOWAT, socket(7)) to at most limit bytes, so that
// segments arriving while nothing reads (a pause between two reads) do
// not wake the runtime's network poller; without on (a release, before a
// read) it lowers the mark back to one byte unless bytes are queued
// (SIOCINQ, tcp(7)): a read then returns them without waiting, and the
// mark stays raised for the next pause, so that a stream busy at every
// read costs one ioctl(2) per read, not five socket option calls. It
// reports whether the mark is raised after the call: the caller releases
// before each read while it is. Nil when c has no socket (SyscallConn): a
// TLS connection's records are not its socket's bytes.
//
// The mark is at most a quarter of the socket's receive buffer: Linux
// grows the buffer and clamps the TCP window to the mark when the mark
// needs more room than the buffer has (tcp_set_rcvlowat), and the clamp
// stays after the mark is lowered. Below a quarter that needs segments
// taking over four times their payload in memory (Linux 6.7+ counts the
// ratio), possible behind some network drivers: so the window clamp
// (TCP_WINDOW_CLAMP) is read before and after raising the mark, and if it
// changed it is put back and the mark is never raised on that socket
// again. A read while the mark is raised still returns what is there
// (a non-blocking read does not wait for the mark). The calls are raw, as
// this package's reads: the scheduler's system call hooks would wake its
// monitor thread. Linux only (not 386, whose socket calls go through
// socketcall), with or without the race detector.
func HoldWakeups(c net.Conn, limit int) func(on bool) bool {
	return holdWakeups(c, limit, 1, 4, true)
}

// holdWakeups is HoldWakeups with the mark at most num/den of the receive
// buffer (tests raise it to force the clamp); without keep, a release
// lowers the mark whatever is queued (Pace: another goroutine waits in
// the poller, and lowering the mark is what wakes it).
func holdWakeups(c net.Conn, limit int, num, den int32, keep bool) func(on bool) bool {
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
	off := false    // the clamp changed once: the mark stays at one byte
	raised := false // the mark is above one byte
	return func(on bool) bool {
		if off || on == raised {
			return raised
		}
		_ = rc.Control(func(fd uintptr) {
			var queued int32
			var e syscall.Errno
			if on != keep { // a release that keeps, or a raise that does not: what is queued decides
				_, _, e = syscall.RawSyscall(syscall.SYS_IOCTL, fd, unix.SIOCINQ, uintptr(unsafe.Pointer(&queued)))
			}
			if !on {
				if keep && e == 0 && queued > 0 {
					return // the read returns them without waiting; the mark stays for the next pause
				}
				setInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, 1) // without keep: whatever is queued
				raised = false
				return
			}
			if !keep && (e != 0 || queued > 0) {
				// Bytes queued (an answer the last release signalled, its
				// reader not run yet): not raised, for epoll reports the
				// socket by the mark at the time it is polled, and a
				// raised mark would drop that wake-up until the next
				// release.
				return
			}
			buf, ok1 := getInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF)
			clamp, ok2 := getInt(fd, syscall.IPPROTO_TCP, syscall.TCP_WINDOW_CLAMP)
			if !ok1 || !ok2 {
				return
			}
			setInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, max(min(int32(limit), int32(int64(buf)*int64(num)/int64(den))), 1))
			raised = true
			if after, ok := getInt(fd, syscall.IPPROTO_TCP, syscall.TCP_WINDOW_CLAMP); ok && after != clamp {
				setInt(fd, syscall.IPPROTO_TCP, syscall.TCP_WINDOW_CLAMP, clamp)
				setInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, 1)
				raised, off = false, true
			}
		})
		return raised
	}
}

// getInt is getsockopt(2) of an int option, raw.
func getInt(fd uintptr, level, opt int) (int32, bool) {
	var v int32
	size := uint32(unsafe.Sizeof(v))
	_, _, e := syscall.RawSyscall6(syscall.SYS_GETSOCKOPT, fd, uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&size)), 0)
	return v, e == 0
}

// setInt is setsockopt(2) of an int option, raw.
func setInt(fd uintptr, level, opt int, v int32) {
	syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, fd, uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v), 0)
}

// answerMark is the low-water mark of a held answer connection: above a
// produce answer's size (about 50 bytes per partition), far below a
// quarter of any receive buffer.
const answerMark = 16 << 10

// HoldAnswers returns c's function for Pace.Hold: HoldWakeups, except
// that a release lowers the mark whatever is queued (the goroutine
// reading c waits in the poller, and the lowered mark is what wakes it)
// and that the mark is not raised while bytes are queued (their reader
// has not run since a release signalled them). Nil when c has no socket (TLS) or the kernel is older than 4.18, where
// lowering the mark does not signal the socket readable: an answer held
// there would wait for its read deadline.
func HoldAnswers(c net.Conn) func(on bool) bool {
	if !lowerSignals() {
		return nil
	}
	return holdWakeups(c, answerMark, 1, 4, false)
}

// lowerSignals reports whether the running kernel is Linux 4.18 or
// later (uname(2)).
func lowerSignals() bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 4, 18)
}

// kernelAtLeast reports whether a release string ("6.1.0-18-amd64")
// is major.minor or later.
func kernelAtLeast(release string, major, minor int) bool {
	var a, b int
	if n, _ := fmt.Sscanf(release, "%d.%d", &a, &b); n != 2 {
		return false
	}
	return a > major || a == major && b >= minor
}
