package sink

import (
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestSpareClass(t *testing.T) {
	for _, c := range []struct{ n, class, size int }{
		{0, 0, 1 << 10}, {1, 0, 1 << 10}, {1 << 10, 0, 1 << 10}, {1<<10 + 1, 1, 2 << 10},
		{5000, 3, 8 << 10}, {64 << 10, 6, 64 << 10}, {64<<10 + 1, -1, 64<<10 + 1}, {1 << 20, -1, 1 << 20},
	} {
		if k, size := spareClass(c.n); k != c.class || size != c.size {
			t.Errorf("spareClass(%d) = %d, %d; want %d, %d", c.n, k, size, c.class, c.size)
		}
	}
}

// A round's buffers come back only when every batch is acknowledged and
// the buffer is a class's size (not regrown by append); take hands them
// out again, empty; a class keeps at most spareDepth.
func TestSpares(t *testing.T) {
	var s spares
	a := s.take(3000)
	if len(a) != 0 || cap(a) != 4<<10 {
		t.Fatalf("take(3000): len %d cap %d, want 0, 4096", len(a), cap(a))
	}
	a = append(a, "record batch"...)
	grown := make([]byte, 0, 5000) // not a class size: regrown by an append
	pending := s.take(100)
	r := &Round{batches: []*batch{{raw: a, done: true}, {raw: grown, done: true}, {raw: pending}}}
	s.recycle(r)
	if r.batches[0].raw != nil || r.batches[1].raw != nil {
		t.Fatal("an acknowledged batch kept its buffer after recycle")
	}
	if r.batches[2].raw == nil {
		t.Fatal("a batch not acknowledged lost its buffer")
	}
	if len(s[2]) != 1 || len(s[3]) != 0 || len(s[0]) != 0 {
		t.Fatalf("classes after recycle: %d/%d/%d buffers, want 1 of 4 KiB only", len(s[0]), len(s[2]), len(s[3]))
	}
	b := s.take(2500)
	if len(b) != 0 || cap(b) != 4<<10 || &b[:1][0] != &a[:1][0] {
		t.Fatal("take did not hand out the recycled 4 KiB buffer, emptied")
	}
	for i := 0; i < spareDepth+5; i++ {
		s.recycle(&Round{batches: []*batch{{raw: make([]byte, 0, 1<<10), done: true}}})
	}
	if len(s[0]) != spareDepth {
		t.Fatalf("%d spare buffers of 1 KiB, want at most %d", len(s[0]), spareDepth)
	}
	if big := s.take(1 << 20); cap(big) != 1<<20 {
		t.Fatalf("take(1 MiB): cap %d", cap(big))
	}
}

// A landed round's record and owner slices come back cleared for a later
// round that fits them; a backlog-sized round's are not kept, nor more
// than spareRounds.
func TestRoundSlices(t *testing.T) {
	w := &Writer{}
	msgs, owner := w.roundSlices(8)
	msgs = append(msgs, kafka.Message{Key: []byte("k"), Value: []byte("v")})
	owner = append(owner, 0)
	w.keep(flight{msgs: msgs, owner: owner})
	if msgs[0].Key != nil {
		t.Fatal("keep did not clear the records (their keys and values stay reachable)")
	}
	m2, o2 := w.roundSlices(4)
	if len(m2) != 0 || len(o2) != 0 || &m2[:1][0] != &msgs[:1][0] || &o2[:1][0] != &owner[:1][0] {
		t.Fatal("roundSlices did not hand out the kept slices, emptied")
	}
	if m3, _ := w.roundSlices(4); &m3[:1][0] == &msgs[:1][0] {
		t.Fatal("the kept slices were handed out twice")
	}
	w.keep(flight{msgs: make([]kafka.Message, 0, spareRoundCap+1), owner: make([]int, 0, spareRoundCap+1)})
	if len(w.spare) != 0 {
		t.Fatal("a backlog-sized round's slices were kept")
	}
	for i := 0; i < spareRounds+3; i++ {
		w.keep(flight{msgs: make([]kafka.Message, 0, 8), owner: make([]int, 0, 8)})
	}
	if len(w.spare) != spareRounds {
		t.Fatalf("%d rounds' slices kept, want at most %d", len(w.spare), spareRounds)
	}
	if m, _ := w.roundSlices(100); cap(m) != 100 {
		t.Fatalf("a round larger than every kept one: cap %d, want a new slice of 100", cap(m))
	}
	// The slices still gathering the next round are never kept (a round
	// with no records landed at once hands keep the Writer's own).
	w.spare = nil
	w.msgs, w.owner = w.roundSlices(8)
	w.msgs = append(w.msgs, kafka.Message{Topic: "gathering"})
	w.owner = append(w.owner, 0)
	w.keep(flight{msgs: w.msgs[:0], owner: w.owner[:0]})
	if len(w.spare) != 0 || w.msgs[0].Topic != "gathering" {
		t.Fatalf("keep took the slices still gathering (%d kept, record %+v)", len(w.spare), w.msgs[0])
	}
}
