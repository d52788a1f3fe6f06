package binlog

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/server"
)

// fakeDB is a MySQL server (go-mysql's server package) whose statements
// the test controls: "SELECT SLEEP" runs for sleep (listed as "Query" in
// SHOW PROCESSLIST meanwhile); "SELECT 1" is answered, unless the server
// is frozen or the statement lost. Frozen, every statement waits for
// good and new connections are accepted, never answered (a SIGSTOPped
// mysqld). Lost, "SELECT 1" waits for good while the server lists its
// connection as idle ("Sleep"): the answer lost on the way.
type fakeDB struct {
	ln     net.Listener
	srv    *server.Server
	sleep  time.Duration
	mu     sync.Mutex
	frozen bool
	lost   bool
	conns  map[uint32]string // connection id -> Command
	held   []net.Conn
	stop   chan struct{}
}

func newFakeDB(t *testing.T) *fakeDB {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	db := &fakeDB{ln: ln, srv: server.NewServer("8.0.11", mysql.DEFAULT_COLLATION_ID, mysql.AUTH_NATIVE_PASSWORD, nil, nil),
		conns: map[uint32]string{}, stop: make(chan struct{})}
	go db.accept()
	t.Cleanup(func() {
		ln.Close()
		close(db.stop)
		db.mu.Lock()
		defer db.mu.Unlock()
		for _, c := range db.held {
			c.Close()
		}
	})
	return db
}

func (db *fakeDB) set(f func()) {
	db.mu.Lock()
	defer db.mu.Unlock()
	f()
}

func (db *fakeDB) accept() {
	for {
		nc, err := db.ln.Accept()
		if err != nil {
			return
		}
		db.mu.Lock()
		db.held = append(db.held, nc)
		frozen := db.frozen
		db.mu.Unlock()
		if frozen {
			continue // accepted by the kernel, never answered
		}
		go func() {
			h := &fakeHandler{db: db}
			c, err := db.srv.NewConn(nc, "u", "", h)
			if err != nil {
				return
			}
			h.id = c.ConnectionID()
			db.set(func() { db.conns[h.id] = "Sleep" })
			for c.HandleCommand() == nil {
			}
		}()
	}
}

type fakeHandler struct {
	server.EmptyHandler
	db *fakeDB
	id uint32
}

func (h *fakeHandler) HandleQuery(q string) (*mysql.Result, error) {
	db := h.db
	db.mu.Lock()
	frozen, lost := db.frozen, db.lost
	db.mu.Unlock()
	if frozen || (lost && q == "SELECT 1") {
		<-db.stop
		return nil, errors.New("stopped")
	}
	switch {
	case strings.HasPrefix(q, "SELECT SLEEP"):
		db.set(func() { db.conns[h.id] = "Query" })
		select {
		case <-time.After(db.sleep):
		case <-db.stop:
		}
		db.set(func() { db.conns[h.id] = "Sleep" })
	case q == "SHOW PROCESSLIST":
		var rows [][]any
		db.mu.Lock()
		for id, cmd := range db.conns {
			rows = append(rows, []any{uint64(id), "u", cmd})
		}
		db.mu.Unlock()
		rs, err := mysql.BuildSimpleTextResultset([]string{"Id", "User", "Command"}, rows)
		if err != nil {
			return nil, err
		}
		return mysql.NewResult(rs), nil
	}
	rs, err := mysql.BuildSimpleTextResultset([]string{"1"}, [][]any{{int64(1)}})
	if err != nil {
		return nil, err
	}
	return mysql.NewResult(rs), nil
}

func (db *fakeDB) config() Config {
	cfg := DefaultConfig()
	cfg.Addr, cfg.User, cfg.Password, cfg.SSLMode = db.ln.Addr().String(), "u", "", SSLDisabled // no password: no RSA exchange
	cfg.ReadTimeout = 300 * time.Millisecond
	return cfg
}

// A statement that runs longer than source.read-timeout is not cut: the
// server, asked on a second connection, still runs it.
func TestStatementLongerThanReadTimeout(t *testing.T) {
	db := newFakeDB(t)
	db.sleep = 1500 * time.Millisecond // 5 read timeouts
	c, err := Dial(context.Background(), db.config(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Execute("SELECT SLEEP(1.5)"); err != nil {
		t.Fatalf("a statement the server runs for 5 read timeouts: %v", err)
	}
}

// A database that freezes after the handshake (the statement unanswered,
// new connections held), or a connection whose answer is lost (the
// server alive, the connection idle on its side): the statement fails
// within a few read timeouts with a *StallError naming
// source.read-timeout and the address (before: a wait for good).
func TestStatementStalled(t *testing.T) {
	for name, fault := range map[string]func(db *fakeDB){
		"frozen": func(db *fakeDB) { db.frozen = true },
		"lost":   func(db *fakeDB) { db.lost = true },
	} {
		t.Run(name, func(t *testing.T) {
			db := newFakeDB(t)
			cfg := db.config()
			c, err := Dial(context.Background(), cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			db.set(func() { fault(db) })
			done := make(chan error, 1)
			start := time.Now()
			go func() { _, err := c.Execute("SELECT 1"); done <- err }()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the statement still waits after 30 s")
			}
			t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
			var se *StallError
			if !errors.As(err, &se) || !errors.Is(err, ErrStalled) || se.Handshake ||
				!strings.Contains(err.Error(), "source.read-timeout") || !strings.Contains(err.Error(), cfg.Addr) {
				t.Fatalf("err = %v, want a *StallError naming source.read-timeout and %s", err, cfg.Addr)
			}
			if IsFatal(err) {
				t.Error("a stall is fatal, want retryable")
			}
		})
	}
}

// A server that accepts the connection and never greets: Dial fails
// within about source.read-timeout with a *StallError (handshake).
func TestDialStalled(t *testing.T) {
	db := newFakeDB(t)
	db.set(func() { db.frozen = true })
	cfg := db.config()
	_, err := Dial(context.Background(), cfg, "")
	var se *StallError
	if !errors.As(err, &se) || !se.Handshake || !strings.Contains(err.Error(), "source.read-timeout") {
		t.Fatalf("err = %v, want a *StallError of the handshake naming source.read-timeout", err)
	}
}
