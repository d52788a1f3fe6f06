//go:build linux

package rawconn

import (
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sleeper pauses its caller on a timerfd(2) waited in the runtime's
// network poller: the process wakes once, at the deadline, to the
// nanosecond. time.Sleep's timer wakes it once per millisecond of the
// pause instead (the poller's epoll_wait timeouts are whole milliseconds,
// rounded down: a 2 ms pause is two waits of 1 ms, and a pause ending
// within a millisecond costs a wait of 1 ms more). The calls are raw, as
// this package's reads.
//
// A Sleeper is for one goroutine at a time; Close releases its
// descriptor.
type Sleeper struct {
	f  *os.File
	rc syscall.RawConn
}

// NewSleeper returns a Sleeper, or the error of timerfd_create(2) or of
// registering the descriptor with the poller (then time.Sleep will do).
func NewSleeper() (*Sleeper, error) {
	fd, _, e := syscall.RawSyscall(unix.SYS_TIMERFD_CREATE, unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC, 0)
	if e != 0 {
		return nil, os.NewSyscallError("timerfd_create", e)
	}
	f := os.NewFile(fd, "timerfd") // non-blocking: registered with the poller
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Sleeper{f: f, rc: rc}, nil
}

// Sleep returns after d (at once when d <= 0), or early when the Sleeper
// is closed or the timer cannot be set.
func (s *Sleeper) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))} // no interval; it_value d, relative
	var ok bool
	_ = s.rc.Control(func(fd uintptr) {
		_, _, e := syscall.RawSyscall6(unix.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
		ok = e == 0
	})
	if !ok {
		return
	}
	var expirations uint64
	_ = s.rc.Read(func(fd uintptr) bool {
		for {
			_, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&expirations)), 8)
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			return true
		}
	})
}

// Close releases the timer's descriptor.
func (s *Sleeper) Close() error { return s.f.Close() }
