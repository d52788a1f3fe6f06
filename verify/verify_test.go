package verify

import (
	"slices"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

func rec(key string, partition int, seq int64, id string) Record {
	return Record{Key: key, Partition: partition, SeqNo: seq, EventID: id}
}

func TestChecker(t *testing.T) {
	cases := []struct {
		name     string
		expected map[int64]int64
		recs     []Record
		want     Report
		ok       bool
	}{
		{"all in order", map[int64]int64{1: 3}, []Record{rec("1", 0, 1, "a"), rec("1", 0, 2, "b"), rec("1", 0, 3, "c")},
			Report{Records: 3, Unique: 3}, true},
		{"replayed range after a crash is a duplicate, not a reorder", map[int64]int64{1: 3},
			[]Record{rec("1", 0, 1, "a"), rec("1", 0, 2, "b"), rec("1", 0, 1, "a"), rec("1", 0, 2, "b"), rec("1", 0, 3, "c")},
			Report{Records: 5, Unique: 3, Duplicates: 2}, true},
		{"gap", map[int64]int64{1: 3}, []Record{rec("1", 0, 1, "a"), rec("1", 0, 3, "c")},
			Report{Records: 2, Unique: 2, Missing: 1}, false},
		{"reorder", map[int64]int64{1: 2}, []Record{rec("1", 0, 2, "b"), rec("1", 0, 1, "a")},
			Report{Records: 2, Unique: 2, Reordered: 1}, false},
		{"split across partitions", map[int64]int64{1: 2}, []Record{rec("1", 0, 1, "a"), rec("1", 1, 2, "b")},
			Report{Records: 2, Unique: 2, Split: 1}, false},
		{"duplicate with another event id", map[int64]int64{1: 1}, []Record{rec("1", 0, 1, "a"), rec("1", 0, 1, "z")},
			Report{Records: 2, Unique: 1, Duplicates: 1, Conflicts: 1}, false},
		{"unexpected event", map[int64]int64{1: 1}, []Record{rec("1", 0, 1, "a"), rec("2", 0, 1, "b")},
			Report{Records: 2, Unique: 2, Unexpected: 1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chk := NewChecker(c.expected)
			chk.Add(c.recs...)
			got := chk.Report()
			if got.OK() != c.ok {
				t.Errorf("OK() = %v, want %v (%s)", got.OK(), c.ok, got.String())
			}
			got.Problems, got.MissingSample = nil, nil
			if got.String() != c.want.String() {
				t.Errorf("got  %s\nwant %s", got.String(), c.want.String())
			}
			if chk.Complete() != (c.want.Missing == 0) {
				t.Errorf("Complete() = %v with %d missing", chk.Complete(), c.want.Missing)
			}
		})
	}
}

// verify checks the table --table names (in source.schema without a
// schema), or every table of the source.
func TestPickTables(t *testing.T) {
	a, b := &binlog.Table{Schema: "im", Name: "t_00"}, &binlog.Table{Schema: "im", Name: "t_01"}
	for _, c := range []struct {
		tables []*binlog.Table
		want   string
		got    []*binlog.Table
		err    string
	}{
		{[]*binlog.Table{a}, "", []*binlog.Table{a}, ""},
		{[]*binlog.Table{a, b}, "t_01", []*binlog.Table{b}, ""},
		{[]*binlog.Table{a, b}, "IM.T_00", []*binlog.Table{a}, ""},
		{[]*binlog.Table{a, b}, "", []*binlog.Table{a, b}, ""},
		{[]*binlog.Table{a, b}, "other.t_00", nil, "is not an outbox table of this source (it reads im.t_00, im.t_01)"},
		{nil, "", nil, "no outbox table"},
	} {
		got, err := pickTables(c.tables, c.want, "im")
		if !slices.Equal(got, c.got) || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("pickTables(%d tables, %q) = %v, %v; want %v, %q", len(c.tables), c.want, got, err, c.got, c.err)
		}
	}
}

// Tables verified together whose integer id ranges are disjoint cannot
// share an id (no query); overlapping ranges or a string id column may.
func TestRangesOverlap(t *testing.T) {
	ip := func(lo, hi uint64) plan { return plan{lay: layout{intID: true}, lo: lo, hi: hi} }
	sp := plan{lay: layout{intID: false}}
	for _, c := range []struct {
		name string
		ps   []plan
		want bool
	}{
		{"one table", []plan{ip(1, 100)}, false},
		{"disjoint", []plan{ip(1, 100), ip(101, 200), ip(1000, 2000)}, false},
		{"touching", []plan{ip(1, 100), ip(100, 200)}, true},
		{"nested", []plan{ip(1, 1000), ip(500, 600)}, true},
		{"the last two overlap", []plan{ip(1, 10), ip(20, 30), ip(25, 40)}, true},
		{"a string id", []plan{ip(1, 10), sp}, true},
	} {
		if got := rangesOverlap(c.ps); got != c.want {
			t.Errorf("%s: rangesOverlap = %v, want %v", c.name, got, c.want)
		}
	}
}
