package binlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInspectFile(t *testing.T) {
	fi, err := InspectFile(fxFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name != fx6 || fi.RotateTo != fx7 || fi.Truncated || fi.Clean != fi.Size || fi.Flavor() != FlavorMariaDB || fi.Opened.IsZero() {
		t.Fatalf("%s: %+v", fx6, fi)
	}
	fi, err = InspectFile(fxFiles[1])
	if err != nil {
		t.Fatal(err)
	}
	if fi.RotateTo != "mariadb-bin.000008" {
		t.Fatalf("%s: rotate to %q", fx7, fi.RotateTo)
	}
	// A copy taken while the server wrote: cut inside the last event.
	b, err := os.ReadFile(fxFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), fx6)
	if err := os.WriteFile(cut, b[:5000], 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err = InspectFile(cut)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Truncated || fi.RotateTo != "" || fi.Clean >= 5000 || fi.Size != 5000 {
		t.Fatalf("cut copy: %+v", fi)
	}
	if _, err := InspectFile("testdata/outbox/README.md"); !errors.Is(err, ErrNotBinlog) {
		t.Fatalf("README: %v", err)
	}
}

func TestCheckFilePosition(t *testing.T) {
	for _, end := range fxWant {
		path := fxFiles[0]
		if end.End.File == fx7 {
			path = fxFiles[1]
		}
		if err := CheckFilePosition(path, end.End.Pos); err != nil {
			t.Errorf("transaction end %s: %v", end.End.FilePos(), err)
		}
	}
	if err := CheckFilePosition(fxFiles[0], 4); err != nil {
		t.Errorf("start of file: %v", err)
	}
	fi, _ := InspectFile(fxFiles[0])
	for _, c := range []struct {
		pos  uint32
		want string
	}{
		{3179, "not between two transactions"},   // the rows event of a transaction
		{3180, "not the start of an event"},      // inside it
		{uint32(fi.Size) + 1, "past the end of"}, // beyond the file
	} {
		err := CheckFilePosition(fxFiles[0], c.pos)
		var fe *FileError
		if !errors.Is(err, ErrStart) || !errors.As(err, &fe) || fe.File != fx6 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pos %d: %v, want ErrStart in a *FileError with %q", c.pos, err, c.want)
		}
	}
	if err := CheckFilePosition(fxFiles[0], uint32(fi.Size)); err != nil {
		t.Errorf("end of file: %v", err)
	}
}

// A copy cut before its format description event ends (the event is
// 4..256 of mariadb-bin.000007) holds nothing readable: InspectFile
// reports the damage, as FileReader does (TestFileReaderTruncatedLastFile),
// naming the file, instead of an empty file that a replay would take for
// "nothing to replay". Cut at the event's end or later, the file is a
// truncated copy, inspected.
func TestInspectFileCutInFormatDescription(t *testing.T) {
	full, err := os.ReadFile(fxFiles[1])
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fx7)
	for _, c := range []struct {
		cut  int
		want string // "" no error
	}{
		{0, "the file ends inside the 4-byte magic number (0 bytes)"},
		{3, "the file ends inside the 4-byte magic number (3 bytes)"},
		{4, "the file ends at 4"},
		{5, "the file ends inside its first event (1 bytes after the magic number)"},
		{22, "the file ends inside its first event (18 bytes"},
		{23, "the file ends inside its first event (19 bytes"},
		{50, "the file ends inside its first event"},
		{100, "the file ends inside its first event"},
		{255, "the file ends inside its first event (251 bytes"},
		{256, ""},
		{257, ""},
	} {
		if err := os.WriteFile(path, full[:c.cut], 0o600); err != nil {
			t.Fatal(err)
		}
		fi, err := InspectFile(path)
		if c.want == "" {
			if err != nil || fi.Opened.IsZero() {
				t.Errorf("cut at %d: %+v, %v; want the format description's time, no error", c.cut, fi, err)
			}
			continue
		}
		var fe *FileError
		if !errors.As(err, &fe) || fe.File != fx7 || !errors.Is(err, ErrTruncated) || !Damaged(err) ||
			!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "before its format description event ends") {
			t.Errorf("cut at %d: %v; want a damaged-file error naming %s and %q", c.cut, err, fx7, c.want)
		}
	}
	// Another event first: damage too.
	b := append([]byte(nil), full[:256]...)
	b[4+4] = byte(0x04) // ROTATE_EVENT instead of FORMAT_DESCRIPTION_EVENT
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := InspectFile(path); !errors.Is(err, ErrCorruptEvent) || !Damaged(err) || !strings.Contains(err.Error(), "want FORMAT_DESCRIPTION_EVENT") {
		t.Errorf("a rotate event first: %v", err)
	}
}

// The SHOW BINLOG EVENTS types a resumable position may be followed by:
// a checkpoint before a tagged GTID's transaction (MySQL 8.4+) is one
// (it was refused as "not between two transactions").
func TestBetweenTransactions(t *testing.T) {
	for _, c := range []struct {
		typ, info string
		want      bool
	}{
		{"Gtid", "SET @@SESSION.GTID_NEXT= 'u:5'", true},
		{"Gtid_tagged_log_event", "SET @@SESSION.GTID_NEXT= 'u:tenant_a:1'", true},
		{"Anonymous_Gtid", "", true},
		{"Query", "BEGIN", true},
		{"Query", " begin ", true},
		{"Query", "COMMIT", false},
		{"Table_map", "", false},
		{"Write_rows", "", false},
		{"Xid", "COMMIT /* xid=9 */", false},
		{"Rotate", "", true},
	} {
		if got := betweenTransactions(c.typ, []byte(c.info)); got != c.want {
			t.Errorf("%s %q: %v, want %v", c.typ, c.info, got, c.want)
		}
	}
}
