package pipeline

import (
	"errors"
	"strings"
	"testing"
)

func TestPartitionChanges(t *testing.T) {
	if c := PartitionChanges(nil, map[string]int{"a": 3}); len(c) != 0 {
		t.Errorf("no stored counts (old checkpoint): %v", c)
	}
	c := PartitionChanges(map[string]int{"a": 3, "b": 6, "gone": 2}, map[string]int{"a": 3, "b": 8, "new": 1})
	if len(c) != 1 || c[0] != (PartitionChange{Topic: "b", Stored: 6, Now: 8}) {
		t.Fatalf("changes: %v", c)
	}
	err := PartitionChangeError("k", c)
	if !errors.Is(err, ErrPartitionsChanged) || !strings.Contains(err.Error(), "b: 6 → 8 partitions") ||
		!strings.Contains(err.Error(), "--accept-partition-change") || !strings.Contains(err.Error(), "checkpoint set") {
		t.Errorf("error: %v", err)
	}
}
func TestLeastAdvanced(t *testing.T) {
	pos, part := LeastAdvanced(map[int]string{0: "b.000005:900", 1: "b.000004:7000", 2: "garbage", 3: "b.000004:6000"})
	if pos != "b.000004:6000" || part != 3 {
		t.Errorf("got %s on %d", pos, part)
	}
	if pos, part := LeastAdvanced(map[int]string{}); pos != "" || part != -1 {
		t.Errorf("empty: %s %d", pos, part)
	}
}

// File names compare by sequence number, not as strings: once numbering
// passes .999999 the next file sorts before it as a string.
func TestLeastAdvancedPastSixDigits(t *testing.T) {
	pos, part := LeastAdvanced(map[int]string{0: "b.1000000:4000", 1: "b.999999:5000"})
	if pos != "b.999999:5000" || part != 1 {
		t.Errorf("got %s on %d, want b.999999:5000 on 1", pos, part)
	}
}
