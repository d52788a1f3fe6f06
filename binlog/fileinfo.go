package binlog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
)

// FileInfo describes one binlog file from its event headers, without
// decoding its rows (see InspectFile).
type FileInfo struct {
	Path string
	Name string // base name
	Size int64  // bytes on disk
	// Clean is the offset where the last complete event ends: Size, unless
	// the file ends inside an event (Truncated).
	Clean     int64
	Truncated bool
	// Opened is the timestamp of the format description event: when the
	// server opened the file (one-second resolution).
	Opened time.Time
	// ServerVersion is the format description event's server version
	// (e.g. "10.11.19-MariaDB-log").
	ServerVersion string
	// RotateTo is the file named by the rotate event that closes the file;
	// "" when its last event is not a rotate (the file was copied while
	// the server was still writing it, or the server stopped uncleanly):
	// the server may have written more to it after the copy.
	RotateTo string
}

// Flavor returns FlavorMariaDB or FlavorMySQL from the server version.
func (fi FileInfo) Flavor() string {
	if strings.Contains(strings.ToLower(fi.ServerVersion), "mariadb") {
		return FlavorMariaDB
	}
	return FlavorMySQL
}

// walkEvents reads the event headers of the binlog file at path, from its
// magic number to its end, calling fn with the offset, header and a reader
// of the event's remaining bytes (fn may read them; what it leaves is
// skipped). fn returns stop to end the walk. It returns the offset reached
// (the end of the last complete event when the file ends inside one) and
// whether the file ends inside an event. Errors are *FileError.
func walkEvents(path string, fn func(off int64, hdr []byte, body io.Reader) (stop bool, err error)) (end int64, truncated bool, err error) {
	base := filepath.Base(path)
	f, err := os.Open(path)
	if err != nil {
		return 0, false, &FileError{File: base, Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, false, &FileError{File: base, Err: err}
	}
	size := fi.Size()
	rd := bufio.NewReaderSize(f, 1<<16)
	var magic [4]byte
	if n, err := io.ReadFull(rd, magic[:]); err != nil {
		if bytes.Equal(magic[:n], replication.BinLogFileHeader[:n]) {
			return 0, true, nil
		}
		return 0, false, &FileError{File: base, Err: fmt.Errorf("%w: %v", ErrNotBinlog, err)}
	}
	if !bytes.Equal(magic[:], replication.BinLogFileHeader) {
		return 0, false, &FileError{File: base, Err: fmt.Errorf("%w: magic number %x, want fe62696e", ErrNotBinlog, magic)}
	}
	hdr := make([]byte, replication.EventHeaderSize)
	off := int64(4)
	for {
		if _, err := io.ReadFull(rd, hdr); err != nil {
			if err == io.EOF {
				return off, false, nil
			}
			if err == io.ErrUnexpectedEOF {
				return off, true, nil
			}
			return off, false, &FileError{File: base, Offset: off, Err: err}
		}
		evSize := int64(binary.LittleEndian.Uint32(hdr[9:13]))
		if evSize < replication.EventHeaderSize || evSize > maxEventSize {
			return off, false, &FileError{File: base, Offset: off, Err: fmt.Errorf("%w: event size %d out of range", ErrCorruptEvent, evSize)}
		}
		if off+evSize > size {
			return off, true, nil
		}
		body := io.LimitReader(rd, evSize-replication.EventHeaderSize)
		stop, err := fn(off, hdr, body)
		if err != nil {
			return off, false, &FileError{File: base, Offset: off, Err: err}
		}
		if _, err := io.Copy(io.Discard, body); err != nil {
			return off, false, &FileError{File: base, Offset: off, Err: err}
		}
		if stop {
			return off, false, nil
		}
		off += evSize
	}
}

// errNoFDE is the error of a file that ends (what: where) before its
// format description event ends: damage, not a truncated copy, as nothing
// in it can be read.
func errNoFDE(what string) error {
	return fmt.Errorf("%w: %s, before its format description event ends: the file holds no readable event; copy it again from the server", ErrTruncated, what)
}

// InspectFile reads the event headers of a binlog file (and the bodies of
// its format description and rotate events): its size, where its complete
// events end, when it was opened, and the file its closing rotate event
// names. It decodes no rows: a 1 GiB file takes a fraction of a second.
// A file that ends before its format description event ends, or whose
// first event is another, is damaged: a *FileError wrapping ErrTruncated
// or ErrCorruptEvent (as FileReader reports it), never an empty file.
func InspectFile(path string) (FileInfo, error) {
	info := FileInfo{Path: path, Name: filepath.Base(path)}
	if st, err := os.Stat(path); err == nil {
		info.Size = st.Size()
	}
	checksum, sawFDE := false, false
	var lastType replication.EventType
	var lastBody []byte
	end, trunc, err := walkEvents(path, func(off int64, hdr []byte, body io.Reader) (bool, error) {
		lastType, lastBody = replication.EventType(hdr[4]), nil
		if !sawFDE && lastType != replication.FORMAT_DESCRIPTION_EVENT {
			return true, fmt.Errorf("%w: first event is %s, want FORMAT_DESCRIPTION_EVENT (binlog format v4, MySQL 5.0+ / MariaDB)", ErrCorruptEvent, lastType)
		}
		switch lastType {
		case replication.FORMAT_DESCRIPTION_EVENT:
			sawFDE = true
			b, err := io.ReadAll(body)
			if err != nil {
				return true, err
			}
			// binlog_version(2) server_version(50) create_timestamp(4)
			// header_length(1) post-header lengths, checksum alg(1), CRC(4).
			if len(b) >= 52 {
				info.ServerVersion = string(bytes.TrimRight(b[2:52], "\x00"))
			}
			if info.Opened.IsZero() {
				info.Opened = time.Unix(int64(binary.LittleEndian.Uint32(hdr[0:4])), 0).UTC()
			}
			checksum = len(b) >= 5 && b[len(b)-5] == byte(replication.BINLOG_CHECKSUM_ALG_CRC32)
		case replication.ROTATE_EVENT:
			b, err := io.ReadAll(body)
			if err != nil {
				return true, err
			}
			lastBody = b
		}
		return false, nil
	})
	if err != nil {
		return info, err
	}
	info.Clean, info.Truncated = end, trunc
	switch {
	case sawFDE:
	case end == 0:
		return info, &FileError{File: info.Name, Err: errNoFDE(fmt.Sprintf("the file ends inside the 4-byte magic number (%d bytes)", info.Size))}
	case trunc:
		return info, &FileError{File: info.Name, Offset: end, Err: errNoFDE(fmt.Sprintf("the file ends inside its first event (%d bytes after the magic number)", info.Size-end))}
	default:
		return info, &FileError{File: info.Name, Offset: end, Err: errNoFDE(fmt.Sprintf("the file ends at %d", end))}
	}
	if !trunc && lastType == replication.ROTATE_EVENT && len(lastBody) > 8 {
		name := lastBody[8:]
		if checksum && len(name) > replication.BinlogChecksumLength {
			name = name[:len(name)-replication.BinlogChecksumLength]
		}
		info.RotateTo = string(name)
	}
	return info, nil
}

// boundaryTypes are the event types that start a transaction (event
// group) or stand between transactions (as boundaryEvents for SHOW BINLOG
// EVENTS).
var boundaryTypes = map[replication.EventType]bool{
	replication.FORMAT_DESCRIPTION_EVENT: true, replication.GTID_EVENT: true, replication.ANONYMOUS_GTID_EVENT: true,
	replication.GTID_TAGGED_LOG_EVENT: true, replication.PREVIOUS_GTIDS_EVENT: true, replication.ROTATE_EVENT: true,
	replication.STOP_EVENT: true, replication.HEARTBEAT_EVENT: true, replication.MARIADB_GTID_EVENT: true,
	replication.MARIADB_GTID_LIST_EVENT: true, replication.MARIADB_BINLOG_CHECKPOINT_EVENT: true,
	replication.MARIADB_START_ENCRYPTION_EVENT: true,
}

// CheckFilePosition checks that pos is a transaction boundary of the
// binlog file at path: within its complete events, an event starts there
// (or the file's complete events end there) and that event starts a
// transaction or stands between two (a GTID event, a BEGIN query, a
// rotate, ...). Failures wrap ErrStart in a *FileError naming the file and
// offset.
func CheckFilePosition(path string, pos uint32) error {
	base := filepath.Base(path)
	target := int64(pos)
	var found bool
	var bad string
	end, _, err := walkEvents(path, func(off int64, hdr []byte, body io.Reader) (bool, error) {
		if off < target {
			return false, nil
		}
		if off > target {
			return true, nil
		}
		found = true
		typ := replication.EventType(hdr[4])
		if boundaryTypes[typ] {
			return true, nil
		}
		if typ == replication.QUERY_EVENT || typ == replication.MARIADB_QUERY_COMPRESSED_EVENT {
			b, err := io.ReadAll(body)
			if err != nil {
				return true, err
			}
			// Post-header: thread id 4, exec time 4, schema length 1,
			// error code 2, status variables length 2; then the status
			// variables, the schema, NUL and the query.
			if len(b) >= 13 {
				q := 13 + int(binary.LittleEndian.Uint16(b[11:13])) + int(b[8]) + 1
				if q < len(b) && len(b)-q >= 5 && strings.EqualFold(string(b[q:q+5]), "BEGIN") {
					return true, nil
				}
			}
		}
		bad = typ.String()
		return true, nil
	})
	if err != nil {
		return err
	}
	switch {
	case found && bad == "":
		return nil
	case found:
		return &FileError{File: base, Offset: target, Err: fmt.Errorf("%w: %s:%d is not between two transactions (the event there is %s): use the end of a transaction, e.g. the binlog_txn_end header of a record",
			ErrStart, base, pos, bad)}
	case target == end:
		return nil // the end of the file's complete events
	case target > end:
		return &FileError{File: base, Offset: target, Err: fmt.Errorf("%w: %s:%d is past the end of the file's complete events (%d)", ErrStart, base, pos, end)}
	}
	return &FileError{File: base, Offset: target, Err: fmt.Errorf("%w: %s:%d is not the start of an event: use the end of a transaction, e.g. the binlog_txn_end header of a record", ErrStart, base, pos)}
}
