package consumer

import "testing"

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name        string
		seen, known bool
		last, seq   int64
		want        Verdict
	}{
		{"first record of a conversation", false, false, 0, 7, Handle},
		{"next in order", false, true, 7, 8, Handle},
		{"seen before: duplicate whatever the seq_no", true, true, 7, 8, Duplicate},
		{"seen, behind", true, true, 7, 3, Duplicate},
		{"seen, first after restart (store)", true, false, 0, 3, Duplicate},
		{"jump of one missing", false, true, 7, 9, GapThenHandle},
		{"jump of many", false, true, 7, 100, GapThenHandle},
		{"unseen and behind: late", false, true, 7, 5, HandleLate},
		{"unseen, same seq_no: late", false, true, 7, 7, HandleLate},
		{"seq_no 0 first", false, false, 0, 0, Handle},
	} {
		if got := Decide(tc.seen, tc.known, tc.last, tc.seq); got != tc.want {
			t.Errorf("%s: Decide(seen=%v, known=%v, last=%d, seq=%d) = %s, want %s", tc.name, tc.seen, tc.known, tc.last, tc.seq, got, tc.want)
		}
	}
}

func TestGapMissing(t *testing.T) {
	g := Gap{Key: "4", After: 2, Next: 5}
	if g.Missing() != 2 {
		t.Fatalf("Missing = %d, want 2", g.Missing())
	}
	if s := g.String(); s == "" {
		t.Fatal("empty String")
	}
}

func TestLRU(t *testing.T) {
	l := newLRU[int, string](2)
	l.put(1, "a")
	l.put(2, "b")
	if _, ok := l.get(1); !ok { // 1 becomes the most recent
		t.Fatal("1 missing")
	}
	l.put(3, "c") // evicts 2
	if _, ok := l.get(2); ok {
		t.Fatal("2 not evicted")
	}
	if v, ok := l.get(1); !ok || v != "a" {
		t.Fatalf("1 = %q %v", v, ok)
	}
	l.put(1, "A")
	if v, _ := l.get(1); v != "A" || l.len() != 2 {
		t.Fatalf("update: %q len %d", v, l.len())
	}
}
