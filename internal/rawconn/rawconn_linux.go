//go:build linux && !race

package rawconn

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Conn is a *net.TCPConn whose Read and Write bypass the scheduler's
// system call hooks (see the package documentation).
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn
}

// Wrap returns c as a *Conn when it is a *net.TCPConn, else c.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &Conn{TCPConn: tc, rc: rc}
}

// Read reads up to len(p) bytes: read(2), waiting for readability (and
// the read deadline) in the network poller while the socket is empty.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			n, errno = int(r), e
			return true
		}
	})
	if err == nil && errno != 0 {
		err = os.NewSyscallError("read", errno)
		n = 0
	}
	if err != nil {
		return 0, c.opError("read", err)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p: write(2) until done, waiting for writability
// (and the write deadline) in the network poller while the socket's
// buffer is full.
func (c *Conn) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err == nil && errno != 0 {
		err = os.NewSyscallError("write", errno)
	}
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// opError wraps err as net.Conn's Read and Write do. The raw calls'
// own errors (a deadline, a closed connection) are *net.OpError already
// ("raw-read", "raw-write"): their cause is kept, not the wrapper.
func (c *Conn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
