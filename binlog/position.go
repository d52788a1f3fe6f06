package binlog

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Position is a point in the binary log between two transactions.
//
// File and Pos name the binlog file and the byte offset of the next event
// to read (the end_log_pos of the transaction's last event). GTIDSet is the
// set of transactions executed up to and including this point, in the
// flavor's text form: "uuid:1-100,uuid2:1-5" for MySQL (manual §19.1.3.1
// "GTID Format and Storage"), "domain-server-seq[,...]" for MariaDB
// (gtid_binlog_pos). GTID is the last transaction's own GTID, empty when
// unknown. Time is the commit timestamp of that transaction: the GTID
// event's immediate_commit_timestamp (µs) on MySQL 8.0.1+ when read from
// the server, else the binlog event header's (one-second resolution). Opened is when the server
// created File: the timestamp of its Format_description event (one-second
// resolution), which tells a file apart from another one of the same name
// after a binlog reset (see Reader: a file-mode start checks it); zero
// when unknown.
type Position struct {
	File    string    `json:"file"`
	Pos     uint32    `json:"pos"`
	GTIDSet string    `json:"gtid_set,omitempty"`
	GTID    string    `json:"gtid,omitempty"`
	Time    time.Time `json:"event_time,omitzero"`
	Opened  time.Time `json:"file_opened,omitzero"`
}

// String formats the position as "file:pos" followed by the GTID when known.
func (p Position) String() string {
	s := p.File + ":" + strconv.FormatUint(uint64(p.Pos), 10)
	if p.GTID != "" {
		s += " gtid=" + p.GTID
	}
	return s
}

// FilePos formats the position as "file:pos".
func (p Position) FilePos() string {
	return p.File + ":" + strconv.FormatUint(uint64(p.Pos), 10)
}

// IsZero reports whether no position is set.
func (p Position) IsZero() bool { return p.File == "" && p.GTIDSet == "" }

// StartKind says where to start when no checkpoint exists.
type StartKind int

// Start kinds.
const (
	StartUnset    StartKind = iota
	StartLatest             // the current end of the binlog
	StartEarliest           // the oldest binlog the server still has
	StartFilePos            // an explicit file:pos
	StartGTID               // an explicit GTID set
)

// Start is a parsed start option.
type Start struct {
	Kind    StartKind
	File    string
	Pos     uint32
	GTIDSet string
}

// ParseStart parses a start option: "latest", "earliest", "<file>:<pos>"
// (e.g. "mariadb-bin.000003:4") or "gtid:<set>" (e.g. "gtid:0-1-42" or
// "gtid:3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"). The empty string gives
// StartUnset.
func ParseStart(s string) (Start, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Start{}, nil
	case s == "latest":
		return Start{Kind: StartLatest}, nil
	case s == "earliest":
		return Start{Kind: StartEarliest}, nil
	case strings.HasPrefix(s, "gtid:"):
		set := strings.TrimPrefix(s, "gtid:")
		if set == "" {
			return Start{}, fmt.Errorf("%w: %q: empty GTID set; use e.g. gtid:0-1-42 (MariaDB) or gtid:<uuid>:1-5 (MySQL)", ErrStart, s)
		}
		return Start{Kind: StartGTID, GTIDSet: set}, nil
	}
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return Start{}, fmt.Errorf("%w: %q: want latest, earliest, <file>:<pos> or gtid:<set>", ErrStart, s)
	}
	pos, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil || pos < 4 {
		return Start{}, fmt.Errorf("%w: %q: pos must be an integer >= 4 (the first event of a binlog file is at 4)", ErrStart, s)
	}
	return Start{Kind: StartFilePos, File: s[:i], Pos: uint32(pos)}, nil
}
