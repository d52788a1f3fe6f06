package binlog

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

func TestComparePos(t *testing.T) {
	p := func(f string, pos uint32) Position { return Position{File: f, Pos: pos} }
	cases := []struct {
		a, b Position
		want int
	}{
		{p(file1, 4), p(file1, 4), 0},
		{p(file1, 4), p(file1, 5), -1},
		{p(file1, 9000), p(file2, 4), -1},
		{p(file2, 4), p(file1, 9000), 1},
		{p("mariadb-bin.999999", 4), p("mariadb-bin.1000000", 4), -1}, // numeric, not lexical
		{p("a-bin.000002", 4), p("b-bin.000001", 4), -1},              // other base name: as strings
		{Position{File: file1, Pos: 7, GTIDSet: "0-1-9"}, p(file1, 7), 0},
	}
	for _, c := range cases {
		if got := ComparePos(c.a, c.b); got != c.want {
			t.Errorf("ComparePos(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// feed runs events through Reader.step as Run does and returns the
// transactions emitted and whether the read ended, and after which event.
func feed(t *testing.T, st *state, events []*replication.BinlogEvent) (out []Txn, doneAt int) {
	t.Helper()
	for i, e := range events {
		txn, done, err := st.r.step(st, e)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if txn != nil {
			out = append(out, *txn)
		}
		if done {
			return out, i
		}
	}
	return out, -1
}

func TestReaderStopAt(t *testing.T) {
	const flags = replication.BINLOG_MARIADB_FL_TRANSACTIONAL
	// Three transactions in file1 ending at 731, 1031 and 1331, then a
	// rotation to file2 and a fourth transaction ending there at 600.
	txn := func(begin uint32, seq uint64, id int64) []*replication.BinlogEvent {
		return []*replication.BinlogEvent{
			mariaGTID(begin+100, seq, flags),
			tableMapEv(begin+180, outboxTM),
			rowsEv(replication.WRITE_ROWS_EVENTv1, begin+300, outboxTM, row(id)),
			xid(begin + 331),
		}
	}
	var stream []*replication.BinlogEvent
	stream = append(stream, txn(400, 5, 1)...)
	stream = append(stream, txn(700, 6, 2)...)
	stream = append(stream, txn(1000, 7, 3)...)
	stream = append(stream, ev(replication.ROTATE_EVENT, 1375, &replication.RotateEvent{Position: 4, NextLogName: []byte(file2)}))
	stream = append(stream, rotate(file2, 4)) // artificial rotate: log_pos 0
	stream = append(stream, ev(replication.FORMAT_DESCRIPTION_EVENT, 256, &replication.FormatDescriptionEvent{}))
	stream = append(stream, txn(269, 8, 4)...)

	ends := func(txns []Txn) []string {
		var s []string
		for _, x := range txns {
			s = append(s, x.End.FilePos())
		}
		return s
	}
	cases := []struct {
		name     string
		stop     Position
		want     []string // ends of the transactions emitted
		wantDone int      // index of the event after which Run returns; -1: never
	}{
		{"no stop", Position{}, []string{file1 + ":731", file1 + ":1031", file1 + ":1331", file2 + ":600"}, -1},
		{"at a transaction end: included", Position{File: file1, Pos: 1031}, []string{file1 + ":731", file1 + ":1031"}, 7},
		{"inside a transaction: it is left out", Position{File: file1, Pos: 900}, []string{file1 + ":731"}, 6},
		{"at its first event: left out", Position{File: file1, Pos: 800}, []string{file1 + ":731"}, 4},
		{"at the end of the file (rotate event)", Position{File: file1, Pos: 1375}, []string{file1 + ":731", file1 + ":1031", file1 + ":1331"}, 12},
		{"in the next file, before its first transaction", Position{File: file2, Pos: 256}, []string{file1 + ":731", file1 + ":1031", file1 + ":1331"}, 14},
		{"last transaction", Position{File: file2, Pos: 600}, []string{file1 + ":731", file1 + ":1031", file1 + ":1331", file2 + ":600"}, 18},
		{"GTID set: stop after the transaction completing it", Position{GTIDSet: "0-1-6"}, []string{file1 + ":731", file1 + ":1031"}, 7},
		{"GTID set beyond the stream", Position{GTIDSet: "0-1-99"}, []string{file1 + ":731", file1 + ":1031", file1 + ":1331", file2 + ":600"}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := newState(t, mysql.MariaDBFlavor, "0-1-4")
			if !c.stop.IsZero() {
				if err := st.r.StopAt(c.stop); err != nil {
					t.Fatal(err)
				}
			}
			out, doneAt := feed(t, st, stream)
			if got := ends(out); !equalStrings(got, c.want) {
				t.Errorf("emitted %v, want %v", got, c.want)
			}
			if doneAt != c.wantDone {
				t.Errorf("done after event %d, want %d", doneAt, c.wantDone)
			}
		})
	}
}

func TestReaderStopAtBadGTIDSet(t *testing.T) {
	st := newState(t, mysql.MariaDBFlavor, "")
	if err := st.r.StopAt(Position{GTIDSet: "not-a-set"}); err == nil {
		t.Fatal("StopAt accepted an invalid GTID set")
	}
	if err := st.r.StopAt(Position{}); err == nil {
		t.Fatal("StopAt accepted an empty stop")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCheckRange(t *testing.T) {
	p := func(f string, pos uint32) Position { return Position{File: f, Pos: pos} }
	g := func(set string) Position { return Position{GTIDSet: set} }
	end := Position{File: file2, Pos: 5000, GTIDSet: "0-1-100"}
	cases := []struct {
		name     string
		from, to Position
		want     string // substring of the error; empty: valid
	}{
		{"file range", p(file1, 4), p(file2, 300), ""},
		{"up to the end", p(file1, 4), end, ""},
		{"same position", p(file1, 731), p(file1, 731), "is not after start"},
		{"reversed", p(file2, 300), p(file1, 731), "is not after start"},
		{"end past the binlog end", p(file1, 4), p(file2, 5001), "not written yet"},
		{"end in a future file", p(file1, 4), p("mariadb-bin.000003", 4), "not written yet"},
		{"start past the binlog end", p("mariadb-bin.000003", 4), p("mariadb-bin.000003", 400), "start mariadb-bin.000003:4 is after the end"},
		{"GTID range", g("0-1-10"), g("0-1-20"), ""},
		{"GTID range reversed", g("0-1-20"), g("0-1-10"), "not after start"},
		{"GTID end not written yet", g("0-1-10"), g("0-1-200"), "not written yet"},
		{"GTID start, file end: not comparable", g("0-1-10"), p(file1, 731), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckRange(mysql.MariaDBFlavor, c.from, c.to, end)
			if c.want == "" {
				if err != nil {
					t.Fatalf("CheckRange = %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrRange) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckRange = %v, want ErrRange containing %q", err, c.want)
			}
		})
	}
}
