// Package rawconn wraps a TCP connection so that its reads and writes
// are read(2) and write(2) on the non-blocking socket made with
// syscall.RawSyscall, waiting in the runtime's network poller as net does.
//
// Why: every system call made through syscall.Syscall (net.Conn's Read
// and Write) tells the scheduler it entered a system call, and when the
// process was idle before it (every processor idle: a publisher between
// two small transactions) that wakes the runtime's monitor thread
// (sysmon), which then polls every 20 µs until the process is idle
// again. At 5,000 events/s in 1–10-row transactions those polls were the
// most frequent context switches of the publisher (BENCHMARKS.md, "Live
// cost of small transactions"). A read or write of a non-blocking socket
// never blocks, so it needs no hand-off of its processor: RawSyscall is
// what the runtime itself uses for such calls.
//
// Sleeper is a pause on a timerfd(2) waited in the same poller: one
// wake-up at its end, where a Go timer wakes the process once per
// millisecond of the pause (the poller's timeouts are whole
// milliseconds); the binlog stream's linger uses it.
//
// Errors are what net.Conn returns: *net.OpError wrapping the errno
// (os.SyscallError), os.ErrDeadlineExceeded or net.ErrClosed; io.EOF at
// the end of the stream. Wrap returns other connections (TLS, pipes)
// unchanged; on systems other than Linux, and in builds with the race
// detector (-race: its happens-before edges through sockets come from
// syscall.Read and syscall.Write), it wraps nothing.
package rawconn
