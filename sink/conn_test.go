package sink

import (
	"bufio"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	"golang.org/x/sync/errgroup"
)

// The deadline of a pipelined request counts from the deadline of the
// request ahead of it still unanswered: the broker turns to it only then.
func TestAnswerDeadline(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 18, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name    string
		now     time.Time
		timeout time.Duration
		ahead   time.Time
		want    time.Time
	}{
		{"nothing ahead: its own timeout", at(0), 11 * time.Second, time.Time{}, at(11000)},
		{"ahead answered long ago (zero): its own", at(5000), 11 * time.Second, time.Time{}, at(16000)},
		{"sent just after the one ahead: after it", at(10), 11 * time.Second, at(11000), at(22000)},
		{"fifth of five sent together", at(40), 11 * time.Second, at(44000), at(55000)},
		{"ahead due before its own start would matter: its own", at(9000), 11 * time.Second, at(500), at(20000)},
		{"ahead due at its own send time: its own", at(11000), 11 * time.Second, at(11000), at(22000)},
		{"a short metadata call behind a produce call", at(100), 2 * time.Second, at(11000), at(13000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := answerDeadline(c.now, c.timeout, c.ahead); !got.Equal(c.want) {
				t.Fatalf("answerDeadline(%s, %s, %s) = %s, want %s", c.now.Sub(t0), c.timeout, c.ahead.Sub(t0), got.Sub(t0), c.want.Sub(t0))
			}
		})
	}
}

type fakeRequest struct {
	v    int16
	corr int32
}

// fakeConn returns a brokerConn over an in-memory pipe whose broker end
// reads every request at once (as a broker's socket buffers them) into
// reqs; answer answers one (Metadata, no topics), in order.
func fakeConn(t *testing.T) (bc *brokerConn, reqs <-chan fakeRequest, answer func(fakeRequest) error) {
	t.Helper()
	client, server := net.Pipe()
	bc = &brokerConn{addr: "fake", nc: client, rd: bufio.NewReader(client),
		versions: map[protocol.ApiKey]int16{protocol.Metadata: 1},
		queue:    make(chan *call, maxQueued), quit: make(chan struct{})}
	bc.g.Go(bc.read)
	in := make(chan fakeRequest, maxQueued)
	var g errgroup.Group
	g.Go(func() error {
		srd := bufio.NewReader(server)
		for {
			v, corr, _, _, err := protocol.ReadRequest(srd)
			if err != nil {
				return nil
			}
			in <- fakeRequest{v, corr}
		}
	})
	t.Cleanup(func() { bc.close(); server.Close(); _ = g.Wait() })
	return bc, in, func(r fakeRequest) error {
		return protocol.WriteResponse(server, r.v, r.corr, &metadataAPI.Response{})
	}
}

// A broker answering two pipelined requests in order, each near the end
// of its timeout counted from the moment it turns to it: the second
// answer arrives after its own send time + timeout, and the connection
// stays whole (before, the client's read deadline broke it).
func TestPipelinedDeadlineFollowsTheOneAhead(t *testing.T) {
	const timeout = time.Second
	bc, reqs, answer := fakeConn(t)
	first, err := bc.send(&metadataAPI.Request{}, 0, 1, timeout, withinDial)
	if err != nil {
		t.Fatal(err)
	}
	second, err := bc.send(&metadataAPI.Request{}, 0, 1, timeout, withinDial)
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	for _, c := range []*call{first, second} {
		r := <-reqs
		time.Sleep(timeout * 7 / 10) // the broker's work on this request
		if err := answer(r); err != nil {
			t.Fatalf("answer %d: %v", r.corr, err)
		}
		if _, err := c.wait(context.Background()); err != nil {
			t.Fatalf("call %d, answered %s after it was sent: %v", c.corr, time.Since(sent).Round(time.Millisecond), err)
		}
	}
	if d := time.Since(sent); d <= timeout {
		t.Fatalf("the second answer came %s after it was sent, want after its own timeout %s (the case tested)", d, timeout)
	}
	if !bc.alive() {
		t.Fatal("connection broken")
	}
}

// A request whose predecessor was answered gets its own timeout only: a
// broker that stops answering it still breaks the connection in time.
func TestPipelinedDeadlineOwnWhenNothingAhead(t *testing.T) {
	const timeout = 500 * time.Millisecond
	bc, reqs, answer := fakeConn(t)
	first, err := bc.send(&metadataAPI.Request{}, 0, 1, timeout, withinDial)
	if err != nil {
		t.Fatal(err)
	}
	if err := answer(<-reqs); err != nil {
		t.Fatal(err)
	}
	if _, err := first.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	second, err := bc.send(&metadataAPI.Request{}, 0, 1, timeout, withinDial)
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	<-reqs // never answered
	_, err = second.wait(context.Background())
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("unanswered call: %v, want a timeout", err)
	}
	if d := time.Since(sent); d > timeout*8/5 {
		t.Fatalf("unanswered call failed %s after it was sent, want about its own timeout %s", d, timeout)
	}
}
