package debezium

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// The offset file Debezium 3.6.1.Final's embedded engine stored
// (FileOffsetBackingStore) when make debezium-golden stopped it after the
// corpus: mid-transaction form, the BEGIN of the last transaction with 2
// events and 1 row done, the GTID set without that transaction.
func TestParseFileRecorded(t *testing.T) {
	b, err := os.ReadFile("../testdata/debezium/mysql.offsets.dat")
	if err != nil {
		t.Fatal(err)
	}
	offs, err := ParseFile(b)
	if err != nil {
		t.Fatal(err)
	}
	// make debezium-golden rewrites the file: the position and the
	// GTID set are those of the recording server.
	if len(offs) != 1 {
		t.Fatalf("%d offsets, want 1: %+v", len(offs), offs)
	}
	o := offs[0]
	if o.Connector != "golden" || o.Server != "golden" || !strings.HasPrefix(o.File, "mysql-bin.") || o.Pos <= 4 ||
		!strings.Contains(o.GTIDs, ":1-") || o.Event != 2 || o.Row != 1 || o.ServerID != 1 || o.TsSec < 1.7e9 || o.Snapshot {
		t.Fatalf("%+v: want connector golden, a MySQL binlog position, a GTID set, event 2, row 1", o)
	}
	// Damaged files are refused, never read as an empty store.
	for _, bad := range [][]byte{nil, b[:3], b[:len(b)/2], []byte("not java"), append([]byte{0xAC, 0xED, 0, 5, 0x73}, b[5:40]...)} {
		if _, err := ParseFile(bad); !errors.Is(err, ErrOffset) {
			t.Errorf("%d bytes: %v, want ErrOffset", len(bad), err)
		}
	}
}

func TestParseRecord(t *testing.T) {
	for _, c := range []struct {
		key, val string
		ok       bool
		want     Offset
		err      string
	}{
		{`["inventory",{"server":"shop"}]`, `{"file":"mariadb-bin.000007","pos":4242,"gtids":"0-1-99","event":0,"row":0,"server_id":1}`, true,
			Offset{Connector: "inventory", Server: "shop", File: "mariadb-bin.000007", Pos: 4242, GTIDs: "0-1-99", ServerID: 1}, ""},
		{`["inventory",{"server":"shop"}]`, `{"file":"b.1","pos":4,"snapshot":true}`, true, Offset{Connector: "inventory", Server: "shop", File: "b.1", Pos: 4, Snapshot: true}, ""},
		{`["inventory",{"server":"shop"}]`, `{"file":"b.1","pos":4,"snapshot":"INITIAL"}`, true, Offset{Connector: "inventory", Server: "shop", File: "b.1", Pos: 4, Snapshot: true}, ""},
		{`["inventory",{"server":"shop"}]`, "<tombstone>", false, Offset{Connector: "inventory", Server: "shop"}, ""},
		{`["pg",{"server":"x"}]`, `{"lsn":123}`, false, Offset{}, `no binlog "file" and "pos"`},
		{`["x",{"db":"y"}]`, `{}`, false, Offset{}, `no "server" partition`},
		{`{"a":1}`, `{}`, false, Offset{}, `want ["<connector>"`},
	} {
		var val []byte
		if c.val != "<tombstone>" {
			val = []byte(c.val)
		}
		o, ok, err := ParseRecord([]byte(c.key), val)
		if c.err != "" {
			if !errors.Is(err, ErrOffset) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %s: %v, want %q", c.key, c.val, err, c.err)
			}
			continue
		}
		if err != nil || ok != c.ok || o != c.want {
			t.Errorf("%s %s: %+v %v %v, want %+v %v", c.key, c.val, o, ok, err, c.want, c.ok)
		}
	}
}

// Where cdc-outbox takes over (the table of Takeover's doc and of
// docs/migrate-from-debezium.md).
func TestTakeover(t *testing.T) {
	between := Offset{Connector: "c", File: "mysql-bin.000002", Pos: 500, GTIDs: "u:1-7"}
	in := between
	in.Event, in.Row = 2, 1
	noGTID := in
	noGTID.GTIDs = ""
	snap := between
	snap.Snapshot = true
	for _, c := range []struct {
		name  string
		o     Offset
		mode  string
		want  binlog.Start
		again string // substring of what is republished, or of the error
		err   bool
	}{
		{"between, file", between, binlog.ModeFile, binlog.Start{Kind: binlog.StartFilePos, File: "mysql-bin.000002", Pos: 500}, "nothing", false},
		{"between, gtid", between, binlog.ModeGTID, binlog.Start{Kind: binlog.StartGTID, GTIDSet: "u:1-7"}, "nothing", false},
		{"in a txn, file", in, binlog.ModeFile, binlog.Start{Kind: binlog.StartFilePos, File: "mysql-bin.000002", Pos: 500}, "the transaction at mysql-bin.000002:500", false},
		{"in a txn, gtid", in, binlog.ModeGTID, binlog.Start{Kind: binlog.StartGTID, GTIDSet: "u:1-7"}, "the transaction at mysql-bin.000002:500", false},
		{"no gtids, gtid", noGTID, binlog.ModeGTID, binlog.Start{}, "stored no GTID set", true},
		{"no gtids, file", noGTID, binlog.ModeFile, binlog.Start{Kind: binlog.StartFilePos, File: "mysql-bin.000002", Pos: 500}, "the transaction", false},
		{"snapshot", snap, binlog.ModeFile, binlog.Start{}, "during its initial snapshot", true},
	} {
		st, again, err := Takeover(c.o, c.mode)
		if c.err {
			if !errors.Is(err, ErrOffset) || !strings.Contains(err.Error(), c.again) {
				t.Errorf("%s: %v, want an error with %q", c.name, err, c.again)
			}
			continue
		}
		if err != nil || st != c.want || !strings.Contains(again, c.again) {
			t.Errorf("%s: %+v %q %v, want %+v %q", c.name, st, again, err, c.want, c.again)
		}
	}
}

func TestPick(t *testing.T) {
	offs := []Offset{{Connector: "a", Server: "pa"}, {Connector: "b", Server: "pb"}}
	if _, err := Pick(offs, ""); err == nil || !strings.Contains(err.Error(), "name one with --connector") {
		t.Errorf("two without a name: %v", err)
	}
	if o, err := Pick(offs, "pb"); err != nil || o.Connector != "b" {
		t.Errorf("by topic.prefix: %+v %v", o, err)
	}
	if _, err := Pick(offs, "c"); err == nil || !strings.Contains(err.Error(), `no connector "c" among a (topic.prefix pa), b (topic.prefix pb)`) {
		t.Errorf("unknown: %v", err)
	}
}
