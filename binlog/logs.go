package binlog

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// LogFile is one row of SHOW BINARY LOGS.
type LogFile struct {
	Name string
	// Size is the file's length in bytes (File_size).
	Size int64
}

// BinaryLogSizes returns the server's binlog files with their sizes in
// bytes, oldest first.
func (s *Server) BinaryLogSizes() ([]LogFile, error) { return logSizes(s.conn) }

// logSizes is SHOW BINARY LOGS on c: the files and their sizes in bytes,
// oldest first.
func logSizes(c *Conn) ([]LogFile, error) {
	r, err := c.Execute("SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("binlog: SHOW BINARY LOGS: %w", err)
	}
	files := make([]LogFile, r.RowNumber())
	for i := range files {
		files[i].Name, _ = r.GetString(i, 0)
		size, _ := r.GetInt(i, 1)
		files[i].Size = size
	}
	return files, nil
}

// Replica is one row of SHOW SLAVE HOSTS / SHOW REPLICAS: a replica
// registered with the source (a binlog dump connection that registered
// itself, as the publisher does).
type Replica struct {
	ServerID uint32
	// Host is the replica's report_host ("(no report_host)" when empty);
	// a cdc-outbox publisher reports its host name.
	Host string
}

// Replicas returns the replicas registered with the server (SHOW SLAVE
// HOSTS on MariaDB, SHOW REPLICAS on MySQL). Listing them needs
// REPLICATION MASTER ADMIN (MariaDB) or REPLICATION SLAVE (MySQL);
// without it the error wraps ErrPrivileges and names the GRANT.
func (s *Server) Replicas() ([]Replica, error) {
	q := "SHOW SLAVE HOSTS"
	if s.flavor == FlavorMySQL {
		q = "SHOW REPLICAS"
	}
	r, err := s.conn.Execute(q)
	if err != nil {
		if code(err) == codeSpecificAccess {
			return nil, fmt.Errorf("%w: %s: %v: GRANT %s ON *.* to the publisher's user", ErrPrivileges, q, err, s.replicaListingGrant())
		}
		return nil, fmt.Errorf("binlog: %s: %w", q, err)
	}
	return replicaRows(r), nil
}

// replicaListingGrant is the privilege that lets the user list replicas.
func (s *Server) replicaListingGrant() string {
	if s.flavor == FlavorMariaDB {
		return "REPLICATION MASTER ADMIN"
	}
	return "REPLICATION SLAVE"
}

// ReplicaUsing returns the host of the replica registered with serverID
// (SHOW SLAVE HOSTS / SHOW REPLICAS), "" when none. Listing replicas needs
// REPLICATION MASTER ADMIN (MariaDB) or REPLICATION SLAVE (MySQL); without
// it the error wraps ErrPrivileges.
func (s *Server) ReplicaUsing(serverID uint32) (string, error) {
	rs, err := s.Replicas()
	if err != nil {
		return "", err
	}
	if host, ok := replicaHost(rs, serverID); ok {
		return host, nil
	}
	return "", nil
}

// replicaHost finds serverID among rs and returns its Host.
func replicaHost(rs []Replica, serverID uint32) (string, bool) {
	for _, r := range rs {
		if r.ServerID == serverID {
			return r.Host, true
		}
	}
	return "", false
}

// replicaRows reads a SHOW SLAVE HOSTS / SHOW REPLICAS result; a Host
// left empty reads "(no report_host)". The column is Server_id on MariaDB
// and Server_Id on MySQL 8.0.22+, so it is looked up ignoring case.
func replicaRows(r *mysql.Result) []Replica {
	idCol, hostCol := -1, -1
	for i, f := range r.Fields {
		switch {
		case strings.EqualFold(string(f.Name), "Server_id"):
			idCol = i
		case strings.EqualFold(string(f.Name), "Host"):
			hostCol = i
		}
	}
	if idCol < 0 {
		return nil
	}
	rs := make([]Replica, 0, r.RowNumber())
	for i := 0; i < r.RowNumber(); i++ {
		id, _ := r.GetUint(i, idCol)
		host := ""
		if hostCol >= 0 {
			host, _ = r.GetString(i, hostCol)
		}
		rs = append(rs, Replica{ServerID: uint32(id), Host: or(host, "(no report_host)")})
	}
	return rs
}

// boundaryEvents lists SHOW BINLOG EVENTS event types that start a
// transaction (event group) or stand between transactions: a resumable
// position is followed by one of them (or by a Query "BEGIN", for servers
// that write no GTID events).
var boundaryEvents = []string{"Format_desc", "Gtid", "Gtid_tagged_log_event", "Anonymous_Gtid", "Gtid_list", "Binlog_checkpoint", "Previous_gtids",
	"Rotate", "Stop", "Start_encryption", "Heartbeat"}

// betweenTransactions reports whether an event of SHOW BINLOG EVENTS
// type typ, with info, starts at a resumable position (boundaryEvents,
// or a Query "BEGIN"). MySQL 8.4+'s tagged GTIDs
// (gtid_next='AUTOMATIC:<tag>') start their transactions with a
// Gtid_tagged_log_event.
func betweenTransactions(typ string, info []byte) bool {
	return slices.Contains(boundaryEvents, typ) || (typ == "Query" && strings.EqualFold(strings.TrimSpace(string(info)), "BEGIN"))
}

// CheckPosition checks that p's file is on the server, that p.Pos is within
// it (at most its size in bytes) and, when the server lets us read it with
// SHOW BINLOG EVENTS, that an event starts at p.Pos and that it is between
// two transactions (see boundaryEvents). Failures wrap ErrPositionUnavailable and name the oldest
// available position or the file's size. A position without a file passes.
func (s *Server) CheckPosition(p Position) error {
	if p.File == "" {
		return nil
	}
	files, err := s.BinaryLogSizes()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(files, func(f LogFile) bool { return f.Name == p.File })
	if i < 0 {
		oldest := "(none)"
		if len(files) > 0 {
			oldest = files[0].Name + ":4"
		}
		return fmt.Errorf("%w: binlog %s is not on the server (purged, or from another server); oldest available is %s",
			ErrPositionUnavailable, p.FilePos(), oldest)
	}
	_, reason, err := s.eventAt(p, files[i].Size) // history.go
	if err != nil {
		return err
	}
	if reason != "" {
		return fmt.Errorf("%w: %s: use the end of a transaction, e.g. the binlog_txn_end header of a record or the End_log_pos of a transaction's Xid/COMMIT event",
			ErrPositionUnavailable, reason)
	}
	return nil
}

// GTIDSetAt returns the GTID set executed up to p's file:pos: on MariaDB
// BINLOG_GTID_POS; on MySQL, which has no such function, the file's
// Previous_gtids plus the GTID of every transaction that starts before pos
// (mysqlGTIDSetAt); "" when the server cannot tell (MariaDB) or the
// binlog holds no GTIDs (MySQL with gtid_mode OFF from the start).
func (s *Server) GTIDSetAt(p Position) (string, error) {
	if p.File == "" {
		return "", nil
	}
	if s.flavor == FlavorMySQL {
		return mysqlGTIDSetAt(streamEvents(s.conn), p)
	}
	if s.flavor != FlavorMariaDB {
		return "", nil
	}
	set, _, err := s.mariadbGTIDPos(p) // history.go
	return set, err
}

// mysqlGTIDSetAt computes MySQL's GTID set at p by listing p's file with
// SHOW BINLOG EVENTS (REPLICATION SLAVE) in batches of commitLookupBatch:
// the Previous_gtids event (every GTID of the earlier files, and
// gtid_purged) plus the GTID of each Gtid or Gtid_tagged_log_event
// (uuid:tag:gno, MySQL 8.4+) that starts before p.Pos (MySQL manual,
// "Replication Event Types"; a GTID precedes its transaction's events, a
// compressed transaction's Transaction_payload included). It reads the
// file up to p, one round trip per batch.
func mysqlGTIDSetAt(list listEvents, p Position) (string, error) {
	set, err := mysql.ParseMysqlGTIDSet("")
	if err != nil {
		return "", err
	}
	q := "SHOW BINLOG EVENTS IN '" + strings.ReplaceAll(p.File, "'", "''") + "' FROM %d LIMIT %d"
	for from := uint32(4); ; {
		next, n, done := from, 0, false
		var ferr error
		err := list(fmt.Sprintf(q, from, commitLookupBatch), func(ev eventRow) bool {
			n++
			if ev.Pos >= uint64(p.Pos) {
				done = true
				return true
			}
			switch ev.Type {
			case "Previous_gtids":
				if prev := strings.TrimSpace(strings.ReplaceAll(string(ev.Info), "\n", "")); prev != "" {
					ps, err := mysql.ParseMysqlGTIDSet(prev)
					if err != nil {
						ferr = fmt.Errorf("binlog: the Previous_gtids of %s (%q): %w", p.File, ev.Info, err)
						return true
					}
					set = ps
				}
			case "Gtid", "Gtid_tagged_log_event":
				g, ok := quotedGTID(string(ev.Info))
				if !ok {
					ferr = fmt.Errorf("binlog: the %s event at %s:%d: no GTID in %q", ev.Type, p.File, ev.Pos, ev.Info)
					return true
				}
				if err := set.Update(g); err != nil {
					ferr = fmt.Errorf("binlog: the %s event at %s:%d: GTID %q: %w", ev.Type, p.File, ev.Pos, g, err)
					return true
				}
			}
			// The events embedded in a Transaction_payload are listed
			// after it with positions inside it: continue after the
			// furthest end seen.
			if uint32(ev.End) > next {
				next = uint32(ev.End)
			}
			return false
		})
		switch {
		case err != nil:
			return "", fmt.Errorf("binlog: the GTID set at %s (SHOW BINLOG EVENTS from %d): %w", p.FilePos(), from, err)
		case ferr != nil:
			return "", ferr
		case done, n < commitLookupBatch, next == from:
			return set.String(), nil // at p, or p is the end of the file
		}
		from = next
	}
}

// quotedGTID returns the GTID of a Gtid event's Info, "SET
// @@SESSION.GTID_NEXT= 'uuid[:tag]:gno'".
func quotedGTID(info string) (string, bool) {
	i := strings.IndexByte(info, '\'')
	j := strings.LastIndexByte(info, '\'')
	if i < 0 || j <= i+1 {
		return "", false
	}
	return info[i+1 : j], true
}

// commitLookupBatch is how many events one SHOW BINLOG EVENTS of
// findCommit and mysqlGTIDSetAt lists.
const commitLookupBatch = 1000

// eventRow is one row of SHOW BINLOG EVENTS (MySQL manual, "SHOW BINLOG
// EVENTS Statement"): the event's Pos and End_log_pos, its Event_type and
// its Info, which is valid only during the call that receives the row.
type eventRow struct {
	Pos, End uint64
	Type     string
	Info     []byte
}

// listEvents runs one SHOW BINLOG EVENTS and calls each for its rows in
// order until each returns true (the rest are read and dropped). It holds
// one row in memory at a time: an Annotate_rows (MariaDB) or Rows_query
// (MySQL) row carries a whole statement, and a page of them held at once
// came to tens of MB.
type listEvents func(query string, each func(eventRow) (stop bool)) error

// streamEvents is listEvents on c, a row at a time
// (Conn.ExecuteSelectStreaming, one reused packet buffer).
func streamEvents(c *Conn) listEvents {
	return func(query string, each func(eventRow) bool) error {
		var (
			res      mysql.Result
			col      = [4]int{-1, -1, -1, -1} // Pos, End_log_pos, Event_type, Info
			complete bool                     // every column found
			stopped  bool
		)
		err := c.ExecuteSelectStreaming(query, &res, func(row []mysql.FieldValue) error {
			if stopped || !complete {
				return nil
			}
			ev := eventRow{Pos: fieldUint(row[col[0]]), End: fieldUint(row[col[1]]), Type: string(row[col[2]].AsString()), Info: row[col[3]].AsString()}
			stopped = each(ev)
			return nil
		}, func(r *mysql.Result) error {
			for i, f := range r.Fields {
				if j := slices.Index([]string{"Pos", "End_log_pos", "Event_type", "Info"}, string(f.Name)); j >= 0 {
					col[j] = i
				}
			}
			complete = !slices.Contains(col[:], -1)
			return nil
		})
		if err == nil && !complete {
			err = fmt.Errorf("binlog: %s: the result lacks one of the columns Pos, End_log_pos, Event_type, Info", query)
		}
		return err
	}
}

// fieldUint is an unsigned column of a text-protocol row (parsed as a
// number, or a string of digits); 0 when it is neither.
func fieldUint(v mysql.FieldValue) uint64 {
	switch v.Type {
	case mysql.FieldValueTypeUnsigned:
		return v.AsUint64()
	case mysql.FieldValueTypeSigned:
		return uint64(v.AsInt64())
	case mysql.FieldValueTypeString:
		n, _ := strconv.ParseUint(string(v.AsString()), 10, 64)
		return n
	}
	return 0
}

// isCommitEvent tells whether a listed event ends a transaction: Xid,
// XA_prepare, or a Query COMMIT or ROLLBACK.
func isCommitEvent(ev eventRow) bool {
	return ev.Type == "Xid" || ev.Type == "XA_prepare" ||
		(ev.Type == "Query" && (bytes.EqualFold(ev.Info, []byte("COMMIT")) || bytes.EqualFold(ev.Info, []byte("ROLLBACK"))))
}

// findCommit returns the end_log_pos of the commit event (Xid, Query
// COMMIT or ROLLBACK, XA_prepare) of the transaction whose first event
// (GTID, or BEGIN) starts at file:start, listing the events after it with
// SHOW BINLOG EVENTS (BINLOG MONITOR / REPLICATION CLIENT) in batches. A
// transaction never spans files.
func findCommit(list listEvents, file string, start uint32) (uint32, error) {
	q := "SHOW BINLOG EVENTS IN '" + strings.ReplaceAll(file, "'", "''") + "' FROM %d LIMIT %d"
	// Pages go on from the start (Pos) of the last event listed, which the
	// next page lists again first: MariaDB 11.4+ (binlog_legacy_event_pos
	// OFF) lists End_log_pos 0 for the events inside a transaction.
	from, first, again := start, true, false
	for {
		var (
			n           int
			last, end   uint64
			found, next bool // the commit is listed; its end is the next event's Pos
			ferr        error
		)
		err := list(fmt.Sprintf(q, from, commitLookupBatch), func(ev eventRow) bool {
			n++
			last = ev.Pos
			switch {
			case next:
				end = ev.Pos // the next event starts where the commit ends
				return true
			case n == 1 && again:
				return false
			case isCommitEvent(ev):
				found, end = true, ev.End
				next = end == 0
				return !next
			case !first && (ev.Type == "Gtid" || ev.Type == "Anonymous_Gtid" || ev.Type == "Rotate" || ev.Type == "Stop"):
				ferr = fmt.Errorf("binlog: the transaction at %s:%d has no commit event before the %s event at %d", file, start, ev.Type, ev.Pos)
				return true
			}
			first = false
			return false
		})
		switch {
		case err != nil:
			return 0, fmt.Errorf("binlog: look up the commit of the transaction at %s:%d: %w", file, start, err)
		case ferr != nil:
			return 0, ferr
		case found && end == 0:
			return 0, fmt.Errorf("binlog: the commit event of the transaction at %s:%d lists no end position", file, start)
		case found:
			return uint32(end), nil
		case n < commitLookupBatch:
			return 0, fmt.Errorf("binlog: the transaction at %s:%d has no commit event in the file", file, start)
		case uint32(last) <= from && again:
			return 0, fmt.Errorf("binlog: listing the events of %s from %d does not advance", file, from)
		}
		from, again = uint32(last), true
	}
}
