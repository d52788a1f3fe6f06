package binlog

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Change says what a history check found different between a stored
// position's binlog history and the server's.
type Change int

// Changes.
const (
	// ChangeReset: the server (the same server_id, and server_uuid on
	// MySQL) has another binlog history than the position's: a binlog
	// reset (RESET MASTER, RESET BINARY LOGS AND GTIDS), a restore from a
	// backup, a server rebuilt with the same identity, renumbered files.
	ChangeReset Change = iota + 1
	// ChangeAnotherServer: the source is another server (its server_id or
	// server_uuid differ from the position's).
	ChangeAnotherServer
)

// HistoryError is a stored position refused because the server's binlog
// is another history than the one it was read from (CheckHistory, the
// Reader's start). It wraps ErrHistory (fatal: IsFatal).
type HistoryError struct {
	Stored Position
	// Mode: ModeFile (the resume is by file:pos) or ModeGTID (by GTID set).
	Mode   string
	Change Change
	// Evidence: what showed the change, one sentence each, naming the
	// values compared.
	Evidence []string
	// Executed: the server has executed every transaction of the stored
	// GTID set (GTID mode; the same server: after a restore from a backup
	// that includes them, resuming by GTID is sound).
	Executed bool
}

func (e *HistoryError) Unwrap() error { return ErrHistory }

func (e *HistoryError) Error() string {
	var b strings.Builder
	at := e.Stored.FilePos()
	if e.Mode == ModeGTID || e.Stored.File == "" {
		at = "gtid:" + e.Stored.GTIDSet
	}
	fmt.Fprintf(&b, "%v: refusing to resume at %s", ErrHistory, at)
	if e.Mode != ModeGTID && e.Stored.GTIDSet != "" {
		fmt.Fprintf(&b, " (gtid:%s)", e.Stored.GTIDSet)
	}
	switch {
	case e.Change == ChangeAnotherServer:
		b.WriteString(": the source is another server than the one the position was read from")
	case e.Mode == ModeGTID && e.Executed:
		b.WriteString(": the server (the same server_id and server_uuid) has executed every transaction of the stored GTID set, but its binlog is another history" +
			" (a binlog reset: RESET MASTER, RESET BINARY LOGS AND GTIDS; a restore from a backup; a server rebuilt with the same identity)")
	default:
		b.WriteString(": the server's binlog is not the history the position was read from" +
			" (a binlog reset: RESET MASTER, RESET BINARY LOGS AND GTIDS; a restore from a backup; a server rebuilt with the same server_id; renumbered files)")
	}
	if len(e.Evidence) > 0 {
		b.WriteString(": " + strings.Join(e.Evidence, "; "))
	}
	switch {
	case e.Mode == ModeGTID && e.Executed:
		fmt.Fprintf(&b, ". A reset that reused the GTIDs would make a resume by GTID skip the new transactions numbered like the stored ones. "+
			"If the server was restored from a backup that includes every transaction up to the checkpoint, resuming by GTID is sound: cdc-outbox checkpoint set gtid:%s; ", e.Stored.GTIDSet)
	case e.Mode == ModeGTID:
		b.WriteString(". Resuming by GTID there would start at an unrelated point of the server's history (or past a gap). " +
			"If the server is a promoted replica that lacks transactions of the old source, those were published already; ")
	default:
		b.WriteString(". Resuming at that file:pos would skip, without a word, what the server wrote before it, or misread its binlog; ")
	}
	b.WriteString("to choose where publishing goes on: cdc-outbox checkpoint set earliest (publishes everything the server's binlogs hold now: nothing lost, what was published from them already is published again), " +
		"or checkpoint set <file>:<pos> or latest (the transactions before it are NOT published)")
	if e.Change == ChangeAnotherServer && e.Mode != ModeGTID {
		b.WriteString("; if source.addr is wrong, fix it; after a failover, position-mode: gtid resumes by GTID set")
	}
	b.WriteString(" (see docs/operations.md, \"When the server's binlog history changes\")")
	return b.String()
}

// HistoryFacts is what a server shows of a stored position's binlog
// history (Server.HistoryFacts), for CheckHistory.
type HistoryFacts struct {
	Flavor string
	// Mode: ModeGTID when the resume is by GTID set (position-mode gtid
	// and a stored set), else ModeFile.
	Mode   string
	Stored Position
	// SameServer: the server's identity (server_id, server_uuid, flavor)
	// is the one the position was read from (set by the caller).
	SameServer bool
	// Newest is the server's newest binlog file; Listed: Stored.File is
	// one of the server's binlog files.
	Newest string
	Listed bool
	// Offset: why Stored.Pos is not a position between two transactions
	// of the server's file of that name ("" when it is, or not checked).
	Offset string
	// AtPos (MariaDB): BINLOG_GTID_POS(Stored.File, Stored.Pos), when
	// AtPosKnown (the file is listed and the offset valid).
	AtPos      string
	AtPosKnown bool
	// Previous (MySQL): the Previous_gtids of Stored.File; NextGTID: the
	// GTID of the transaction starting at Stored.Pos ("" when none).
	Previous, NextGTID string
	// Executed: the transactions the server has executed: MySQL
	// @@gtid_executed; MariaDB @@gtid_binlog_state and @@gtid_slave_pos.
	Executed string
}

// HistoryVerdict is CheckHistory's decision.
type HistoryVerdict struct {
	// Err: the position is refused (nil: resume).
	Err *HistoryError
	// Repoint: the source is another server that executed every
	// transaction of the stored GTID set: the resume by GTID set is sound
	// (a promoted replica, a switchover); the caller logs it.
	Repoint bool
}

// CheckHistory decides whether a stored position belongs to the server's
// binlog history (docs/operations.md, "When the server's binlog history
// changes"). Evidence of another history:
//   - the position's file is not on the server and is newer than its
//     newest file (the numbering went back: a reset);
//   - its offset is past the end of the file of that name, or not the
//     start of an event between two transactions there;
//   - MariaDB: the GTID state there (BINLOG_GTID_POS) differs from the
//     stored set in a domain both have;
//   - MySQL: the file starts after transactions the stored set lacks
//     (Previous_gtids), or the transaction at the offset is one the stored
//     set already has;
//   - the stored GTID set holds transactions the server has not executed
//     (MySQL: not in @@gtid_executed; MariaDB: a sequence number above
//     the server's in a domain both have).
//
// File mode refuses any of them, and another server. GTID mode refuses a
// set the server has not executed, and the file evidence on the same
// server (a reset may have reused the GTIDs); another server that
// executed the whole set is a Repoint. Facts that do not parse count as
// no evidence. It is a pure function of f.
func CheckHistory(f HistoryFacts) HistoryVerdict {
	e := &HistoryError{Stored: f.Stored, Mode: f.Mode, Change: ChangeReset}
	executed, why := executedAll(f.Flavor, f.Stored.GTIDSet, f.Executed)
	e.Executed = executed && f.Stored.GTIDSet != "" && f.Mode == ModeGTID
	if !f.SameServer {
		e.Change = ChangeAnotherServer
		if f.Mode != ModeGTID {
			return HistoryVerdict{Err: e}
		}
		if !executed {
			e.Evidence = append(e.Evidence, why)
			return HistoryVerdict{Err: e}
		}
		return HistoryVerdict{Repoint: true}
	}
	e.Evidence = fileEvidence(f)
	if !executed {
		e.Evidence = append(e.Evidence, why)
	}
	if len(e.Evidence) == 0 {
		return HistoryVerdict{}
	}
	return HistoryVerdict{Err: e}
}

// fileEvidence returns the signs that the server's file of the stored
// position's name is another file than the position's.
func fileEvidence(f HistoryFacts) []string {
	p := f.Stored
	if p.File == "" {
		return nil
	}
	var out []string
	if !f.Listed {
		if sameBase(p.File, f.Newest) && compareFiles(p.File, f.Newest) > 0 {
			out = append(out, fmt.Sprintf("the server's newest binlog file is %s, older than the position's %s (the numbering started again)", f.Newest, p.File))
		}
		return out
	}
	if f.Offset != "" {
		out = append(out, f.Offset)
		return out
	}
	switch f.Flavor {
	case FlavorMariaDB:
		if f.AtPosKnown && p.GTIDSet != "" {
			if d, ok := differingDomain(p.GTIDSet, f.AtPos); ok {
				out = append(out, fmt.Sprintf("the server's GTID state at %s is %q (BINLOG_GTID_POS), the position's %q (domain %d differs)", p.FilePos(), f.AtPos, p.GTIDSet, d))
			}
		}
	case FlavorMySQL:
		if p.GTIDSet == "" {
			break
		}
		st, err := mysql.ParseMysqlGTIDSet(p.GTIDSet)
		if err != nil {
			break
		}
		if prev, err := mysql.ParseMysqlGTIDSet(f.Previous); err == nil && f.Previous != "" && !st.Contain(prev) {
			out = append(out, fmt.Sprintf("the server's %s starts after gtid:%s (Previous_gtids), which the position's set lacks", p.File, f.Previous))
		}
		if next, err := mysql.ParseMysqlGTIDSet(f.NextGTID); err == nil && f.NextGTID != "" && st.Contain(next) {
			out = append(out, fmt.Sprintf("the transaction at %s on the server is %s, which the position's set already has", p.FilePos(), f.NextGTID))
		}
	}
	return out
}

// sameBase reports whether two binlog file names share their base name
// (the part before the last '.'): the same server's numbering.
func sameBase(a, b string) bool {
	ia, ib := strings.LastIndexByte(a, '.'), strings.LastIndexByte(b, '.')
	return ia > 0 && ib > 0 && a[:ia] == b[:ib]
}

// differingDomain returns a domain that both MariaDB GTID lists name with
// different sequence numbers (the lowest such domain).
func differingDomain(stored, at string) (uint32, bool) {
	st, err := latestPerDomain(stored)
	if err != nil {
		return 0, false
	}
	here, err := latestPerDomain(at)
	if err != nil {
		return 0, false
	}
	var ds []uint32
	for d, g := range st {
		if h, ok := here[d]; ok && h.SequenceNumber != g.SequenceNumber {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return 0, false
	}
	return slices.Min(ds), true
}

// executedAll reports whether the server executed every transaction of
// the stored GTID set, and when not, why (a sentence). An empty set, an
// unknown executed set or one that does not parse count as executed.
// MariaDB: every domain both name has on the server at least the stored
// sequence number (a domain the server does not know is CheckResume's).
func executedAll(flavor, stored, executed string) (bool, string) {
	if stored == "" || executed == "" {
		return true, ""
	}
	if flavor == FlavorMariaDB {
		st, err := latestPerDomain(stored)
		if err != nil {
			return true, ""
		}
		ex, err := latestPerDomain(executed)
		if err != nil {
			return true, ""
		}
		var ahead []string
		for _, d := range slices.Sorted(maps.Keys(st)) {
			if h, ok := ex[d]; ok && st[d].SequenceNumber > h.SequenceNumber {
				ahead = append(ahead, fmt.Sprintf("%s (the server is at %s)", st[d], h))
			}
		}
		if len(ahead) == 0 {
			return true, ""
		}
		return false, fmt.Sprintf("the server has not executed %s of the position's GTID set (@@gtid_binlog_state %q)", strings.Join(ahead, ", "), executed)
	}
	st, err := mysql.ParseMysqlGTIDSet(stored)
	if err != nil {
		return true, ""
	}
	ex, err := mysql.ParseMysqlGTIDSet(executed)
	if err != nil {
		return true, ""
	}
	if ex.Contain(st) {
		return true, ""
	}
	return false, fmt.Sprintf("the server's @@gtid_executed %s does not contain the position's GTID set %s", executed, stored)
}

// HistoryFacts reads what the server shows of p's binlog history for
// CheckHistory (mode: source.position-mode; SameServer is the caller's to
// set): SHOW BINARY LOGS; for p's file when listed, whether p.Pos starts
// an event between two transactions (SHOW BINLOG EVENTS), and MariaDB's
// BINLOG_GTID_POS there or MySQL's Previous_gtids of the file and the
// GTID of the transaction at p.Pos; the executed GTIDs. Errors are the
// server's (connection, privileges).
func (s *Server) HistoryFacts(p Position, mode string) (HistoryFacts, error) {
	f := HistoryFacts{Flavor: s.flavor, Mode: ModeFile, Stored: p}
	if mode == ModeGTID && p.GTIDSet != "" {
		f.Mode = ModeGTID
	}
	var err error
	if s.flavor == FlavorMySQL {
		f.Executed, err = s.queryString("SELECT @@GLOBAL.gtid_executed")
		f.Executed = strings.ReplaceAll(f.Executed, "\n", "")
	} else {
		f.Executed, err = s.queryString("SELECT CONCAT_WS(',', NULLIF(@@GLOBAL.gtid_binlog_state, ''), NULLIF(@@GLOBAL.gtid_slave_pos, ''))")
	}
	if err != nil {
		return f, err
	}
	if p.File == "" {
		return f, nil
	}
	files, err := s.BinaryLogSizes()
	if err != nil {
		return f, err
	}
	if len(files) > 0 {
		f.Newest = files[len(files)-1].Name
	}
	i := slices.IndexFunc(files, func(lf LogFile) bool { return lf.Name == p.File })
	if i < 0 {
		return f, nil
	}
	f.Listed = true
	ev, reason, err := s.eventAt(p, files[i].Size)
	if err != nil {
		return f, err
	}
	if reason != "" {
		f.Offset = reason
		return f, nil
	}
	if s.flavor == FlavorMariaDB {
		f.AtPos, f.AtPosKnown, err = s.mariadbGTIDPos(p)
		return f, err
	}
	if ev != nil && (ev.Type == "Gtid" || ev.Type == "Gtid_tagged_log_event") {
		f.NextGTID, _ = quotedGTID(string(ev.Info))
	}
	err = streamEvents(s.conn)("SHOW BINLOG EVENTS IN '"+strings.ReplaceAll(p.File, "'", "''")+"' LIMIT 3", func(r eventRow) bool {
		if r.Type == "Previous_gtids" {
			f.Previous = strings.TrimSpace(strings.ReplaceAll(string(r.Info), "\n", ""))
			return true
		}
		return false
	})
	if err != nil && code(err) != codeSpecificAccess { // without the privilege: unchecked, as eventAt
		return f, fmt.Errorf("binlog: the Previous_gtids of %s: %w", p.File, err)
	}
	return f, nil
}

// eventAt reads the event starting at p.Pos in p's file (size bytes
// long): nil at the end of the file. reason says why p.Pos is not a
// position between two transactions there: past the end, no event
// starting there (ERROR 1220), or an event inside a transaction. Other
// errors are the server's; without the privilege to list events
// (ERROR 1227) the offset passes unchecked.
func (s *Server) eventAt(p Position, size int64) (ev *eventRow, reason string, err error) {
	if int64(p.Pos) > size {
		return nil, fmt.Sprintf("%s is past the end of %s on the server (%d bytes)", p.FilePos(), p.File, size), nil
	}
	if int64(p.Pos) == size {
		return nil, "", nil // the end of the file: nothing to read there yet
	}
	var rows []eventRow
	err = streamEvents(s.conn)(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT 1", strings.ReplaceAll(p.File, "'", "''"), p.Pos), func(r eventRow) bool {
		r.Info = slices.Clone(r.Info)
		rows = append(rows, r)
		return true
	})
	switch code(err) {
	case 0:
	case codeSpecificAccess:
		s.log.Warn("cannot read binlog events, so the position is not checked to be an event boundary")
		return nil, "", nil
	case codeErrorWhenExecuting:
		return nil, fmt.Sprintf("no event starts at %s on the server (%v)", p.FilePos(), err), nil
	default:
		return nil, "", fmt.Errorf("binlog: SHOW BINLOG EVENTS IN %s FROM %d: %w", p.File, p.Pos, err)
	}
	if len(rows) == 0 {
		return nil, "", nil
	}
	r := rows[0]
	// MySQL 8.4+ answers with the first event at or after FROM (MariaDB
	// and older MySQL fail when no event starts there).
	if r.Pos != uint64(p.Pos) {
		return nil, fmt.Sprintf("no event starts at %s on the server (the next one starts at %d)", p.FilePos(), r.Pos), nil
	}
	if !betweenTransactions(r.Type, r.Info) {
		return nil, fmt.Sprintf("%s is not between two transactions on the server (the event there is %s)", p.FilePos(), r.Type), nil
	}
	return &r, "", nil
}

// mariadbGTIDPos returns BINLOG_GTID_POS(p.File, p.Pos): ok false when
// the server answers NULL (no such file, or no event boundary there). The
// last answer is kept: the server scans the file up to p for it, and
// HistoryFacts and CompleteGTIDSet ask for the same position.
func (s *Server) mariadbGTIDPos(p Position) (string, bool, error) {
	if c := s.gtidPos; c != nil && c.file == p.File && c.pos == p.Pos {
		return c.set, c.ok, nil
	}
	r, err := s.conn.Execute("SELECT BINLOG_GTID_POS(?, ?)", p.File, p.Pos)
	if err != nil {
		return "", false, fmt.Errorf("binlog: BINLOG_GTID_POS(%s): %w", p.FilePos(), err)
	}
	v, _ := r.GetValue(0, 0)
	set, _ := r.GetString(0, 0)
	s.gtidPos = &gtidPosAnswer{file: p.File, pos: p.Pos, set: set, ok: v != nil}
	return set, v != nil, nil
}

// gtidPosAnswer is the last BINLOG_GTID_POS answer (Server.mariadbGTIDPos).
type gtidPosAnswer struct {
	file string
	pos  uint32
	set  string
	ok   bool
}

// openedChanged returns the evidence that the server's file of the
// start position's name is another file: its Format_description event's
// timestamp differs from the one stored with the position (both known).
func openedChanged(stored Position, opened time.Time) string {
	if stored.Opened.IsZero() || opened.IsZero() || stored.Opened.Unix() == opened.Unix() {
		return ""
	}
	return fmt.Sprintf("the server's %s was created at %s, the position's at %s (Format_description event)",
		stored.File, opened.UTC().Format(time.RFC3339), stored.Opened.UTC().Format(time.RFC3339))
}

// StreamEvidence returns why the server's binlog files (logs: SHOW BINARY
// LOGS, asked after the stream read up to at) are another history than
// the one the stream read at from, "" when they show none. A binlog file
// never shrinks and its numbering never goes back in one history, so
// either is proof: the file of at's name is shorter than at's offset (a
// reset, RESET MASTER or RESET BINARY LOGS AND GTIDS, under the running
// stream: the dump thread then waits at the old offset of the new file
// and sends nothing until it grows past it, or rotates on into the new
// history), or at's file is not listed and is newer than the newest one
// (the numbering started again). A binlog truncated by a crash of the
// server without sync_binlog=1 shows the same. A file not listed and
// older than the newest is purged: no evidence. A pure function.
func StreamEvidence(logs []LogFile, at Position) string {
	if at.File == "" || at.Pos <= 4 || len(logs) == 0 {
		return ""
	}
	for _, l := range logs {
		if l.Name == at.File {
			if l.Size > 0 && l.Size < int64(at.Pos) {
				return fmt.Sprintf("the server's %s is %d bytes, but the stream read it up to offset %d: the file was created again", l.Name, l.Size, at.Pos)
			}
			return ""
		}
	}
	newest := logs[len(logs)-1].Name
	if sameBase(at.File, newest) && compareFiles(at.File, newest) > 0 {
		return fmt.Sprintf("the server's newest binlog file is %s, older than %s, which the stream read (the numbering started again)", newest, at.File)
	}
	return ""
}
