package deadletter

import (
	"reflect"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

func TestParseEventIDs(t *testing.T) {
	got, err := ParseEventIDs([]string{"42", " 7", "18446744073709551615"})
	if err != nil || !reflect.DeepEqual(got, []uint64{42, 7, 18446744073709551615}) {
		t.Fatalf("ParseEventIDs = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-1", "x", "1.5"} {
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
