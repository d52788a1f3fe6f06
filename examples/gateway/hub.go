package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cdc-outbox/cdc-outbox/consumer"
	"github.com/coder/websocket"
	"go.uber.org/zap"
)

// hub holds the connected sessions by user. deliver never blocks: a
// session whose queue is full is disconnected (its page reconnects and
// catches up from the table), so a slow browser cannot slow the consumer.
type hub struct {
	mu       sync.Mutex
	sessions map[int64]map[*session]struct{}
}

func newHub() *hub { return &hub{sessions: make(map[int64]map[*session]struct{})} }

type session struct {
	user int64
	live chan message // bounded: queueSize
	kick chan struct{}
	once sync.Once
}

const queueSize = 256

func (h *hub) add(s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[s.user] == nil {
		h.sessions[s.user] = make(map[*session]struct{})
	}
	h.sessions[s.user][s] = struct{}{}
}

func (h *hub) remove(s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.sessions[s.user], s)
	if len(h.sessions[s.user]) == 0 {
		delete(h.sessions, s.user)
	}
}

// Handle is the consumer's handler: a message.created record goes to the
// sender's and the receiver's sessions.
func (h *hub) Handle(_ context.Context, r *consumer.Record) error {
	if r.EventType != "message.created" {
		return nil
	}
	id, err := strconv.ParseUint(r.EventID, 10, 64) // the im layout's ids are the outbox's BIGINT id
	if err != nil {
		return fmt.Errorf("event id %q: not the im layout's decimal id: %w", r.EventID, err)
	}
	m := message{Type: "message", EventID: id, ConversationID: r.ConversationID, SeqNo: r.SeqNo,
		SenderID: r.SenderID, ReceiverID: r.ReceiverID, Payload: json.RawMessage(r.Payload), Via: "live"}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, u := range []int64{r.SenderID, r.ReceiverID} {
		for s := range h.sessions[u] {
			select {
			case s.live <- m:
			default:
				s.once.Do(func() { close(s.kick) })
			}
		}
		if r.SenderID == r.ReceiverID {
			break
		}
	}
	return nil
}

// serve runs one user's connection: registered first (live messages queue
// up), then the messages after since from the table, then live ones. Per
// conversation it sends each seq_no once, in order: a live message at or
// behind the last one sent is dropped, one ahead of last+1 is preceded by
// the missing ones from the table.
func (g *gateway) serve(ctx context.Context, c *websocket.Conn, user int64, since map[int64]int64) error {
	s := &session{user: user, live: make(chan message, queueSize), kick: make(chan struct{})}
	g.hub.add(s)
	defer g.hub.remove(s)
	ctx = c.CloseRead(ctx) // done when the page goes away

	last := map[int64]int64{}
	for k, v := range since {
		last[k] = v
	}
	send := func(m message) error {
		if m.SeqNo <= last[m.ConversationID] {
			return nil
		}
		b, _ := json.Marshal(m)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := c.Write(wctx, websocket.MessageText, b); err != nil {
			return err
		}
		last[m.ConversationID] = m.SeqNo
		return nil
	}
	hist, err := g.db.history(user, since)
	if err != nil {
		return fmt.Errorf("history of user %d: %w", user, err)
	}
	for _, m := range hist {
		if err := send(m); err != nil {
			return err
		}
	}
	g.log.Debug("session up", zap.Int64("user", user), zap.Int("history", len(hist)))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
			return c.Close(websocket.StatusTryAgainLater, "too slow: reconnect")
		case m := <-s.live:
			if after := last[m.ConversationID]; m.SeqNo > after+1 {
				missing, err := g.db.between(m.ConversationID, after, m.SeqNo)
				if err != nil {
					return err
				}
				for _, mm := range missing {
					if err := send(mm); err != nil {
						return err
					}
				}
			}
			if err := send(m); err != nil {
				return err
			}
		}
	}
}
