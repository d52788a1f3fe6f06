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
		!strings.Contains(err.Error(), "domain 9") || !strings.Contains(err.Error(), "cdc-outbox checkpoint set gtid:0-1-5 (or") ||
		!strings.Contains(err.Error(), "DELETE_DOMAIN_ID") || strings.Contains(err.Error(), "never had (") {
		t.Fatalf("unknown domain error: %v", err)
	}
}

// FLUSH BINARY LOGS DELETE_DOMAIN_ID=(N) removes N from the server's GTID
// state once no binlog holds its transactions, while the Gtid_list of the
// files opened before still names it (as the server showed: a state of
// 0-1-6 after deleting 78, the oldest file's list 0-1-4,78-1-2). A stored
// set naming N at its last transaction has nothing of N left to stream:
// accepted; one naming it earlier lost transactions of N to a purge
// (PurgedDomains says so, neither list here does), one naming it later
// is another history; one naming a domain no list names is accepted only
// when the checkpoint is this server's position otherwise (written after
// the deletion).
func TestDeletedDomains(t *testing.T) {
	for _, c := range []struct {
		name                       string
		stored, atOldest, atStored string
		unknown                    []uint32
		deleted                    int
		refused                    []uint32
	}{
		{"deleted at the stored transaction", "0-1-5,78-1-2", "0-1-4,78-1-2", "", []uint32{78}, 1, nil},
		{"stored later than the deleted domain's last: another history", "0-1-5,78-1-3", "0-1-4,78-1-2", "", []uint32{78}, 0, []uint32{78}},
		{"deleted after a purge of some of its transactions", "0-1-5,78-1-1", "0-1-4,78-1-2", "", []uint32{78}, 0, nil},
		{"no list names it, the checkpoint is this server's position", "0-1-6,78-1-2", "0-1-6", "0-1-6", []uint32{78}, 1, nil},
		{"no list names it, the checkpoint's file is not on the server", "0-1-6,78-1-2", "0-1-6", "", []uint32{78}, 0, []uint32{78}},
		{"no list names it, another position", "0-1-6,78-1-2", "0-1-6", "0-1-5", []uint32{78}, 0, []uint32{78}},
		{"no list names it, the server has a domain the set lacks", "0-1-6,78-1-2", "0-1-6", "0-1-6,3-1-1", []uint32{78}, 0, []uint32{78}},
		{"an edited set: the server's position plus a domain it never had", "0-1-6,4711-1-5", "0-1-4", "", []uint32{4711}, 0, []uint32{4711}},
		{"one deleted, one never had", "0-1-5,78-1-2,4711-1-5", "0-1-4,78-1-2", "", []uint32{78, 4711}, 1, []uint32{4711}},
	} {
		t.Run(c.name, func(t *testing.T) {
			deleted, refused, err := DeletedDomains(c.stored, c.atOldest, c.atStored, c.unknown)
			if err != nil || len(deleted) != c.deleted || !reflect.DeepEqual(refused, c.refused) {
				t.Fatalf("DeletedDomains = %v, %v, %v; want %d deleted, refused %v", deleted, refused, err, c.deleted, c.refused)
			}
			// What is neither deleted nor refused is a purge, reported as one.
			if c.deleted == 0 && len(c.refused) == 0 {
				if d, _, _ := PurgedDomains(c.stored, c.atOldest); len(d) != 1 || !strings.Contains(d[0], "stored seq") {
					t.Fatalf("PurgedDomains = %v, want the domain's purge", d)
				}
			}
		})
	}
	if d, _, _ := PurgedDomains("0-1-5", "0-1-4,78-1-2"); len(d) != 1 || d[0] != "78 (not in the stored set, oldest binlog starts after seq 2)" {
		t.Fatalf("PurgedDomains of a domain the set does not name = %v", d)
	}
	// A deleted domain the stored set does not name (a start at the end,
	// a set given without it): no purge when the position is in a file
	// opened after the deletion.
	for _, c := range []struct {
		atStored string
		want     []uint32
	}{
		{"0-1-8", []uint32{78}},        // past the deletion
		{"0-1-5,78-1-2", nil},          // in a file opened before it
		{"", nil},                      // the position's file is not on the server
		{"0-1-8,77-1-1", []uint32{78}}, // another domain beside
	} {
		if got := DeletedBehind([]uint32{78}, c.atStored); !reflect.DeepEqual(got, c.want) {
			t.Errorf("DeletedBehind(78, %q) = %v, want %v", c.atStored, got, c.want)
		}
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
