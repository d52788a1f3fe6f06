package binlog

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// fx7Event is an event of testdata/outbox/mariadb-bin.000007 (see
// mariadb-binlog): [start, end).
type fx7Event struct{ start, end int }

var (
	fx7GTID3160 = fx7Event{344, 386}
	fx7Annotate = fx7Event{1025, 1249} // inside transaction 0-1-3160
	fx7Rows6    = fx7Event{866, 1025}  // outbox row 6
	fx7XID3160  = fx7Event{1612, 1643}
)

// mutate returns fx7 with b changed by f, written to a temporary file.
func mutate(t *testing.T, f func(b []byte) []byte) string {
	t.Helper()
	b, err := os.ReadFile(fxFiles[1])
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fx7)
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// cut removes an event.
func cut(e fx7Event) func([]byte) []byte {
	return func(b []byte) []byte { return append(append([]byte{}, b[:e.start]...), b[e.end:]...) }
}

// retype changes an event's type byte (and flags) and recomputes its
// CRC32, as a writer that meant it would.
func retype(e fx7Event, typ byte, flags uint16) func([]byte) []byte {
	return func(b []byte) []byte {
		ev := b[e.start:e.end]
		ev[4] = typ
		binary.LittleEndian.PutUint16(ev[17:], flags)
		binary.LittleEndian.PutUint32(ev[len(ev)-4:], crc32.ChecksumIEEE(ev[:len(ev)-4]))
		return b
	}
}

// Issue 12 item 5: an archived file whose events do not add up is
// corruption, fatal with the file and offset; no transaction with outbox
// rows is dropped silently, and only a file that really ends early is a
// truncated backup.
func TestFileReaderIntegrity(t *testing.T) {
	cases := []struct {
		name   string
		mut    func([]byte) []byte
		is     error
		offset int64
		msg    string
	}{
		{"deleted rows event", cut(fx7Rows6), ErrCorruptEvent, 866, "end_log_pos"},
		{"deleted transaction", cut(fx7Event{344, 1643}), ErrCorruptEvent, 344, "end_log_pos"},
		{"deleted commit event", cut(fx7XID3160), ErrCorruptEvent, 1612, "end_log_pos"},
		{"commit event retyped to an unknown type", retype(fx7XID3160, 0xEE, 0), ErrCorruptEvent, 1612, "unknown event type"},
		{"commit event retyped to a known ignorable type", retype(fx7XID3160, byte(replication.IGNORABLE_EVENT), 0), ErrCorruptEvent, 1643, "no commit event"},
		{"unknown event type inside a transaction", retype(fx7Annotate, 0xEE, 0), ErrCorruptEvent, 1025, "unknown event type"},
		{"corrupt event size (larger than the file) mid-file", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[fx7Annotate.start+9:], 1<<20)
			return b
		}, ErrCorruptEvent, 1025, "end_log_pos"},
		{"corrupt event size (smaller) mid-file", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[fx7Annotate.start+9:], 100)
			return b
		}, ErrCorruptEvent, 1025, "end_log_pos"},
		{"cut inside the format description event", func(b []byte) []byte { return b[:100] }, ErrTruncated, 4, "format description"},
		{"cut inside the magic number", func(b []byte) []byte { return b[:2] }, ErrTruncated, 0, "format description"},
		{"magic number only", func(b []byte) []byte { return b[:4] }, ErrTruncated, 4, "format description"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := mutate(t, c.mut)
			got, res, err := fileRead(t, []string{fxFiles[0], path}, fxCfg)
			var fe *FileError
			if !errors.Is(err, c.is) || !errors.As(err, &fe) || fe.File != fx7 || fe.Offset != c.offset || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v (result %+v), want %v at %s offset %d mentioning %q", err, res, c.is, fx7, c.offset, c.msg)
			}
			for _, tx := range got {
				if tx.End.File == fx7 && len(tx.Events) > 0 && tx.End.Pos > uint32(c.offset) {
					t.Errorf("a transaction after the damage was emitted: %+v", tx)
				}
			}
		})
	}
}

// An unknown event type that carries LOG_EVENT_IGNORABLE_F may be skipped
// (MySQL's rule for events a reader does not know), outside a
// transaction; the rest is read.
func TestFileReaderIgnorableUnknownEvent(t *testing.T) {
	path := mutate(t, retype(fx7Event{299, 344}, 0xEE, 0x80)) // the Binlog_checkpoint event
	got, _, err := fileRead(t, []string{fxFiles[0], path}, fxCfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(fxWant) {
		t.Fatalf("%d transactions, want %d", len(got), len(fxWant))
	}
}
