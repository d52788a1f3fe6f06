package binlog

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// The table of docs/operations.md, "When the server's binlog history
// changes": what CheckHistory refuses, resumes, or resumes by GTID.
func TestCheckHistory(t *testing.T) {
	const (
		u   = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
		f8  = "mariadb-bin.000008"
		m8  = "mysql-bin.000008"
		m12 = "mysql-bin.000012"
	)
	maria := Position{File: f8, Pos: 405, GTIDSet: "0-1-1522"}
	my := Position{File: m8, Pos: 405, GTIDSet: u + ":1-1522"}
	type want struct {
		refused  bool
		change   Change
		executed bool
		repoint  bool
		evidence string
	}
	cases := []struct {
		name string
		f    HistoryFacts
		want want
	}{
		// MariaDB, file mode
		{"mariadb: the same history", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeFile, Stored: maria, SameServer: true, Listed: true, Newest: f8,
			AtPos: "0-1-1522", AtPosKnown: true, Executed: "0-1-1600"}, want{}},
		{"mariadb: RESET MASTER, numbering back at the file: GTID state at the offset differs, set not executed",
			HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeFile, Stored: maria, SameServer: true, Listed: true, Newest: f8,
				AtPos: "0-1-104", AtPosKnown: true, Executed: "0-1-300"},
			want{refused: true, change: ChangeReset, evidence: "BINLOG_GTID_POS"}},
		{"mariadb: reset, numbering not yet back: the newest file is older", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeFile, Stored: maria, SameServer: true,
			Newest: "mariadb-bin.000003", Executed: "0-1-2000"}, want{refused: true, change: ChangeReset, evidence: "numbering started again"}},
		{"mariadb: a file of another base name (the old source's, a failover): no numbering to compare", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeGTID,
			Stored: Position{File: "primary-bin.000042", Pos: 4242, GTIDSet: "0-1-495,77-1-3"}, SameServer: true, Newest: "mariadb-bin.000003", Executed: "0-1-495,77-1-3"}, want{}},
		{"mariadb: file purged (older than the oldest): not a history change", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeFile, Stored: maria, SameServer: true,
			Newest: "mariadb-bin.000020", Executed: "0-1-9000"}, want{}},
		{"mariadb: offset inside an event of the new file", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeFile, Stored: maria, SameServer: true, Listed: true, Newest: f8,
			Offset: "no event starts at mariadb-bin.000008:405 on the server", Executed: "0-1-3000"}, want{refused: true, change: ChangeReset, evidence: "no event starts"}},
		{"mariadb: a domain the offset's state lacks is no evidence (an old checkpoint, a deleted domain)", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeFile,
			Stored: Position{File: f8, Pos: 405, GTIDSet: "0-1-1522,5-9-3"}, SameServer: true, Listed: true, Newest: f8, AtPos: "0-1-1522", AtPosKnown: true, Executed: "0-1-1522"}, want{}},
		{"mariadb: another server in file mode", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeFile, Stored: maria, Listed: true, Newest: f8,
			AtPos: "0-1-1522", AtPosKnown: true, Executed: "0-1-1522"}, want{refused: true, change: ChangeAnotherServer}},
		// MariaDB, GTID mode
		{"mariadb gtid: reset, the set not executed", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeGTID, Stored: maria, SameServer: true, Newest: "mariadb-bin.000003",
			Executed: "0-1-300"}, want{refused: true, change: ChangeReset, evidence: "has not executed 0-1-1522"}},
		{"mariadb gtid: reset that reused the GTIDs past the set", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeGTID, Stored: maria, SameServer: true, Listed: true, Newest: f8,
			AtPos: "0-1-1700", AtPosKnown: true, Executed: "0-1-1800"}, want{refused: true, change: ChangeReset, executed: true, evidence: "BINLOG_GTID_POS"}},
		{"mariadb gtid: promoted replica with every transaction: re-pointed", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeGTID, Stored: maria,
			Newest: "mariadb-bin.000002", Executed: "0-1-1522,0-2-1530"}, want{repoint: true}},
		{"mariadb gtid: promoted replica lacking transactions", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeGTID, Stored: maria,
			Executed: "0-1-1500,0-2-1501"}, want{refused: true, change: ChangeAnotherServer, evidence: "has not executed"}},
		{"mariadb gtid: the set known from gtid_slave_pos", HistoryFacts{Flavor: FlavorMariaDB, Mode: ModeGTID, Stored: maria, SameServer: true,
			Executed: "0-2-40,0-1-1522"}, want{}},
		// MySQL, file mode
		{"mysql: the same history", HistoryFacts{Flavor: FlavorMySQL, Mode: ModeFile, Stored: my, SameServer: true, Listed: true, Newest: m12,
			Previous: u + ":1-1400", NextGTID: u + ":1523", Executed: u + ":1-3000"}, want{}},
		{"mysql: RESET BINARY LOGS AND GTIDS, numbering back: not executed", HistoryFacts{Flavor: FlavorMySQL, Mode: ModeFile, Stored: my, SameServer: true, Listed: true, Newest: m8,
			Previous: u + ":1-290", NextGTID: u + ":300", Executed: u + ":1-310"}, want{refused: true, change: ChangeReset, evidence: "does not contain"}},
		{"mysql: reset, more transactions since: the one at the offset is in the set", HistoryFacts{Flavor: FlavorMySQL, Mode: ModeFile, Stored: my, SameServer: true, Listed: true, Newest: m12,
			Previous: u + ":1-1000", NextGTID: u + ":1100", Executed: u + ":1-3000"}, want{refused: true, change: ChangeReset, evidence: "already has"}},
		{"mysql: reset, the file starts after transactions the set lacks", HistoryFacts{Flavor: FlavorMySQL, Mode: ModeFile, Stored: my, SameServer: true, Listed: true, Newest: m12,
			Previous: u + ":1-2000", Executed: u + ":1-3000"}, want{refused: true, change: ChangeReset, evidence: "Previous_gtids"}},
		{"mysql gtid_mode OFF: nothing to compare but the offset", HistoryFacts{Flavor: FlavorMySQL, Mode: ModeFile, Stored: Position{File: m8, Pos: 405}, SameServer: true, Listed: true, Newest: m8},
			want{}},
		{"mysql gtid_mode OFF: offset past the end of the file", HistoryFacts{Flavor: FlavorMySQL, Mode: ModeFile, Stored: Position{File: m8, Pos: 405}, SameServer: true, Listed: true, Newest: m8,
			Offset: "mysql-bin.000008:405 is past the end of mysql-bin.000008 on the server (181 bytes)"}, want{refused: true, change: ChangeReset, evidence: "past the end"}},
		// MySQL, GTID mode
		{"mysql gtid: reset, not executed", HistoryFacts{Flavor: FlavorMySQL, Mode: ModeGTID, Stored: my, SameServer: true, Newest: "mysql-bin.000003", Executed: u + ":1-300"},
			want{refused: true, change: ChangeReset, evidence: "does not contain"}},
		{"mysql gtid: reset that reused the GTIDs past the set", HistoryFacts{Flavor: FlavorMySQL, Mode: ModeGTID, Stored: my, SameServer: true, Listed: true, Newest: m8,
			Previous: u + ":1-1000", NextGTID: u + ":1100", Executed: u + ":1-1800"}, want{refused: true, change: ChangeReset, executed: true, evidence: "already has"}},
		{"mysql gtid: switchover to a server with every transaction: re-pointed", HistoryFacts{Flavor: FlavorMySQL, Mode: ModeGTID, Stored: my,
			Executed: u + ":1-1600,aaaaaaaa-71ca-11e1-9e33-c80aa9429562:1-7"}, want{repoint: true}},
		{"mysql gtid: the checkpoint's file purged on the same server", HistoryFacts{Flavor: FlavorMySQL, Mode: ModeGTID, Stored: my, SameServer: true, Newest: "mysql-bin.000020",
			Executed: u + ":1-9000"}, want{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := CheckHistory(c.f)
			if v.Repoint != c.want.repoint {
				t.Errorf("repoint %v, want %v", v.Repoint, c.want.repoint)
			}
			if (v.Err != nil) != c.want.refused {
				t.Fatalf("refused: %v, want %v", v.Err, c.want.refused)
			}
			if v.Err == nil {
				return
			}
			e := v.Err
			msg := e.Error()
			if e.Change != c.want.change || e.Executed != c.want.executed || !errors.Is(e, ErrHistory) || !IsFatal(e) {
				t.Errorf("change %d executed %v (fatal %v), want %d %v", e.Change, e.Executed, IsFatal(e), c.want.change, c.want.executed)
			}
			if !strings.Contains(msg, c.want.evidence) || !strings.Contains(msg, "cdc-outbox checkpoint set earliest") || !strings.Contains(msg, "NOT published") {
				t.Errorf("message lacks %q or the fix:\n%s", c.want.evidence, msg)
			}
			if c.want.executed && !strings.Contains(msg, "checkpoint set gtid:"+c.f.Stored.GTIDSet) {
				t.Errorf("message lacks the GTID resume for a restored server:\n%s", msg)
			}
		})
	}
}

// A file-mode start refuses the start file when the server created it at
// another time than the one stored with the position, before anything of
// it is read; the same time, no stored time, GTID mode and bounded reads
// pass.
func TestReaderChecksFileOpened(t *testing.T) {
	stored := time.Unix(ts-3600, 0).UTC()
	fde := ev(replication.FORMAT_DESCRIPTION_EVENT, 0, &replication.FormatDescriptionEvent{})
	for _, c := range []struct {
		name    string
		opened  time.Time
		mode    string
		refused bool
	}{
		{"another creation time", stored, ModeFile, true},
		{"the same creation time", tsTime, ModeFile, false},
		{"no stored time (an older checkpoint)", time.Time{}, ModeFile, false},
		{"gtid mode: the server picks the file", stored, ModeGTID, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newState(t, mysql.MariaDBFlavor, "0-1-4")
			st.r.cfg.PositionMode = c.mode
			st.r.from = Position{File: file1, Pos: 400, GTIDSet: "0-1-4", Opened: c.opened}
			st.pos = st.r.from
			_, err := st.handle(rotate(file1, 400), &replication.EventHeader{EventType: replication.ROTATE_EVENT})
			if err == nil {
				_, err = st.handle(fde, fde.Header)
			}
			var he *HistoryError
			if got := errors.As(err, &he); got != c.refused {
				t.Fatalf("err %v, refused want %v", err, c.refused)
			}
			if c.refused && (!strings.Contains(err.Error(), "was created at 2025-11-29T10:00:00Z, the position's at 2025-11-29T09:00:00Z") || !IsFatal(err)) {
				t.Fatalf("message: %v", err)
			}
			if !c.refused && !st.pos.Opened.Equal(tsTime) {
				t.Fatalf("position's creation time %v, want the event's %v", st.pos.Opened, tsTime)
			}
		})
	}
}

// The ERROR 1236 texts the servers send for an offset that is no event
// of the file become a *HistoryError naming the reset, at a file-mode
// start only, and so does a binlog reset under a running stream; other
// 1236 errors stay what they were.
func TestHistoryChangedErrors(t *testing.T) {
	r := &Reader{cfg: Config{PositionMode: ModeFile}, from: Position{File: "mysql-bin.000008", Pos: 405}}
	st := &state{r: r, pos: r.from, file: r.from.File}
	for _, c := range []struct {
		msg   string
		stale bool
	}{
		{"log event entry exceeded max_allowed_packet; Increase max_allowed_packet on source; the first event 'mysql-bin.000008' at 405", true},
		{"Client requested source to start replication from position > file size", true},
		{"binlog truncated in the middle of event; consider out of disk space on master", true},
		{"Client requested master to start replication from impossible position", true},
		{"bogus data in log event; the first event 'mariadb-bin.000008' at 405", true},
		{"Could not find first log file name in binary log index file", false},
	} {
		err := r.historyChanged(&mysql.MyError{Code: 1236, Message: c.msg}, st)
		var he *HistoryError
		if errors.As(err, &he) != c.stale {
			t.Errorf("%q: %v", c.msg, err)
			continue
		}
		if c.stale && (!strings.Contains(err.Error(), "mysql-bin.000008:405") || !strings.Contains(err.Error(), "RESET MASTER") || !IsFatal(classify(err))) {
			t.Errorf("%q: message %v", c.msg, err)
		}
	}
	// Once the stream read events, those texts are damage, not a stale start.
	st.read = true
	if err := r.historyChanged(&mysql.MyError{Code: 1236, Message: "bogus data in log event"}, st); errors.Is(err, ErrHistory) {
		t.Errorf("after reading: %v", err)
	}
	// The binlog reset under a running stream, in either mode.
	gone := &mysql.MyError{Code: 1236, Message: "could not find next log; the first event 'mysql-bin.000006' at 7095"}
	if err := r.historyChanged(gone, st); !errors.Is(err, ErrHistory) || !strings.Contains(err.Error(), "lost the file after mysql-bin.000008") {
		t.Errorf("next log gone: %v", err)
	}
	r.cfg.PositionMode = ModeGTID
	r.from.GTIDSet = "0-1-5"
	st.read = false
	if err := r.historyChanged(&mysql.MyError{Code: 1236, Message: "bogus data in log event"}, st); errors.Is(err, ErrHistory) {
		t.Errorf("gtid mode: %v", err)
	}
	if err := r.historyChanged(gone, st); !errors.Is(err, ErrHistory) {
		t.Errorf("gtid mode, next log gone: %v", err)
	}
}

func TestStreamEvidence(t *testing.T) {
	logs := []LogFile{{"mariadb-bin.000001", 17650}, {"mariadb-bin.000002", 4719}}
	for _, c := range []struct {
		name string
		at   Position
		want string // a substring; "" for none
	}{
		{"within the file", Position{File: "mariadb-bin.000002", Pos: 4719}, ""},
		{"an older file, whole", Position{File: "mariadb-bin.000001", Pos: 17650}, ""},
		{"read past the end of a file created again", Position{File: "mariadb-bin.000001", Pos: 277450}, "the server's mariadb-bin.000001 is 17650 bytes, but the stream read it up to offset 277450"},
		{"a file newer than the newest", Position{File: "mariadb-bin.000009", Pos: 400}, "the server's newest binlog file is mariadb-bin.000002, older than mariadb-bin.000009"},
		{"a purged file", Position{File: "mariadb-bin.000000", Pos: 400}, ""},
		{"another base name", Position{File: "binlog.000009", Pos: 400}, ""},
		{"no position", Position{}, ""},
		{"a file's start", Position{File: "mariadb-bin.000009", Pos: 4}, ""},
	} {
		got := StreamEvidence(logs, c.at)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := StreamEvidence([]LogFile{{"mariadb-bin.000001", 0}}, Position{File: "mariadb-bin.000001", Pos: 900}); got != "" {
		t.Errorf("a size not known (0): %q, want no evidence", got)
	}
}

// The GTID header of a file entered mid-stream must follow what was read:
// MariaDB's Gtid_list, MySQL's Previous_gtids.
func TestFileHeaderFollowsRead(t *testing.T) {
	maria := func(s string) mysql.GTIDSet {
		g, err := mysql.ParseMariadbGTIDSet(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	list := func(gs ...string) []mysql.MariadbGTID {
		var out []mysql.MariadbGTID
		for _, s := range gs {
			g, err := mysql.ParseMariadbGTID(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, *g)
		}
		return out
	}
	for _, c := range []struct {
		name    string
		tracked string
		list    []mysql.MariadbGTID
		behind  bool
	}{
		{"the next file of one history", "0-1-300", list("0-1-300"), false},
		{"more written meanwhile", "0-1-300", list("0-1-320", "1-2-5"), false},
		{"reset, then 5 transactions and a flush", "0-1-300", list("0-1-5"), true},
		{"another server's numbering in the domain, higher", "0-1-300", list("0-1-200", "0-2-301"), false},
		{"a domain the list lacks (DELETE_DOMAIN_ID)", "0-1-300,1-1-9", list("0-1-300"), false},
		{"reset, then a flush at once: an empty list", "0-1-300", nil, false},
		{"a second domain behind", "0-1-300,1-1-9", list("0-1-300", "1-1-2"), true},
	} {
		if got := listBehind(maria(c.tracked), c.list); (got != "") != c.behind {
			t.Errorf("%s: %q, want behind %v", c.name, got, c.behind)
		}
	}
	const u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	mysqlSet := func(s string) mysql.GTIDSet {
		g, err := mysql.ParseMysqlGTIDSet(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, c := range []struct {
		name              string
		tracked, previous string
		lacks             bool
	}{
		{"the next file of one history", u + ":1-300", u + ":1-300", false},
		{"more written meanwhile", u + ":1-300", u + ":1-320", false},
		{"reset, then 5 transactions and a flush", u + ":1-300", u + ":1-5", true},
		{"reset, then a flush at once", u + ":1-300", "", true},
		{"nothing tracked (gtid_mode OFF)", "", "", false},
	} {
		if got := previousLacks(mysqlSet(c.tracked), c.previous); (got != "") != c.lacks {
			t.Errorf("%s: %q, want lacks %v", c.name, got, c.lacks)
		}
	}
	if got := listBehind(mysqlSet(u+":1-3"), list("0-1-1")); got != "" {
		t.Errorf("a MySQL set against a Gtid_list: %q", got)
	}
}

// Rotated into a file mid-stream where the GTID header tells nothing
// (MySQL with gtid_mode OFF: an empty Previous_gtids; nothing tracked),
// the server's file the stream left must be at least as long as what was
// read of it: shorter, it is another history's (reset, then FLUSH BINARY
// LOGS), and the reader stops before the new file's transactions, naming
// where the stream left the old file.
func TestRotationChecksFileLeft(t *testing.T) {
	const file2 = "mysql-bin.000002"
	for _, c := range []struct {
		name    string
		logs    []LogFile
		err     error
		refused bool
	}{
		{"the file ends where it was read to", []LogFile{{file1, 5000}, {file2, 157}}, nil, false},
		{"the file ends after it (its rotate event)", []LogFile{{file1, 5047}, {file2, 157}}, nil, false},
		{"the file was created again, shorter", []LogFile{{file1, 900}, {file2, 157}}, nil, true},
		{"the file was purged at once", []LogFile{{file2, 157}}, nil, false},
		{"the server does not answer (a warning; the measurement compares again)", nil, errors.New("connection refused"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newState(t, mysql.MySQLFlavor, "")
			st.file, st.pos, st.read = file1, Position{File: file1, Pos: 5000}, true
			asked := 0
			st.r.logSizes = func() ([]LogFile, error) { asked++; return c.logs, c.err }
			_, err := st.handle(rotate(file2, 4), &replication.EventHeader{EventType: replication.ROTATE_EVENT})
			if err == nil {
				_, err = st.handle(ev(replication.PREVIOUS_GTIDS_EVENT, 0, &replication.PreviousGTIDsEvent{}), &replication.EventHeader{EventType: replication.PREVIOUS_GTIDS_EVENT})
			}
			if asked != 1 {
				t.Fatalf("asked the server %d times, want once", asked)
			}
			var he *HistoryError
			switch {
			case c.refused != errors.As(err, &he):
				t.Fatalf("err %v, refused want %v", err, c.refused)
			case c.refused && (he.Stored.FilePos() != file1+":5000" || !strings.Contains(err.Error(), "is 900 bytes, but the stream read it up to offset 5000") || !IsFatal(err)):
				t.Fatalf("message: %v", err)
			case !c.refused && err != nil:
				t.Fatal(err)
			}
			// Once per entered file.
			if _, err := st.handle(ev(replication.PREVIOUS_GTIDS_EVENT, 0, &replication.PreviousGTIDsEvent{}), &replication.EventHeader{EventType: replication.PREVIOUS_GTIDS_EVENT}); err != nil || asked != 1 {
				t.Fatalf("a second header: err %v, asked %d", err, asked)
			}
		})
	}
}
