package binlog

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrServerConfig reports a server setting that makes row-based change
	// capture impossible (log_bin OFF, binlog_format not ROW, ...).
	ErrServerConfig = errors.New("binlog: unsuitable server configuration")
	// ErrPrivileges reports a missing grant of the publisher's MySQL user.
	ErrPrivileges = errors.New("binlog: missing privilege")
	// ErrServerID reports a replica server_id already used by the source or
	// another replica (two replicas with one server_id disconnect each other,
	// MariaDB ERROR 4052 / MySQL ERROR 1236 "A slave with the same server_uuid/server_id").
	ErrServerID = errors.New("binlog: replica server_id conflict")
	// ErrPositionUnavailable reports a start position the server no longer
	// (or does not yet) have: a purged binlog or a future position (ERROR 1236).
	ErrPositionUnavailable = errors.New("binlog: start position not available on the server")
	// ErrDecode reports a row of the outbox table that cannot be turned into
	// an Event (missing column, NULL in a NOT NULL field, unexpected type).
	ErrDecode = errors.New("binlog: cannot decode outbox row")
	// ErrStart reports an invalid or missing start option.
	ErrStart = errors.New("binlog: start position")
	// ErrRange reports a bounded read (replay) whose end is not after its
	// start, or is past the end of the binlog.
	ErrRange = errors.New("binlog: invalid range")
)

// PositionError wraps an error with the binlog position it happened at.
type PositionError struct {
	Pos Position
	Err error
}

func (e *PositionError) Error() string {
	return fmt.Sprintf("%v (at %s)", e.Err, e.Pos)
}

func (e *PositionError) Unwrap() error { return e.Err }
