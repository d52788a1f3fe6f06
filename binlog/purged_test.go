package binlog

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestUnknownDomains(t *testing.T) {
	cases := []struct {
		stored, state string
		want          []uint32
	}{
		{"0-1-100", "0-1-120", nil},
		{"0-1-100,2-1-5", "0-1-120,2-1-9,2-3-4", nil},
		{"0-1-100,2-1-5", "0-1-120", []uint32{2}},
		{"9-1-5,0-1-1,7-2-3", "0-1-120", []uint32{7, 9}},
		{"", "0-1-120", nil},
	}
	for _, c := range cases {
		got, err := UnknownDomains(c.stored, c.state)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("UnknownDomains(%q, %q) = %v, %v; want %v", c.stored, c.state, got, err, c.want)
		}
	}
	if _, err := UnknownDomains("0-1", "0-1-1"); err == nil {
		t.Error("a malformed set passed")
	}
	err := unknownDomainError(Position{GTIDSet: "0-1-5,9-1-3"}, []uint32{9}, "0-1-7")
	if !errors.Is(err, ErrUnknownGTIDDomain) || !errors.Is(err, ErrStart) || !IsFatal(err) ||
		!strings.Contains(err.Error(), "domain 9") || !strings.Contains(err.Error(), "checkpoint set") {
		t.Fatalf("unknown domain error: %v", err)
	}
}

func TestPurgedDomains(t *testing.T) {
	cases := []struct {
		stored, oldest string
		domains        int
		lost           int64
	}{
		{"0-1-100", "0-1-100", 0, 0},             // resumes right at the oldest file's start
		{"0-1-150", "0-1-100", 0, 0},             // ahead of the oldest file's start
		{"0-1-90", "0-1-100", 1, 10},             // ten transactions gone
		{"0-1-150,2-1-3", "0-1-100,2-1-5", 1, 2}, // only domain 2 lost some
		{"0-1-150", "0-1-100,2-1-5", 1, 5},       // domain 2 never seen, its first 5 purged
		{"0-1-150,2-1-9", "", 0, 0},              // oldest file without a GTID list
		{"0-2-90", "0-1-80,0-2-95", 1, 5},        // several server ids per domain: highest seq counts
	}
	for _, c := range cases {
		d, lost, err := PurgedDomains(c.stored, c.oldest)
		if err != nil || len(d) != c.domains || lost != c.lost {
			t.Errorf("PurgedDomains(%q, %q) = %v, %d, %v; want %d domains, %d lost", c.stored, c.oldest, d, lost, err, c.domains, c.lost)
		}
	}
}

func TestMergeLatest(t *testing.T) {
	got, err := mergeLatest("0-1-150,2-1-3", "0-1-100,2-1-5,3-4-7")
	if err != nil || got != "0-1-150,2-1-5,3-4-7" {
		t.Fatalf("mergeLatest = %q, %v", got, err)
	}
}

func TestMySQLPurgedSources(t *testing.T) {
	const a, b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4f22fb58-82db-22f2-af44-d91bb0530673"
	cases := []struct {
		stored, purged string
		want           int
	}{
		{a + ":1-100," + b + ":1-5", a + ":1-50", 0},
		{a + ":1-100," + b + ":1-5", "", 0},
		{a + ":1-100," + b + ":1-5", a + ":1-120", 1},
		{a + ":1-100", a + ":1-50," + b + ":1-2", 1},
		{a + ":1-100", a + ":1-150," + b + ":1-2", 2},
	}
	for _, c := range cases {
		got, err := mysqlPurgedSources(c.stored, c.purged)
		if err != nil || len(got) != c.want {
			t.Errorf("mysqlPurgedSources(%q, %q) = %v, %v; want %d", c.stored, c.purged, got, err, c.want)
		}
	}
}

func TestFilesBetween(t *testing.T) {
	cases := []struct {
		stored, oldest string
		want           int
	}{
		{"mariadb-bin.000003", "mariadb-bin.000007", 4},
		{"mariadb-bin.000999", "mariadb-bin.1000000", 999001},
		{"mariadb-bin.000007", "mariadb-bin.000003", -1}, // not before: another server?
		{"other-bin.000001", "mariadb-bin.000003", -1},
	}
	for _, c := range cases {
		if got := filesBetween(c.stored, c.oldest); got != c.want {
			t.Errorf("filesBetween(%s, %s) = %d, want %d", c.stored, c.oldest, got, c.want)
		}
	}
}

func TestHeadroom(t *testing.T) {
	files := []LogFile{{"b.000004", 1000}, {"b.000005", 2000}, {"b.000006", 500}}
	cases := []struct {
		p      Position
		bytes  int64
		before int
		ok     bool
	}{
		{Position{File: "b.000004", Pos: 300}, 300, 0, true},
		{Position{File: "b.000005", Pos: 4}, 1004, 1, true},
		{Position{File: "b.000006", Pos: 400}, 3400, 2, true},
		{Position{File: "b.000003", Pos: 400}, 0, 0, false},
	}
	for _, c := range cases {
		n, before, ok := Headroom(files, c.p)
		if n != c.bytes || before != c.before || ok != c.ok {
			t.Errorf("Headroom(%s) = %d, %d, %v; want %d, %d, %v", c.p.FilePos(), n, before, ok, c.bytes, c.before, c.ok)
		}
	}
}

func TestPurgedErr(t *testing.T) {
	file := (&Purged{Stored: Position{File: "mariadb-bin.000003", Pos: 1234}, Oldest: Position{File: "mariadb-bin.000007", Pos: 4}, FilesPurged: 4}).Err()
	gtid := (&Purged{Stored: Position{GTIDSet: "0-1-90"}, Oldest: Position{File: "mariadb-bin.000007", Pos: 4, GTIDSet: "0-1-100"},
		Domains: []string{"0 (stored seq 90, oldest binlog starts after seq 100)"}}).Err()
	for _, err := range []error{file, gtid} {
		if !errors.Is(err, ErrPositionUnavailable) || !IsFatal(err) || !strings.Contains(err.Error(), "mariadb-bin.000007:4") ||
			!strings.Contains(err.Error(), "source.on-purged") {
			t.Errorf("purged error: %v", err)
		}
	}
	if !strings.Contains(file.Error(), "mariadb-bin.000003:1234") || !strings.Contains(gtid.Error(), "gtid:0-1-90") {
		t.Errorf("stored position not named: %v / %v", file, gtid)
	}
}

func TestConfigOnPurged(t *testing.T) {
	for _, v := range []string{"fail", "earliest", "latest", "", "skip"} {
		c := DefaultConfig()
		c.User, c.Schema = "u", "im"
		if v != "" {
			c.OnPurged = v
		}
		err := c.Validate()
		bad := v == "skip"
		if (err != nil) != bad || (bad && !strings.Contains(err.Error(), "source.on-purged")) {
			t.Errorf("on-purged %q: %v", v, err)
		}
	}
}

// One entry per MariaDB domain, the highest sequence number, whatever the
// order of a raw @@gtid_binlog_state.
func TestNormalizeGTIDSet(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0-2-150,0-1-100", "0-2-150"},
		{"0-1-100,0-2-150", "0-2-150"},
		{"5-1-3,0-1-9,0-2-4", "0-1-9,5-1-3"},
		{" 0-1-9\n", "0-1-9"},
		{"", ""},
	} {
		if got, err := NormalizeGTIDSet(FlavorMariaDB, c.in); err != nil || got != c.want {
			t.Errorf("NormalizeGTIDSet(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := NormalizeGTIDSet(FlavorMariaDB, "0-1"); !errors.Is(err, ErrStart) {
		t.Errorf("malformed: %v", err)
	}
}

// An old checkpoint's set lacking a history domain is completed from the
// server's state at its position, only when it agrees with it.
func TestCompleteSet(t *testing.T) {
	for _, c := range []struct {
		stored, at, want string
		ok               bool
	}{
		{"0-1-100", "0-1-100,5-1-3", "0-1-100,5-1-3", true},
		{"0-1-100,5-1-3", "0-1-100,5-1-3", "0-1-100,5-1-3", true},
		{"0-1-100", "0-1-99,5-1-3", "0-1-100", false}, // not this server's position
		{"0-1-100,7-1-1", "0-1-100,5-1-3", "0-1-100,7-1-1", false},
	} {
		got, ok, err := completeSet(c.stored, c.at)
		if err != nil || got != c.want || ok != c.ok {
			t.Errorf("completeSet(%q, %q) = %q, %v, %v; want %q, %v", c.stored, c.at, got, ok, err, c.want, c.ok)
		}
	}
}
