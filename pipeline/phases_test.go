package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/checkpoint"
	"go.uber.org/zap"
)

// memBackend is an in-memory checkpoint.Backend recording every write.
type memBackend struct {
	mu     sync.Mutex
	cp     *checkpoint.Checkpoint
	writes []checkpoint.Checkpoint
	fail   error
}

func (m *memBackend) Key() string { return "k" }

func (m *memBackend) Load(context.Context) (*checkpoint.Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cp, nil
}

func (m *memBackend) Save(_ context.Context, c checkpoint.Checkpoint, _ checkpoint.WriteOptions) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.cp = &c
	m.writes = append(m.writes, c)
	return nil
}

func (m *memBackend) Delete(context.Context, checkpoint.WriteOptions) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	had := m.cp != nil
	m.cp = nil
	return had, m.fail
}

func (m *memBackend) positions() []uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []uint32
	for _, c := range m.writes {
		out = append(out, c.Pos)
	}
	return out
}

func at(pos uint32) binlog.Position { return binlog.Position{File: "b.000001", Pos: pos} }

// The phase loop: phases run in order; each step's intents are applied in
// order through the start's writer, then its applied runs; a phase asking
// again runs again; a failed write stops the start before applied.
func TestRunPhases(t *testing.T) {
	b := &memBackend{}
	p := &Publisher{log: zap.NewNop()}
	st := &startState{}
	var trace []string
	rounds := 0
	phases := []phase{
		{"writer", func(context.Context, *startState) (step, error) {
			trace = append(trace, "writer")
			st.cpw = checkpoint.NewWriter(b, checkpoint.Source{ServerID: 1}, nil)
			return step{}, nil
		}},
		{"two writes", func(context.Context, *startState) (step, error) {
			trace = append(trace, "two writes")
			return step{writes: []checkpoint.Intent{write("a", at(10)), write("b", at(20))}, applied: func() {
				trace = append(trace, "applied after "+st.cpw.Key())
				if got := b.positions(); !slices.Equal(got, []uint32{10, 20}) {
					t.Errorf("applied ran after writes %v, want [10 20]", got)
				}
			}}, nil
		}},
		{"again", func(context.Context, *startState) (step, error) {
			rounds++
			trace = append(trace, "again")
			return step{writes: []checkpoint.Intent{write("hand-over", at(uint32(30+rounds)))}, again: rounds < 3}, nil
		}},
	}
	if err := p.runPhases(context.Background(), phases, st); err != nil {
		t.Fatal(err)
	}
	if want := []string{"writer", "two writes", "applied after k", "again", "again", "again"}; !slices.Equal(trace, want) {
		t.Fatalf("trace %v, want %v", trace, want)
	}
	if got := b.positions(); !slices.Equal(got, []uint32{10, 20, 31, 32, 33}) {
		t.Fatalf("writes %v", got)
	}

	b.fail = errors.New("redis down")
	ran := false
	err := p.runPhases(context.Background(), []phase{{"fails", func(context.Context, *startState) (step, error) {
		return step{writes: []checkpoint.Intent{write("x", at(40))}, applied: func() { ran = true }}, nil
	}}, {"never", func(context.Context, *startState) (step, error) {
		t.Error("a phase ran after a failed write")
		return step{}, nil
	}}}, st)
	if err == nil || ran {
		t.Fatalf("failed write: %v, applied ran %v", err, ran)
	}

	refused := errors.New("refused")
	if err := p.runPhases(context.Background(), []phase{{"refuses", func(context.Context, *startState) (step, error) {
		return step{}, refused
	}}}, st); !errors.Is(err, refused) {
		t.Fatalf("a phase's error: %v", err)
	}
	if err := p.runPhases(context.Background(), []phase{{"early", func(context.Context, *startState) (step, error) {
		return step{writes: []checkpoint.Intent{write("x", at(1))}}, nil
	}}}, &startState{}); err == nil {
		t.Fatal("a write before the writer exists was accepted")
	}
}

// The start-up phases, in the order docs/operations.md describes.
func TestStartPhases(t *testing.T) {
	var names []string
	for _, ph := range (&Publisher{}).startPhases() {
		names = append(names, ph.name)
	}
	if want := []string{"preflight", "load", "partitions", "resolve", "history", "catch-up", "purged"}; !slices.Equal(names, want) {
		t.Fatalf("phases %v, want %v", names, want)
	}
}
