package binlog

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrServerConfig reports a server setting that makes row-based change
	// capture impossible (log_bin OFF, binlog_format not ROW, ...).
	ErrServerConfig = errors.New("binlog: unsuitable server configuration")
	// ErrPrivileges reports a missing grant of the publisher's MySQL user.
	ErrPrivileges = errors.New("binlog: missing privilege")
	// ErrAuth reports a login the server refused (ERROR 1045
	// ER_ACCESS_DENIED_ERROR: unknown user, wrong password or host).
	ErrAuth = errors.New("binlog: login refused")
	// ErrServerID reports a replica server_id already used by another
	// replica (the source's own is ErrOwnServerID): found by the start-up
	// check (SHOW SLAVE HOSTS / SHOW REPLICAS), or MariaDB ERROR 4052
	// ending the older of two dumps with one server_id. (MySQL reports that case as ERROR 1236 "A slave with the
	// same server_uuid/server_id", which classify cannot tell from a purged
	// position: ErrPositionUnavailable.)
	ErrServerID = errors.New("binlog: replica server_id conflict")
	// ErrOwnServerID reports a source.server-id (or the range of ids
	// under ha.server-ids) holding the source's own @@server_id: fatal,
	// and unlike ErrServerID never a reason to try the next id of the
	// range (ownServerID).
	ErrOwnServerID = errors.New("binlog: the source's own server_id")
	// ErrPositionUnavailable reports a start position the server no longer
	// (or does not yet) have: a purged binlog or a future position (ERROR 1236).
	ErrPositionUnavailable = errors.New("binlog: start position not available on the server")
	// ErrHistory reports a stored position that belongs to another binlog
	// history than the server's (a binlog reset, a restore, a rebuilt or
	// another server, renumbered files): resuming there would skip or
	// misread transactions. It arrives as a *HistoryError.
	ErrHistory = errors.New("binlog: the server's binlog history changed")
	// ErrDecode reports a row of the outbox table that cannot be turned into
	// an Event (missing column, NULL in a NOT NULL field, unexpected type).
	ErrDecode = errors.New("binlog: cannot decode outbox row")
	// ErrStart reports an invalid or missing start option.
	ErrStart = errors.New("binlog: start position")
	// ErrRange reports a bounded read (replay) whose end is not after its
	// start, or is past the end of the binlog.
	ErrRange = errors.New("binlog: invalid range")
)

// Damaged reports whether err is a damaged binlog file: a *FileError
// wrapping ErrTruncated or ErrCorruptEvent (a file that ends before its
// format description event ends, an event whose size or recorded end is
// wrong, ...), found by InspectFile or while reading.
func Damaged(err error) bool {
	var fe *FileError
	return errors.As(err, &fe) && (errors.Is(err, ErrTruncated) || errors.Is(err, ErrCorruptEvent))
}

// PositionError wraps an error with the binlog position it happened at.
type PositionError struct {
	Pos Position
	Err error
}

func (e *PositionError) Error() string {
	return fmt.Sprintf("%v (at %s)", e.Err, e.Pos)
}

func (e *PositionError) Unwrap() error { return e.Err }

// Sentinel errors of the file source (FileReader). Test with errors.Is;
// they arrive wrapped in a *FileError naming the file and the offset.
var (
	// ErrCorruptEvent reports an event that cannot be decoded: a bad size
	// or header, a checksum mismatch, or a decoder failure (including a
	// panic inside go-mysql, turned into this error).
	ErrCorruptEvent = errors.New("binlog: corrupt or undecodable event")
	// ErrTruncated reports a file that ends inside an event or inside a
	// transaction (a copy taken while the server was writing it).
	ErrTruncated = errors.New("binlog: truncated binlog file")
	// ErrNotBinlog reports a file that does not start with the binlog
	// magic number.
	ErrNotBinlog = errors.New("binlog: not a binlog file")
	// ErrNoColumns reports an outbox table whose column names are known
	// neither from the table map (binlog_row_metadata=FULL) nor from the
	// configuration.
	ErrNoColumns = errors.New("binlog: outbox column names unknown")
	// ErrFileOrder reports an unusable list of binlog files: none, a gap
	// in the rotate chain, or several base names mixed.
	ErrFileOrder = errors.New("binlog: binlog file list")
)

// ErrStalled matches every *StallError.
var ErrStalled = errors.New("binlog: the source does not answer")

// StallError reports an SQL connection to the source (Dial) on which the
// server answered nothing within source.read-timeout: its handshake, or a
// statement the server, asked on a second connection, did not answer that
// question either (stopped, frozen, a silent network) or no longer runs
// (the connection lost). It matches ErrStalled; a retry may succeed.
type StallError struct {
	Addr      string
	Bound     time.Duration // source.read-timeout
	Handshake bool          // the connection's handshake, else a statement
	Stmt      string        // the statement's start, when not the handshake
	Err       error
}

func (e *StallError) Error() string {
	what := "no handshake"
	if !e.Handshake {
		what = fmt.Sprintf("no answer to %q", e.Stmt)
	}
	return fmt.Sprintf("binlog: %s from %s within source.read-timeout (%s): the server holds the packets (stopped, frozen, or a silent network) or the connection is lost; check it, or raise source.read-timeout: %v",
		what, e.Addr, e.Bound, e.Err)
}

// Is makes a *StallError match ErrStalled.
func (e *StallError) Is(target error) bool { return target == ErrStalled }

func (e *StallError) Unwrap() error { return e.Err }
