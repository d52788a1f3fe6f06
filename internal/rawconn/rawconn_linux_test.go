//go:build linux && !race

package rawconn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// pair returns a wrapped client connection and the server side of a
// loopback TCP connection.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	w := Wrap(c)
	if _, ok := w.(*Conn); !ok {
		t.Fatalf("Wrap(*net.TCPConn) = %T, want *Conn", w)
	}
	t.Cleanup(func() { w.Close(); srv.Close() })
	return w, srv
}

// TestReadWrite: bytes both ways, a write larger than the socket buffers
// (it waits for writability and completes), io.EOF when the peer closes.
func TestReadWrite(t *testing.T) {
	c, srv := pair(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(srv, int64(len(big))))
		got <- b
		srv.Write([]byte("pong"))
		srv.Close()
	}()
	if n, err := c.Write(big); err != nil || n != len(big) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(big))
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not what was written", len(b))
	}
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "pong" {
		t.Fatalf("ReadAll = %q, %v; want pong, nil (io.EOF at the end)", b, err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the end = %d, %v; want 0, io.EOF", n, err)
	}
}

// TestErrors: a read deadline gives a timeout error as net.Conn's does,
// a read after Close gives net.ErrClosed, a write to a reset peer fails.
func TestErrors(t *testing.T) {
	c, srv := pair(t)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.Read(make([]byte, 8))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v (%T), want a net.Error with Timeout and os.ErrDeadlineExceeded", err, err)
	}
	if strings.Contains(err.Error(), "raw-read") {
		t.Errorf("Read past the deadline: %q, want net.Conn's message (read tcp a->b: i/o timeout)", err)
	}
	if tc, ok := srv.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with RST
	}
	srv.Close()
	_ = c.SetDeadline(time.Time{})
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = c.Write([]byte("after the reset"))
		time.Sleep(time.Millisecond)
	}
	var op *net.OpError
	if !errors.As(werr, &op) || op.Op != "write" {
		t.Fatalf("Write to a reset peer: %v, want a *net.OpError of write", werr)
	}
	c.Close()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
	}
}

func TestWrapOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if w := Wrap(a); w != a {
		t.Fatalf("Wrap(pipe) = %T, want the pipe itself", w)
	}
}
