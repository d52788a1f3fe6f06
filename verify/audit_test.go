package verify

import (
	"strconv"
	"strings"
	"testing"
)

var itoa = strconv.Itoa

func arec(topic, key string, partition int, id string, seq int64) Record {
	return Record{Topic: topic, Key: key, Partition: partition, EventID: id, SeqNo: seq}
}

func TestAudit(t *testing.T) {
	rows := []Row{{1, 10, 1}, {2, 10, 2}, {3, 20, 1}, {4, 10, 3}}
	cases := []struct {
		name string
		recs []Record
		want string // Missing/Duplicates/Reordered/Split/NotInTable/OutOfRange/MaxReplay
		ok   bool
	}{
		{"complete", []Record{arec("t", "10", 0, "1", 1), arec("t", "10", 0, "2", 2), arec("t", "20", 1, "3", 1), arec("t", "10", 0, "4", 3)},
			"0/0/0/0/0/0/0", true},
		{"lost event", []Record{arec("t", "10", 0, "1", 1), arec("t", "20", 1, "3", 1), arec("t", "10", 0, "4", 3)},
			"1/0/0/0/0/0/0", false},
		{"replay after crash", []Record{arec("t", "10", 0, "1", 1), arec("t", "10", 0, "2", 2), arec("t", "10", 0, "1", 1),
			arec("t", "10", 0, "2", 2), arec("t", "20", 1, "3", 1), arec("t", "10", 0, "4", 3)},
			"0/2/0/0/0/0/1", true},
		{"reordered", []Record{arec("t", "10", 0, "2", 2), arec("t", "10", 0, "1", 1), arec("t", "20", 1, "3", 1), arec("t", "10", 0, "4", 3)},
			"0/0/1/0/0/0/0", false},
		{"split", []Record{arec("t", "10", 0, "1", 1), arec("t", "10", 2, "2", 2), arec("t", "20", 1, "3", 1), arec("t", "10", 2, "4", 3)},
			"0/0/0/1/0/0/0", false},
		{"same conversation in two topics is not split", []Record{arec("a", "10", 0, "1", 1), arec("b", "10", 3, "2", 2),
			arec("t", "20", 1, "3", 1), arec("a", "10", 0, "4", 3)}, "0/0/0/0/0/0/0", true},
		{"deleted row and foreign records", []Record{arec("t", "10", 0, "1", 1), arec("t", "10", 0, "2", 2), arec("t", "20", 1, "3", 1),
			arec("t", "10", 0, "4", 3), arec("t", "10", 0, "5", 4), arec("t", "9", 0, "99", 1), arec("t", "9", 0, "x", 1)},
			"0/0/0/0/1/2/0", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewAudit(1, 5)
			for _, r := range c.recs {
				a.Add(r)
			}
			b := a.Clone()
			for _, r := range rows {
				b.AddRow(r)
			}
			rep := b.Report()
			got := fmtCounts(rep)
			if got != c.want || rep.OK() != c.ok {
				t.Fatalf("got %s ok=%v, want %s ok=%v\n%s", got, rep.OK(), c.want, c.ok, rep.String())
			}
			// The clone left the original untouched.
			if a.Report().Rows != 0 {
				t.Fatal("Clone shares row state")
			}
		})
	}
}

func fmtCounts(r AuditReport) string {
	return itoa(r.Missing) + "/" + itoa(r.Duplicates) + "/" + itoa(r.Reordered) + "/" + itoa(r.Split) + "/" +
		itoa(r.NotInTable) + "/" + itoa(r.OutOfRange) + "/" + itoa(int(r.MaxReplay))
}

// A string-id table (the Debezium layout's UUIDs) has no range; the
// ordering column travels in the header the mapping publishes it as.
func TestStringAudit(t *testing.T) {
	rec := func(key, id string, seq int) Record {
		return Record{Topic: "t", Key: key, EventID: id, Headers: map[string]string{"seq": itoa(seq)}}
	}
	cases := []struct {
		name  string
		order string
		recs  []Record
		want  string
		ok    bool
	}{
		{"complete", "seq", []Record{rec("a", "u1", 1), rec("a", "u2", 2), rec("b", "u3", 1)}, "0/0/0/0/0/0/0", true},
		{"lost", "seq", []Record{rec("a", "u1", 1), rec("b", "u3", 1)}, "1/0/0/0/0/0/0", false},
		{"replay and a foreign id", "seq", []Record{rec("a", "u1", 1), rec("a", "u2", 2), rec("a", "u1", 1), rec("b", "u3", 1), rec("b", "zz", 2), {Topic: "t", Key: "b"}},
			"0/1/0/0/1/1/1", true},
		{"reordered", "seq", []Record{rec("a", "u2", 2), rec("a", "u1", 1), rec("b", "u3", 1)}, "0/0/1/0/0/0/0", false},
		{"no order column: order not checked", "", []Record{rec("a", "u2", 2), rec("a", "u1", 1), rec("b", "u3", 1)}, "0/0/0/0/0/0/0", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewStringAudit()
			a.SetOrder(c.order)
			for _, r := range c.recs {
				a.Add(r)
			}
			b := a.Clone()
			for _, id := range []string{"u1", "u2", "u3"} {
				b.AddRowID(id)
			}
			rep := b.Report()
			if got := fmtCounts(rep); got != c.want || rep.OK() != c.ok {
				t.Fatalf("got %s ok=%v, want %s ok=%v\n%s", got, rep.OK(), c.want, c.ok, rep.String())
			}
			if c.name == "lost" && (len(rep.MissingStrIDs) != 1 || rep.MissingStrIDs[0] != "u2") {
				t.Fatalf("missing ids %v", rep.MissingStrIDs)
			}
			if a.Report().Rows != 0 {
				t.Fatal("Clone shares row state")
			}
		})
	}
}

// Rows missing only before the oldest published event (a publisher that
// started at latest after them) are told apart from a gap: the report
// names --since-id with that event; a gap after it gets no such hint.
func TestAuditMissingBeforeFirst(t *testing.T) {
	rows := []Row{{1, 10, 1}, {2, 10, 2}, {3, 20, 1}, {4, 10, 3}}
	for _, c := range []struct {
		name string
		recs []Record
		want bool
	}{
		{"started after rows 1 and 2", []Record{arec("t", "20", 1, "3", 1), arec("t", "10", 0, "4", 3)}, true},
		{"a gap after the first event", []Record{arec("t", "10", 0, "1", 1), arec("t", "10", 0, "4", 3)}, false},
		{"nothing missing", []Record{arec("t", "10", 0, "1", 1), arec("t", "10", 0, "2", 2), arec("t", "20", 1, "3", 1), arec("t", "10", 0, "4", 3)}, false},
		{"nothing published", nil, false},
	} {
		a := NewAudit(1, 5)
		for _, r := range c.recs {
			a.Add(r)
		}
		for _, r := range rows {
			a.AddRow(r)
		}
		rep := a.Report()
		hint := strings.Contains(rep.String(), "verify from there: --since-id 3")
		if rep.BeforeFirst != c.want || hint != c.want {
			t.Errorf("%s: BeforeFirst %v, hint %v, want %v\n%s", c.name, rep.BeforeFirst, hint, c.want, rep.String())
		}
	}
}
