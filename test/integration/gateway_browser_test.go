//go:build integration && browser

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The gateway example in Debian's headless Chromium (make test-gateway):
// two tabs, user 1 and user 2, chat through the real chain page → POST
// /api/send → MariaDB → cdc-outbox → Kafka → gateway (package consumer) →
// WebSocket. Across a publisher SIGKILL and restart, a gateway restart
// (messages written meanwhile by "another device"), and user 2 going
// offline and coming back in a new tab, every message appears in every tab
// once, in seq_no order.
func TestGatewayBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not installed: apt-get install chromium (make test-gateway does it as root)")
	}
	e := newEnv(t)
	pub := e.start()
	gw := e.startGateway(t)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("headless", "new"))...)
	defer cancelAlloc()
	tabA, closeA := chromedp.NewContext(alloc)
	defer closeA()
	open := func(ctx context.Context, user, peer int) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/?user=%d&peer=%d", gw.url, user, peer))); err != nil {
			t.Fatalf("open the page for user %d: %v", user, err)
		}
	}
	open(tabA, 1, 2)
	tabB, closeB := chromedp.NewContext(tabA) // a second tab of the same browser
	open(tabB, 2, 1)
	waitTab(t, tabA, "user 1 online", 30*time.Second, func(s chatState) bool { return s.Connected })
	waitTab(t, tabB, "user 2 online", 30*time.Second, func(s chatState) bool { return s.Connected })

	var want []string // the conversation's texts in seq_no order
	send := func(tab context.Context, from int, text string) {
		t.Helper()
		type sent struct {
			SeqNo int `json:"seq_no"`
		}
		res, err := chromedp.Run(tab, chromedp.Evaluate[sent](fmt.Sprintf("window.sendMessage(%q)", text), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("user %d sends %q: %v", from, text, err)
		}
		want = append(want, text)
		if res.SeqNo != len(want) {
			t.Fatalf("%q got seq_no %d, want %d", text, res.SeqNo, len(want))
		}
	}
	bOnline := true
	chat := func(n int, tag string) {
		for i := 1; i <= n; i++ {
			if i%3 == 0 && bOnline {
				send(tabB, 2, fmt.Sprintf("B→A %s %d", tag, i))
			} else {
				send(tabA, 1, fmt.Sprintf("A→B %s %d", tag, i))
			}
		}
	}
	all := func(s chatState) bool { return len(s.Received) >= len(want) }

	chat(9, "hello")
	waitTab(t, tabB, "the first messages in tab B", 30*time.Second, all)

	// The publisher is killed mid-conversation: messages are committed but
	// not published until it restarts from its checkpoint (and resends).
	waitFor(t, "a checkpoint", 30*time.Second, func() bool { return e.checkpoint() != nil })
	pub.kill(t)
	chat(6, "while the publisher is down")
	pub = e.start()
	chat(6, "after the publisher restart")
	waitTab(t, tabA, "every message in tab A", 60*time.Second, all)
	waitTab(t, tabB, "every message in tab B", 60*time.Second, all)

	// The gateway restarts; user 1 writes from another device meanwhile.
	gw.stop(t)
	for i := 1; i <= 4; i++ {
		text := fmt.Sprintf("A→B from the phone %d", i)
		e.sendDirect(t, 1, 2, text)
		want = append(want, text)
	}
	gw = e.startGateway(t, gw.addr)
	waitTab(t, tabB, "tab B reconnected", 30*time.Second, func(s chatState) bool { return s.Connected && s.Connects >= 2 })
	chat(6, "after the gateway restart")
	waitTab(t, tabA, "every message in tab A", 60*time.Second, all)
	waitTab(t, tabB, "every message in tab B", 60*time.Second, all)
	checkTab(t, tabB, "tab B", want)

	// User 2 goes offline; user 1 keeps writing; user 2 comes back in a new tab.
	closeB()
	bOnline = false
	chat(5, "while B is offline")
	pub.kill(t)
	chat(2, "while B is offline and the publisher down")
	pub = e.start()
	tabB2, closeB2 := chromedp.NewContext(tabA)
	defer closeB2()
	open(tabB2, 2, 1)
	waitTab(t, tabB2, "user 2 back online with every message", 60*time.Second, all)
	waitTab(t, tabA, "every message in tab A", 60*time.Second, all)
	checkTab(t, tabA, "tab A", want)
	checkTab(t, tabB2, "tab B (new)", want)
	_ = pub.stop(t, 20*time.Second)
}

// chatState is the page's window.chatState.
type chatState struct {
	Connected bool `json:"connected"`
	Connects  int  `json:"connects"`
	Dups      int  `json:"dups"`
	Disorder  int  `json:"disorder"`
	Received  []struct {
		Conv string `json:"conv"`
		Seq  int    `json:"seq"`
		Text string `json:"text"`
		Via  string `json:"via"`
	} `json:"received"`
}

func tabState(t *testing.T, tab context.Context) chatState {
	t.Helper()
	raw, err := chromedp.Run(tab, chromedp.Evaluate[string]("JSON.stringify(window.chatState)"))
	if err != nil {
		t.Fatalf("read the page's state: %v", err)
	}
	var s chatState
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func waitTab(t *testing.T, tab context.Context, what string, timeout time.Duration, ok func(chatState) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := tabState(t, tab)
		if ok(s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: connected=%v, %d messages received", timeout, what, s.Connected, len(s.Received))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkTab: the tab shows exactly want, once each, seq_no 1, 2, … in order.
func checkTab(t *testing.T, tab context.Context, name string, want []string) {
	t.Helper()
	s := tabState(t, tab)
	vias := map[string]int{}
	for _, r := range s.Received {
		vias[r.Via]++
	}
	t.Logf("%s: %d messages (%v), %d reconnects", name, len(s.Received), vias, s.Connects-1)
	if s.Dups != 0 || s.Disorder != 0 {
		t.Errorf("%s: the page saw %d duplicates and %d out-of-order messages", name, s.Dups, s.Disorder)
	}
	if len(s.Received) != len(want) {
		t.Errorf("%s: %d messages, want %d", name, len(s.Received), len(want))
	}
	for i, r := range s.Received {
		if i >= len(want) || r.Seq != i+1 || r.Text != want[i] {
			w := "(none)"
			if i < len(want) {
				w = want[i]
			}
			t.Errorf("%s: message %d is #%d %q, want #%d %q", name, i, r.Seq, r.Text, i+1, w)
		}
	}
}

// gateway is a running examples/gateway process.
type gateway struct {
	cmd  *exec.Cmd
	addr string
	url  string
	log  string
	done chan error
}

var gatewayBin string

// startGateway builds (once) and runs the gateway on addr (a free port when
// none is given) for e's tables and topic, and waits until it listens.
func (e *env) startGateway(t *testing.T, addr ...string) *gateway {
	t.Helper()
	if gatewayBin == "" {
		gatewayBin = filepath.Join(filepath.Dir(binary), "gateway")
		build := exec.Command("go", "build", "-o", gatewayBin, "../../examples/gateway")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build the gateway: %v\n%s", err, out)
		}
	}
	a := ""
	if len(addr) > 0 {
		a = addr[0]
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a = ln.Addr().String()
		ln.Close()
	}
	logPath := filepath.Join(e.dir, fmt.Sprintf("gateway-%d.log", runs.Add(1)))
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gatewayBin, "-listen", a, "-brokers", strings.Join(brokers, ","), "-topic", e.topic,
		"-group", "gw-"+e.name, "-outbox", e.outbox, "-messages", e.message, "-redis", redisAddr, "-mysql-addr", mysqlAddr,
		"-mysql-user", mysqlUser, "-mysql-db", mysqlDB)
	cmd.Env = append(os.Environ(), "CDC_MYSQL_PASSWORD="+mysqlPass)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gateway{cmd: cmd, addr: a, url: "http://" + a, log: logPath, done: make(chan error, 1)}
	go func() { g.done <- cmd.Wait(); f.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-g.done
		g.done <- nil
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("gateway log %s:\n%s", logPath, tail(string(b), 30))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !logHas(logPath, "gateway listening") {
		select {
		case err := <-g.done:
			g.done <- err
			b, _ := os.ReadFile(logPath)
			t.Fatalf("gateway exited (%v):\n%s", err, tail(string(b), 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway did not start")
		}
	}
	return g
}

// stop sends SIGTERM and waits for a clean exit.
func (g *gateway) stop(t *testing.T) {
	t.Helper()
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-g.done:
		g.done <- err
		if err != nil {
			t.Fatalf("gateway exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("gateway did not stop within 20 s of SIGTERM")
	}
}

// sendDirect writes a message as the application does (message row and
// outbox row in one transaction, the conversation's next seq_no), without
// the gateway: another device's write.
func (e *env) sendDirect(t *testing.T, from, to int64, text string) {
	t.Helper()
	c := e.sql()
	defer c.Close()
	conv := min(from, to)*1_000_000 + max(from, to)
	payload, _ := json.Marshal(map[string]any{"conversation_id": conv, "from": from, "to": to, "text": text})
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"BEGIN", nil},
		{"SELECT @seq := COALESCE(MAX(seq_no), 0) + 1 FROM `" + e.message + "` WHERE conversation_id = ? FOR UPDATE", []any{conv}},
		{"INSERT INTO `" + e.message + "` (conversation_id, seq_no, sender_id, receiver_id, content) VALUES (?, @seq, ?, ?, ?)", []any{conv, from, to, text}},
		{"INSERT INTO `" + e.outbox + "` (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload) VALUES ('message.created', ?, LAST_INSERT_ID(), @seq, ?, ?, ?)", []any{conv, from, to, string(payload)}},
		{"COMMIT", nil},
	} {
		if _, err := c.Execute(q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
}
