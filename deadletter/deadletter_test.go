package deadletter

import (
	"reflect"
	"sort"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

func TestParseEventIDs(t *testing.T) {
	got, err := ParseEventIDs([]string{"42", " 7", "18446744073709551615", "3f2b8c1e-0c1d-4d5e-9f00-1a2b3c4d5e6f"})
	if err != nil || !reflect.DeepEqual(got, []string{"42", "7", "18446744073709551615", "3f2b8c1e-0c1d-4d5e-9f00-1a2b3c4d5e6f"}) {
		t.Fatalf("ParseEventIDs = %v, %v", got, err)
	}
	for _, bad := range []string{"", " ", "0", "-1"} {
		if _, err := ParseEventIDs([]string{bad}); err == nil {
			t.Errorf("ParseEventIDs(%q) accepted", bad)
		}
	}
}

func TestPositionHeader(t *testing.T) {
	for s, want := range map[string]binlog.Position{
		"mariadb-bin.000003:1234": {File: "mariadb-bin.000003", Pos: 1234},
		"a:b:5":                   {File: "a:b", Pos: 5},
		"":                        {},
		":5":                      {},
		"f:x":                     {},
	} {
		if got := position(s); got != want {
			t.Errorf("position(%q) = %+v, want %+v", s, got, want)
		}
	}
}

func TestRepublishSummary(t *testing.T) {
	s := Summary{Selected: 3, Published: 2, Missing: 1}
	if s.OK() || s.String() != "summary: 3 selected, 2 republished, 0 still poison, 1 missing, 0 failed" {
		t.Errorf("%v %q", s.OK(), s.String())
	}
	s = Summary{Selected: 1, Published: 1, DryRun: true}
	if !s.OK() || s.String() != "summary: 1 selected, 1 would republish (dry run), 0 still poison, 0 missing, 0 failed" {
		t.Errorf("%v %q", s.OK(), s.String())
	}
}

func TestEventIDOrder(t *testing.T) {
	ids := []string{"10", "b", "9", "a", "100"}
	sort.Slice(ids, func(i, j int) bool { return less(ids[i], ids[j]) })
	if want := []string{"9", "10", "100", "a", "b"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("%v, want %v", ids, want)
	}
}
