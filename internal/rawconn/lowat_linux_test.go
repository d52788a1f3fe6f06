//go:build linux && !race && !386

package rawconn

import (
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// fdCall runs f on c's socket.
func fdCall(t *testing.T, c net.Conn, f func(fd int)) {
	t.Helper()
	rc, err := c.(interface {
		SyscallConn() (syscall.RawConn, error)
	}).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(fd uintptr) { f(int(fd)) }); err != nil {
		t.Fatal(err)
	}
}

func sockopt(t *testing.T, c net.Conn, opt int) int {
	t.Helper()
	return getopt(t, c, syscall.SOL_SOCKET, opt)
}

func tcpopt(t *testing.T, c net.Conn, opt int) int {
	t.Helper()
	return getopt(t, c, syscall.IPPROTO_TCP, opt)
}

func getopt(t *testing.T, c net.Conn, level, opt int) int {
	t.Helper()
	var v int
	var err error
	fdCall(t, c, func(fd int) { v, err = syscall.GetsockoptInt(fd, level, opt) })
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// readable polls c's socket for readability for up to ms milliseconds.
func readable(t *testing.T, c net.Conn, ms int) bool {
	t.Helper()
	var n int
	var err error
	fdCall(t, c, func(fd int) {
		n, err = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms) // ppoll(2) where poll(2) is missing (arm64)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// While held, bytes below the mark do not make the socket readable (no
// wake-up of the poller); released with nothing queued, they do. A
// release while bytes are queued leaves the mark raised (the read returns
// them without waiting). The mark stays within a quarter of the receive
// buffer, which holding does not grow (Linux clamps the TCP window only
// when it grows it: tcp_set_rcvlowat); a read while held still returns
// what is there.
func TestHoldWakeups(t *testing.T) {
	r, w := pair(t)
	const limit = 64 << 10
	hold := HoldWakeups(r, limit)
	if hold == nil {
		t.Fatal("no hold for a TCP connection")
	}
	buf := sockopt(t, r, syscall.SO_RCVBUF)
	clamp := tcpopt(t, r, syscall.TCP_WINDOW_CLAMP)
	if !hold(true) {
		t.Fatal("hold(true) reports the mark not raised")
	}
	if got := tcpopt(t, r, syscall.TCP_WINDOW_CLAMP); got != clamp {
		t.Fatalf("window clamp %d → %d when held", clamp, got)
	}
	mark := min(limit, buf/4)
	if got := sockopt(t, r, syscall.SO_RCVLOWAT); got != mark {
		t.Fatalf("low-water mark %d, want %d (receive buffer %d)", got, mark, buf)
	}
	if got := sockopt(t, r, syscall.SO_RCVBUF); got != buf {
		t.Fatalf("receive buffer %d → %d when held: the window would be clamped", buf, got)
	}
	if _, err := w.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if readable(t, r, 100) {
		t.Fatal("100 bytes below the mark made the held socket readable")
	}
	if !hold(false) {
		t.Fatal("released with 100 bytes queued: the mark was lowered, want it kept")
	}
	if got := sockopt(t, r, syscall.SO_RCVLOWAT); got != mark {
		t.Fatalf("low-water mark %d after a release with bytes queued, want %d", got, mark)
	}
	p := make([]byte, 1000)
	if n, err := r.Read(p); n != 100 || err != nil {
		t.Fatalf("read while held: %d, %v; want the 100 bytes", n, err)
	}
	if hold(false) {
		t.Fatal("released with nothing queued: the mark is still raised")
	}
	if got := sockopt(t, r, syscall.SO_RCVLOWAT); got != 1 {
		t.Fatalf("low-water mark %d after release, want 1", got)
	}
	if _, err := w.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if !readable(t, r, 5000) {
		t.Fatal("released socket with 100 bytes queued is not readable")
	}
	if HoldWakeups(struct{ net.Conn }{r}, limit) != nil {
		t.Fatal("a hold for a connection without a socket")
	}
}

// A mark that moves the TCP window clamp (here forced: twice the receive
// buffer, which Linux answers by growing the buffer and clamping the
// window to the mark) is undone at once, the clamp put back, and the mark
// never raised on that socket again.
func TestHoldWakeupsUndoesClamp(t *testing.T) {
	r, _ := pair(t)
	clamp := tcpopt(t, r, syscall.TCP_WINDOW_CLAMP)
	hold := holdWakeups(r, 1<<30, 2, 1, true)
	if hold(true) {
		t.Fatal("a clamping hold reports the mark raised")
	}
	if got := tcpopt(t, r, syscall.TCP_WINDOW_CLAMP); got != clamp {
		t.Fatalf("window clamp %d after the hold, want %d as before", got, clamp)
	}
	if got := sockopt(t, r, syscall.SO_RCVLOWAT); got != 1 {
		t.Fatalf("low-water mark %d after a clamping hold, want 1", got)
	}
	hold(false)
	hold(true)
	if got := sockopt(t, r, syscall.SO_RCVLOWAT); got != 1 {
		t.Fatalf("low-water mark %d: raised again after a clamp", got)
	}
}
