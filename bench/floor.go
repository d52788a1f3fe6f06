//go:build linux

package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
	"unsafe"

	"github.com/cdc-outbox/cdc-outbox/internal/rawconn"
	"golang.org/x/sync/errgroup"
)

// The round floor: what a linger round costs on this machine with no work
// in it, beside the live cost it bounds. A source process writes
// transactions over loopback at the live case's rate and sizes (one
// write(2) per transaction, as the server sends them), a peer answers
// each request with 100 bytes; the measured client, on one scheduler
// processor as the publisher at this rate (package procs), does only a
// round's system calls with the publisher's mechanics: the pause on a
// timerfd (rawconn.Sleeper) with the source's receive low-water mark
// raised (rawconn.HoldWakeups), one read of what arrived, the answers of
// the previous round read in the same wake-up (as with rawconn.Pace, more
// cheaply), and
// one write of a request 1.5 times the bytes read, copied once. Its CPU
// is what this round design costs in Go at that many rounds per second,
// before any work in the rounds; the wake-up alone (the same pause with
// nothing else) is its first part.

// floorBytes are the binlog bytes of a transaction of rows outbox rows
// with the bench's 500-byte payloads (GTID, BEGIN, Annotate_rows,
// Table_map and Xid events, then about 650 bytes a row): about what the
// live case's stream brings.
func floorBytes(rows int) int { return 300 + rows*650 }

type floorResult struct {
	Cores       float64 `json:"cores"`
	Rounds      int     `json:"rounds"`
	Seconds     float64 `json:"seconds"`
	BytesRound  float64 `json:"bytes_per_round"`
	WakeCores   float64 `json:"wake_cores"`
	WakeUps     int     `json:"wake_ups"`
	WakeSeconds float64 `json:"wake_seconds"`
}

// floor runs the round floor for events/s in transactions of minRows to
// maxRows rows with the publisher's default linger (3 ms), for d, and
// adds its rows.
func (b *bench) floor(events, minRows, maxRows int, d time.Duration) {
	txns := float64(events) / (float64(minRows+maxRows) / 2)
	cmd := exec.Command(os.Args[0], "-floor-role", "client", "-floor-txns", fmt.Sprint(txns),
		"-floor-rows", fmt.Sprintf("%d-%d", minRows, maxRows), "-floor-d", d.String())
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: round floor:", err)
		return
	}
	var r floorResult
	if err := json.Unmarshal(out, &r); err != nil {
		fmt.Fprintln(os.Stderr, "bench: round floor:", err, string(out))
		return
	}
	shape := fmt.Sprintf("%d–%d-row", minRows, maxRows)
	if minRows == maxRows {
		shape = fmt.Sprintf("%d-row", maxRows)
	}
	perSec := float64(r.Rounds) / r.Seconds
	b.add("round floor: a wake-up alone (3 ms timerfd pause, one scheduler processor)",
		fmt.Sprintf("%.1f µs CPU", r.WakeCores*r.WakeSeconds/float64(r.WakeUps)*1e6),
		fmt.Sprintf("%d wake-ups (%.0f/s): %.3f cores; the client's CPU (user+system) from getrusage", r.WakeUps, float64(r.WakeUps)/r.WakeSeconds, r.WakeCores))
	b.add(fmt.Sprintf("round floor at %d events/s in %s transactions (no decoding, routing or encoding)", events, shape),
		fmt.Sprintf("%.3f cores (%.0f µs CPU per round)", r.Cores, r.Cores/perSec*1e6),
		fmt.Sprintf("%.0f rounds/s of %.1f KB, linger 3 ms: the pause, the source's read, the answer's read and the request's write over loopback, the bytes copied once; what this round design costs in Go here before any work in it", perSec, r.BytesRound/1024))
}

// floorMain runs a role of the round floor (-floor-role): "client"
// measures and prints a floorResult, starting the "peer" (the source and
// the answering broker) as a process of its own.
func floorMain(role string, txns float64, rows string, d time.Duration) {
	var lo, hi int
	if _, err := fmt.Sscanf(rows, "%d-%d", &lo, &hi); err != nil || lo < 1 || hi < lo {
		fail(fmt.Errorf("-floor-rows %q: want N-M", rows))
	}
	if role == "peer" {
		floorPeer(txns, lo, hi)
		return
	}
	var r floorResult
	// the wake-up alone
	sl, err := rawconn.NewSleeper()
	fail(err)
	c0, t0 := selfCPU(), time.Now()
	for time.Since(t0) < d/3 {
		sl.Sleep(3 * time.Millisecond)
		r.WakeUps++
	}
	r.WakeSeconds = time.Since(t0).Seconds()
	r.WakeCores = (selfCPU() - c0) / r.WakeSeconds

	peer := exec.Command(os.Args[0], "-floor-role", "peer", "-floor-txns", fmt.Sprint(txns), "-floor-rows", rows)
	peer.Stderr = os.Stderr
	pout, err := peer.StdoutPipe()
	fail(err)
	fail(peer.Start())
	err = floorRounds(&r, sl, pout, d)
	_ = peer.Process.Kill() // before fail's exit: a peer left would wait in Accept for ever
	_ = peer.Wait()
	fail(err)
	fail(json.NewEncoder(os.Stdout).Encode(r))
}

// floorRounds connects to the peer whose addresses come on pout and runs
// the rounds for d, filling r.
func floorRounds(r *floorResult, sl *rawconn.Sleeper, pout io.Reader, d time.Duration) error {
	var srcAddr, brkAddr string
	if _, err := fmt.Fscan(pout, &srcAddr, &brkAddr); err != nil {
		return fmt.Errorf("round floor: peer: %w", err)
	}
	// Each connection as the publisher's (rawconn.Wrap: raw reads and
	// writes, where the build has them), with its socket for the calls.
	dial := func(addr string) (net.Conn, *net.TCPConn, syscall.RawConn, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, nil, nil, err
		}
		tc, ok := c.(*net.TCPConn)
		if !ok {
			c.Close()
			return nil, nil, nil, fmt.Errorf("round floor: %s: not a TCP connection", addr)
		}
		sc, err := tc.SyscallConn()
		return rawconn.Wrap(tc), tc, sc, err
	}
	src, srcTCP, _, err := dial(srcAddr)
	if err != nil {
		return err
	}
	defer src.Close()
	brk, _, brc, err := dial(brkAddr)
	if err != nil {
		return err
	}
	defer brk.Close()
	hold := rawconn.HoldWakeups(srcTCP, 64<<10)
	// The answers are read without waiting at the start of each round;
	// their mark keeps them from waking the poller meanwhile (cheaper than
	// rawconn.Pace, which lowers and raises it each round and wakes the
	// reader goroutine).
	_ = brc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, 16<<10)
	})
	ans := make([]byte, 4096)
	readAnswers := func() {
		_ = brc.Control(func(fd uintptr) {
			for {
				n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&ans[0])), uintptr(len(ans)))
				if e != 0 || int(n) < len(ans) {
					return
				}
			}
		})
	}
	buf := make([]byte, 64<<10)
	req := make([]byte, 0, 256<<10)
	held, bytes := false, 0
	from := time.Now()
	c0, t0 := selfCPU(), time.Now()
	for time.Since(t0) < d {
		if wait := time.Until(from.Add(3 * time.Millisecond)); wait > 0 {
			if hold != nil && !held {
				held = hold(true)
			}
			sl.Sleep(wait)
		}
		if held {
			held = hold(false)
		}
		n, err := src.Read(buf)
		if err != nil {
			return err
		}
		from = time.Now()
		readAnswers()
		m := n + n/2
		req = binary.BigEndian.AppendUint32(req[:0], uint32(m))
		for len(req) < 4+m {
			req = append(req, buf[:min(n, 4+m-len(req))]...)
		}
		if _, err := brk.Write(req); err != nil {
			return err
		}
		r.Rounds++
		bytes += n
	}
	r.Seconds = time.Since(t0).Seconds()
	r.Cores = (selfCPU() - c0) / r.Seconds
	r.BytesRound = float64(bytes) / float64(max(r.Rounds, 1))
	return nil
}

// selfCPU returns this process's user+system CPU seconds (getrusage(2):
// microseconds, where /proc's stat counts 10 ms ticks, coarse over the
// wake-up loop's few seconds).
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)).Seconds()
}

// floorPeer listens for the client's two connections (printing their
// addresses): it writes transactions of lo..hi rows to the first at txns a
// second (exponential gaps), and answers each length-prefixed request on
// the second with 100 bytes. It returns when either connection fails (the
// client closed them, or was killed).
func floorPeer(txns float64, lo, hi int) {
	ls, err := net.Listen("tcp", "127.0.0.1:0")
	fail(err)
	lb, err := net.Listen("tcp", "127.0.0.1:0")
	fail(err)
	fmt.Println(ls.Addr(), lb.Addr())
	src, err := ls.Accept()
	fail(err)
	brk, err := lb.Accept()
	fail(err)
	var g errgroup.Group
	g.Go(func() error {
		defer src.Close()
		answer, hdr := make([]byte, 100), make([]byte, 4)
		for {
			if _, err := io.ReadFull(brk, hdr); err != nil {
				return err
			}
			if _, err := io.CopyN(io.Discard, brk, int64(binary.BigEndian.Uint32(hdr))); err != nil {
				return err
			}
			if _, err := brk.Write(answer); err != nil {
				return err
			}
		}
	})
	g.Go(func() error {
		defer brk.Close()
		txn := make([]byte, floorBytes(hi))
		next := time.Now()
		for {
			next = next.Add(time.Duration(rand.ExpFloat64() / txns * float64(time.Second)))
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			if _, err := src.Write(txn[:floorBytes(lo+rand.IntN(hi-lo+1))]); err != nil {
				return err
			}
		}
	})
	_ = g.Wait()
}
