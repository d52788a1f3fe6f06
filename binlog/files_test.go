package binlog

import "testing"

func TestSpan(t *testing.T) {
	logs := []LogFile{{Name: "b.000001", Size: 1000}, {Name: "b.000002", Size: 500}, {Name: "b.000003", Size: 300}}
	p := func(f string, pos uint32) Position { return Position{File: f, Pos: pos} }
	cases := []struct {
		a, b Position
		want int64
	}{
		{p("b.000001", 4), p("b.000001", 4), 0},
		{p("b.000001", 100), p("b.000001", 400), 300},
		{p("b.000001", 900), p("b.000002", 50), 150},            // 100 left in the first file, 50 in the second
		{p("b.000001", 900), p("b.000003", 50), 100 + 500 + 50}, // a whole file in between
		{p("b.000002", 4), p("b.000001", 4), -1},                // reversed
		{p("b.000009", 4), p("b.000001", 4), -1},                // unknown file
		{Position{GTIDSet: "0-1-5"}, p("b.000001", 4), -1},      // no file
	}
	for _, c := range cases {
		if got := spanOrNone(logs, c.a, c.b); got != c.want {
			t.Errorf("Span(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func spanOrNone(files []LogFile, a, b Position) int64 {
	if n, _, ok := Span(files, a, b); ok {
		return n
	}
	return -1
}
