package rawconn

import "sync"

// Pace shares the binlog stream's linger pauses with the connections
// whose answers another goroutine waits for (the Kafka produce
// connections), so that the process wakes once per pause rather than
// once for the pause and once for each answer arriving in it.
//
// The binlog reader calls Begin before it pauses and End when the pause
// is over. A connection that has just sent a request calls Hold with
// its HoldAnswers function: while a pause is on, that raises the
// connection's receive low-water mark, so the answer arriving in the
// pause does not wake the poller (its reader goroutine stays parked);
// End lowers every held mark, which makes Linux signal the sockets with
// queued bytes readable (tcp_set_rcvlowat calls tcp_data_ready, since
// Linux 4.18), and their readers run in the wake-up that ended the
// pause. A connection with bytes queued is not raised again (epoll
// reports a socket by its mark when polled: raising it before the
// reader ran would drop the wake-up the release gave). An answer is so
// read by the end of the pause it arrived in, at most one linger
// (source.linger) after it arrived; the broker appended the records when it answered, so
// only the acknowledgement (the checkpoint) moves, not the records'
// latency. Outside a pause Hold does nothing: a backlog, which never
// pauses, reads its answers at once.
//
// A nil *Pace does nothing. Safe for concurrent use.
type Pace struct {
	mu     sync.Mutex
	pauses int                  // Begin calls not yet ended
	held   []func(on bool) bool // HoldAnswers functions raised in the pauses on
}

// NewPace returns a Pace with no pause on.
func NewPace() *Pace { return &Pace{} }

// Begin records that a pause begins.
func (p *Pace) Begin() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.pauses++
	p.mu.Unlock()
}

// End records that a pause ended and releases every held connection.
func (p *Pace) End() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pauses = max(p.pauses-1, 0)
	for i, h := range p.held {
		h(false)
		p.held[i] = nil
	}
	p.held = p.held[:0]
}

// Hold raises the mark of hold's connection (a HoldAnswers function) if a
// pause is on, until the pause ends, and reports whether it did. A nil
// hold (a connection that cannot be held) is never held.
func (p *Pace) Hold(hold func(on bool) bool) bool {
	if p == nil || hold == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pauses == 0 || !hold(true) {
		return false
	}
	p.held = append(p.held, hold)
	return true
}
