package binlog

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"
)

// Policies for a resume position whose binlog was purged (Config.OnPurged).
const (
	OnPurgedFail     = "fail"     // stop with ErrPositionUnavailable (default)
	OnPurgedEarliest = "earliest" // resume at the oldest binlog the server has
	OnPurgedLatest   = "latest"   // resume at the current end of the binlog
)

// ErrUnknownGTIDDomain reports a stored MariaDB GTID set naming a domain
// the server's GTID state and binlogs lack, and that was not deleted from
// this server as far as can be told (DeletedDomains). MariaDB accepts such
// a position and streams the server's domains the set lacks from their
// start, so it is refused whatever source.on-purged says.
// It wraps ErrStart, so it is fatal (IsFatal).
var ErrUnknownGTIDDomain = fmt.Errorf("%w: GTID domain unknown to the server", ErrStart)

// Purged describes a resume position the server can no longer serve: its
// binlog file was purged (file mode), or transactions after its GTID set
// were (GTID mode).
type Purged struct {
	// Stored is the position asked for.
	Stored Position
	// Oldest is the oldest position available: the first file at 4, with
	// the GTID set at its start when known.
	Oldest Position
	// FilesPurged: binlog files between the stored one and the oldest
	// available that are gone (by the numeric extension of their names);
	// -1 when unknown (GTID mode, or names that do not compare).
	FilesPurged int
	// Transactions: transactions lost for the purged domains (MariaDB:
	// the sequence number gap per domain); -1 when unknown.
	Transactions int64
	// Domains: the MariaDB domains (or MySQL source UUIDs) whose
	// transactions were purged, for GTID mode.
	Domains []string
}

// Err returns the ErrPositionUnavailable error for p, naming the stored
// and the oldest available position.
func (p *Purged) Err() error {
	if p.Stored.File != "" && len(p.Domains) == 0 {
		return fmt.Errorf("%w: binlog %s is not on the server (purged, or from another server); oldest available is %s: "+
			"set source.on-purged: earliest or latest to resume there (what lies between is not published), or cdc-outbox checkpoint set <position>",
			ErrPositionUnavailable, p.Stored.FilePos(), p.Oldest.FilePos())
	}
	return fmt.Errorf("%w: transactions after gtid:%s of %s %s were purged from the server's binlogs (the oldest binlog %s starts at gtid:%s): "+
		"set source.on-purged: earliest or latest to resume there (what lies between is not published), or cdc-outbox checkpoint set <position>",
		ErrPositionUnavailable, p.Stored.GTIDSet, plural(len(p.Domains), "domain", "domains"), strings.Join(p.Domains, ", "), p.Oldest.FilePos(), p.Oldest.GTIDSet)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// CheckResume checks that the server can stream from p. In file mode (or
// without a GTID set) p's file must be on the server; in GTID mode the
// transactions after p's GTID set must still be in the binlogs (MariaDB:
// each domain's sequence number at least the one at the start of the
// oldest binlog; MySQL: p's set contains @@gtid_purged). It returns a
// non-nil *Purged when they are not, and an error wrapping
// ErrUnknownGTIDDomain for a MariaDB set naming a domain the server does
// not know.
func (s *Server) CheckResume(p Position) (*Purged, error) {
	if p.IsZero() {
		return nil, nil
	}
	files, err := s.BinaryLogSizes()
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: the server has no binary logs: enable log_bin", ErrServerConfig)
	}
	oldest := Position{File: files[0].Name, Pos: 4}
	if s.cfg.PositionMode != ModeGTID || p.GTIDSet == "" {
		if slices.ContainsFunc(files, func(f LogFile) bool { return f.Name == p.File }) {
			return nil, nil
		}
		if s.flavor == FlavorMariaDB {
			oldest.GTIDSet, _ = s.gtidSetAtStart(oldest.File)
		} else if purged, err := s.queryString("SELECT @@gtid_purged"); err == nil {
			oldest.GTIDSet = strings.ReplaceAll(purged, "\n", "")
		}
		return &Purged{Stored: p, Oldest: oldest, FilesPurged: filesBetween(p.File, oldest.File), Transactions: -1}, nil
	}
	switch s.flavor {
	case FlavorMariaDB:
		state, err := s.queryString("SELECT @@gtid_binlog_state")
		if err != nil {
			return nil, err
		}
		// A domain the server's binlog never had may still be one it
		// knows of: a promoted replica set up from a backup has the old
		// primary's history in gtid_slave_pos, not in its binlog.
		if slave, err := s.queryString("SELECT @@gtid_slave_pos"); err == nil && slave != "" {
			state += "," + slave
		}
		unknown, err := UnknownDomains(p.GTIDSet, state)
		if err != nil {
			return nil, fmt.Errorf("%w: stored GTID set %q: %v", ErrStart, p.GTIDSet, err)
		}
		if oldest.GTIDSet, err = s.gtidSetAtStart(oldest.File); err != nil {
			return nil, err
		}
		// Domains deleted with FLUSH BINARY LOGS DELETE_DOMAIN_ID are in
		// no GTID state, but the server had them: the stored set may name
		// one (DeletedDomains), and the oldest binlog's Gtid_list may name
		// one the stored set does not (DeletedBehind).
		behind, err := UnknownDomains(oldest.GTIDSet, state+","+p.GTIDSet)
		if err != nil {
			return nil, fmt.Errorf("%w: the oldest binlog's GTID list %q: %v", ErrStart, oldest.GTIDSet, err)
		}
		atStored := ""
		if (len(unknown) > 0 || len(behind) > 0) && slices.ContainsFunc(files, func(f LogFile) bool { return f.Name == p.File }) {
			if atStored, err = s.GTIDSetAt(Position{File: p.File, Pos: p.Pos}); err != nil {
				return nil, err
			}
		}
		if len(unknown) > 0 {
			deleted, refused, err := DeletedDomains(p.GTIDSet, oldest.GTIDSet, atStored, unknown)
			if err != nil {
				return nil, fmt.Errorf("%w: stored GTID set %q: %v", ErrStart, p.GTIDSet, err)
			}
			if len(refused) > 0 {
				return nil, unknownDomainError(p, refused, state)
			}
			if len(deleted) > 0 {
				s.log.Info("the stored GTID set names a domain deleted from the server (FLUSH BINARY LOGS DELETE_DOMAIN_ID) after the stored transaction: nothing of it is left to stream; resuming (it stays in the set, which MariaDB accepts)",
					zap.Strings("deleted_domains", deleted), zap.String("gtid_set", p.GTIDSet), zap.String("gtid_binlog_state", state))
			}
		}
		compare, err := withoutDomains(oldest.GTIDSet, DeletedBehind(behind, atStored))
		if err != nil {
			return nil, fmt.Errorf("%w: the oldest binlog's GTID list %q: %v", ErrStart, oldest.GTIDSet, err)
		}
		domains, lost, err := PurgedDomains(p.GTIDSet, compare)
		if err != nil {
			return nil, fmt.Errorf("%w: stored GTID set %q: %v", ErrStart, p.GTIDSet, err)
		}
		if len(domains) == 0 {
			return nil, nil
		}
		return &Purged{Stored: p, Oldest: oldest, FilesPurged: -1, Transactions: lost, Domains: domains}, nil
	default:
		purged, err := s.queryString("SELECT @@gtid_purged")
		if err != nil {
			return nil, err
		}
		oldest.GTIDSet = strings.ReplaceAll(purged, "\n", "")
		sources, err := mysqlPurgedSources(p.GTIDSet, oldest.GTIDSet)
		if err != nil {
			return nil, fmt.Errorf("%w: stored GTID set %q: %v", ErrStart, p.GTIDSet, err)
		}
		if len(sources) == 0 {
			return nil, nil
		}
		return &Purged{Stored: p, Oldest: oldest, FilesPurged: -1, Transactions: -1, Domains: sources}, nil
	}
}

func unknownDomainError(p Position, unknown []uint32, state string) error {
	ds := make([]string, len(unknown))
	for i, d := range unknown {
		ds[i] = strconv.FormatUint(uint64(d), 10)
	}
	fix := "gtid:<the set without " + strings.Join(ds, ", ") + ">"
	if without, err := withoutDomains(p.GTIDSet, unknown); err == nil && without != "" {
		fix = "gtid:" + without
	}
	return fmt.Errorf("%w: the stored GTID set gtid:%s names %s %s, which the server's GTID state does not have (@@gtid_binlog_state is %q, @@gtid_slave_pos included) "+
		"and which is not a domain deleted from it after the stored transaction (FLUSH BINARY LOGS DELETE_DOMAIN_ID, its last transaction in the oldest binlog's Gtid_list, or the checkpoint this server's position): "+
		"another server at source.addr, an edited set, or a domain deleted whose binlogs were purged before this checkpoint. "+
		"MariaDB would accept the set, streaming from their start the server's domains it lacks. Is source.addr the right server? "+
		"If the domain was deleted: cdc-outbox checkpoint set %s (or <file>:<pos>)",
		ErrUnknownGTIDDomain, p.GTIDSet, plural(len(ds), "domain", "domains"), strings.Join(ds, ", "), state, fix)
}

// withoutDomains returns the MariaDB GTID set set (one GTID per domain)
// without the domains drop.
func withoutDomains(set string, drop []uint32) (string, error) {
	m, err := latestPerDomain(set)
	if err != nil {
		return "", err
	}
	for _, d := range drop {
		delete(m, d)
	}
	ids := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(ids))
	for i, d := range ids {
		parts[i] = m[d].String()
	}
	return strings.Join(parts, ","), nil
}

// DeletedBehind returns the domains of deleted (domains of the oldest
// binlog's Gtid_list that neither the server's GTID state nor the stored
// set has: deleted with FLUSH BINARY LOGS DELETE_DOMAIN_ID) that the
// stored position is past: atStored, the server's GTID state at the
// checkpoint's file:pos (BINLOG_GTID_POS; "" when unknown), does not name
// them, so the position is in a binlog opened after the deletion and needs
// nothing of them (MariaDB serves it from there): no purge. With atStored
// unknown, none.
func DeletedBehind(deleted []uint32, atStored string) []uint32 {
	if atStored == "" {
		return nil
	}
	here, err := latestPerDomain(atStored)
	if err != nil {
		return nil
	}
	var out []uint32
	for _, d := range deleted {
		if _, named := here[d]; !named {
			out = append(out, d)
		}
	}
	return out
}

// DeletedDomains decides the domains of a stored MariaDB GTID set that the
// server's GTID state lacks (unknown: UnknownDomains). FLUSH BINARY LOGS
// DELETE_DOMAIN_ID=(N) removes domain N from the state once no binlog
// file holds its transactions; the Gtid_list of the files opened before
// still names it, with its last sequence number. A domain is deleted,
// with nothing after the stored transaction, when
//   - the oldest binlog's Gtid_list (atOldest) names it at the stored
//     sequence number (at a higher one, transactions of it were purged:
//     PurgedDomains reports them, and it is in neither list returned; at
//     a lower one, the set has transactions this server never had), or
//   - no Gtid_list names it any more, and the stored set is this server's
//     position otherwise: atStored, the server's GTID state at the
//     checkpoint's file:pos (BINLOG_GTID_POS; "" when the file is not on
//     the server), has exactly the stored set's other domains, at the
//     same sequence numbers (a checkpoint written after the deletion).
//
// deleted describes those ("78 (stored seq 2, its last transaction)");
// refused are the others, which the server never had as far as can
// be told (ErrUnknownGTIDDomain).
func DeletedDomains(stored, atOldest, atStored string, unknown []uint32) (deleted []string, refused []uint32, err error) {
	st, err := latestPerDomain(stored)
	if err != nil {
		return nil, nil, err
	}
	old, err := latestPerDomain(atOldest)
	if err != nil {
		return nil, nil, err
	}
	here, err := latestPerDomain(atStored)
	if err != nil {
		return nil, nil, err
	}
	ours := atStored != "" && len(here) == len(st)-len(unknown)
	for d, g := range st {
		if slices.Contains(unknown, d) {
			continue
		}
		if h, ok := here[d]; !ok || h.SequenceNumber != g.SequenceNumber {
			ours = false
		}
	}
	for _, d := range unknown {
		s := st[d].SequenceNumber
		switch o, listed := old[d]; {
		case listed && s == o.SequenceNumber:
			deleted = append(deleted, fmt.Sprintf("%d (stored seq %d, its last transaction)", d, s))
		case listed && s < o.SequenceNumber: // transactions of it were purged
		case ours:
			deleted = append(deleted, fmt.Sprintf("%d (stored seq %d; no binlog names it any more)", d, s))
		default:
			refused = append(refused, d)
		}
	}
	return deleted, refused, nil
}

// Skip returns where to resume from under policy (OnPurgedEarliest or
// OnPurgedLatest) instead of the purged position. Earliest in MariaDB
// GTID mode keeps each domain at the later of the stored and the oldest
// available sequence number, so only what was purged is skipped; in
// MySQL GTID mode it adds @@gtid_purged to the stored set.
func (s *Server) Skip(pg *Purged, policy string) (Position, error) {
	switch policy {
	case OnPurgedLatest:
		return s.Latest()
	case OnPurgedEarliest:
		if s.cfg.PositionMode != ModeGTID || pg.Stored.GTIDSet == "" {
			return pg.Oldest, nil
		}
		if s.flavor == FlavorMariaDB {
			set, err := mergeLatest(pg.Stored.GTIDSet, pg.Oldest.GTIDSet)
			if err != nil {
				return Position{}, fmt.Errorf("%w: %v", ErrStart, err)
			}
			return Position{GTIDSet: set}, nil
		}
		set, err := mysql.ParseGTIDSet(s.flavor, pg.Stored.GTIDSet)
		if err != nil {
			return Position{}, fmt.Errorf("%w: stored GTID set %q: %v", ErrStart, pg.Stored.GTIDSet, err)
		}
		if pg.Oldest.GTIDSet != "" {
			if err := set.Update(pg.Oldest.GTIDSet); err != nil {
				return Position{}, fmt.Errorf("%w: @@gtid_purged %q: %v", ErrStart, pg.Oldest.GTIDSet, err)
			}
		}
		return Position{GTIDSet: set.String()}, nil
	}
	return Position{}, fmt.Errorf("%w: source.on-purged %q: want fail, earliest or latest", ErrStart, policy)
}

// gtidSetAtStart returns the GTID set at the start of a binlog file:
// MariaDB's BINLOG_GTID_POS(file, 4), falling back to the file's Gtid_list
// event; "" on MySQL.
func (s *Server) gtidSetAtStart(file string) (string, error) {
	if s.flavor != FlavorMariaDB {
		return "", nil
	}
	if set, err := s.GTIDSetAt(Position{File: file, Pos: 4}); err == nil {
		return set, nil
	}
	r, err := s.conn.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' LIMIT 3", strings.ReplaceAll(file, "'", "''")))
	if err != nil {
		return "", fmt.Errorf("binlog: GTID list of %s: %w", file, err)
	}
	for i := 0; i < r.RowNumber(); i++ {
		if typ, _ := r.GetStringByName(i, "Event_type"); typ == "Gtid_list" {
			info, _ := r.GetStringByName(i, "Info")
			return strings.Trim(info, "[] "), nil
		}
	}
	return "", nil
}

func (s *Server) queryString(q string) (string, error) {
	r, err := s.conn.Execute(q)
	if err != nil {
		return "", fmt.Errorf("binlog: %s: %w", q, err)
	}
	v, _ := r.GetString(0, 0)
	return v, nil
}

// NormalizeGTIDSet returns a GTID set in one canonical form per flavor:
// for MariaDB one GTID per domain (the one with the highest sequence
// number: a raw @@gtid_binlog_state lists one per domain and server id,
// and a position has one per domain, MariaDB KB "gtid_slave_pos"), in
// domain order; for MySQL the set as go-mysql prints it. Errors wrap
// ErrStart and name the set.
func NormalizeGTIDSet(flavor, set string) (string, error) {
	set = strings.TrimSpace(strings.ReplaceAll(set, "\n", ""))
	if set == "" {
		return "", nil
	}
	if flavor == FlavorMariaDB {
		out, err := mergeLatest(set, "")
		if err != nil {
			return "", fmt.Errorf("%w: GTID set %q: %v", ErrStart, set, err)
		}
		return out, nil
	}
	g, err := mysql.ParseGTIDSet(flavor, set)
	if err != nil {
		return "", fmt.Errorf("%w: GTID set %q: %v", ErrStart, set, err)
	}
	return g.String(), nil
}

// latestPerDomain parses a MariaDB GTID list (gtid_binlog_state or a
// Gtid_list event: possibly several server ids per domain) into the
// GTID with the highest sequence number of each domain.
func latestPerDomain(list string) (map[uint32]*mysql.MariadbGTID, error) {
	out := map[uint32]*mysql.MariadbGTID{}
	for _, part := range strings.Split(list, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		g, err := mysql.ParseMariadbGTID(part)
		if err != nil {
			return nil, fmt.Errorf("MariaDB GTID %q: %w", part, err)
		}
		if cur, ok := out[g.DomainID]; !ok || g.SequenceNumber > cur.SequenceNumber {
			out[g.DomainID] = g
		}
	}
	return out, nil
}

// mergeLatest merges two MariaDB GTID lists, keeping the highest sequence
// number of each domain, in domain order.
func mergeLatest(a, b string) (string, error) {
	ma, err := latestPerDomain(a)
	if err != nil {
		return "", err
	}
	mb, err := latestPerDomain(b)
	if err != nil {
		return "", err
	}
	for d, g := range mb {
		if cur, ok := ma[d]; !ok || g.SequenceNumber > cur.SequenceNumber {
			ma[d] = g
		}
	}
	ids := slices.Sorted(maps.Keys(ma))
	parts := make([]string, len(ids))
	for i, d := range ids {
		parts[i] = ma[d].String()
	}
	return strings.Join(parts, ","), nil
}

// UnknownDomains returns the domains of the MariaDB GTID set stored that
// do not occur in state (@@gtid_binlog_state: every domain the server's
// binlog has had), in ascending order.
func UnknownDomains(stored, state string) ([]uint32, error) {
	st, err := latestPerDomain(stored)
	if err != nil {
		return nil, err
	}
	known, err := latestPerDomain(state)
	if err != nil {
		return nil, err
	}
	var unknown []uint32
	for d := range st {
		if _, ok := known[d]; !ok {
			unknown = append(unknown, d)
		}
	}
	slices.Sort(unknown)
	return unknown, nil
}

// PurgedDomains compares a stored MariaDB GTID set with the set at the
// start of the oldest binlog (its Gtid_list): a domain whose stored
// sequence number is below the oldest file's (or that the stored set
// lacks while the oldest file's list has it) lost transactions to a purge.
// It returns those domains as "domain (stored seq → oldest seq)" and the
// number of transactions skipped (the sum of the gaps).
func PurgedDomains(stored, atOldest string) ([]string, int64, error) {
	st, err := latestPerDomain(stored)
	if err != nil {
		return nil, 0, err
	}
	old, err := latestPerDomain(atOldest)
	if err != nil {
		return nil, 0, err
	}
	var ids []uint32
	for d := range old {
		ids = append(ids, d)
	}
	slices.Sort(ids)
	var out []string
	var lost int64
	for _, d := range ids {
		o := old[d].SequenceNumber
		var have uint64
		if g, ok := st[d]; ok {
			have = g.SequenceNumber
		}
		if have < o {
			if _, named := st[d]; named {
				out = append(out, fmt.Sprintf("%d (stored seq %d, oldest binlog starts after seq %d)", d, have, o))
			} else {
				out = append(out, fmt.Sprintf("%d (not in the stored set, oldest binlog starts after seq %d)", d, o))
			}
			lost += int64(o - have)
		}
	}
	return out, lost, nil
}

// mysqlPurgedSources returns the source UUIDs (with tags) of MySQL's
// @@gtid_purged that the stored set does not contain.
func mysqlPurgedSources(stored, purged string) ([]string, error) {
	if strings.TrimSpace(purged) == "" {
		return nil, nil
	}
	st, err := mysql.ParseMysqlGTIDSet(stored)
	if err != nil {
		return nil, err
	}
	pu, err := mysql.ParseMysqlGTIDSet(purged)
	if err != nil {
		return nil, fmt.Errorf("@@gtid_purged %q: %w", purged, err)
	}
	if st.Contain(pu) {
		return nil, nil
	}
	var out []string
	for _, part := range strings.Split(pu.String(), ",") {
		one, err := mysql.ParseMysqlGTIDSet(part)
		if err == nil && !st.Contain(one) {
			out = append(out, part)
		}
	}
	return out, nil
}

// filesBetween returns how many binlog files lie from stored up to (not
// including) oldest, by the numeric extension of their names: the files
// purged when stored is gone. -1 when the names do not share a base name
// or stored is not before oldest.
func filesBetween(stored, oldest string) int {
	is, io := strings.LastIndexByte(stored, '.'), strings.LastIndexByte(oldest, '.')
	if is < 0 || io < 0 || stored[:is] != oldest[:io] {
		return -1
	}
	a, errA := strconv.ParseUint(stored[is+1:], 10, 64)
	b, errB := strconv.ParseUint(oldest[io+1:], 10, 64)
	if errA != nil || errB != nil || a >= b {
		return -1
	}
	return int(b - a)
}

// Headroom returns how far p is from the oldest binlog the server keeps:
// the bytes from the start of the oldest file to p (the whole files before
// p's plus p.Pos) and how many files precede p's (0: p is in the oldest
// file, the next purge removes it). ok is false when p's file is not
// listed (files: SHOW BINARY LOGS, oldest first).
func Headroom(files []LogFile, p Position) (bytes int64, before int, ok bool) {
	if len(files) == 0 {
		return 0, 0, false
	}
	return Span(files, Position{File: files[0].Name}, p)
}

// Retention is the server's binlog expiry setting.
type Retention struct {
	// ExpireSeconds: binlog_expire_logs_seconds (MySQL 8, MariaDB 10.6+);
	// -1 when the server has no such variable.
	ExpireSeconds int64 `json:"binlog_expire_logs_seconds"`
	// ExpireDays: expire_logs_days (fractional on MariaDB; removed in MySQL
	// 8.4); -1 when the server has no such variable.
	ExpireDays float64 `json:"expire_logs_days"`
}

// Retention reads the server's binlog expiry settings.
func (s *Server) Retention() (Retention, error) {
	ret := Retention{ExpireSeconds: -1, ExpireDays: -1}
	r, err := s.conn.Execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('binlog_expire_logs_seconds','expire_logs_days')")
	if err != nil {
		return ret, fmt.Errorf("binlog: read binlog expiry settings: %w", err)
	}
	for i := 0; i < r.RowNumber(); i++ {
		k, _ := r.GetString(i, 0)
		v, _ := r.GetString(i, 1)
		switch strings.ToLower(k) {
		case "binlog_expire_logs_seconds":
			ret.ExpireSeconds, _ = strconv.ParseInt(v, 10, 64)
		case "expire_logs_days":
			ret.ExpireDays, _ = strconv.ParseFloat(v, 64)
		}
	}
	return ret, nil
}

// CompleteGTIDSet returns p with the MariaDB domains its GTID set lacks
// added from the server's GTID state at p's file:pos (BINLOG_GTID_POS:
// the file's Gtid_list plus what follows), for a checkpoint stored before
// the GTID history was kept (a domain known only from the oldest file's
// Gtid_list then made CheckResume report a purge, and MariaDB refuses a
// GTID dump whose state lacks a domain of the binlogs' history). It
// completes the set only when p is this server's position: its file is on
// the server and every domain p's set names has there the sequence number
// p's set says; otherwise (another server, MySQL, no file) p is returned
// as it is. Call it before CheckResume.
func (s *Server) CompleteGTIDSet(p Position) (Position, error) {
	if s.flavor != FlavorMariaDB || p.File == "" || p.GTIDSet == "" {
		return p, nil
	}
	files, err := s.BinaryLogs()
	if err != nil {
		return p, err
	}
	if !slices.Contains(files, p.File) {
		return p, nil
	}
	at, err := s.GTIDSetAt(p)
	if err != nil || at == "" {
		return p, err
	}
	set, ok, err := completeSet(p.GTIDSet, at)
	if err != nil {
		return p, fmt.Errorf("%w: stored GTID set %q: %v", ErrStart, p.GTIDSet, err)
	}
	if ok {
		p.GTIDSet = set
	}
	return p, nil
}

// completeSet adds to the MariaDB GTID set stored the domains of at that
// it lacks, when every domain of stored has in at the same sequence
// number (ok false, stored unchanged, otherwise). One GTID per domain.
func completeSet(stored, at string) (string, bool, error) {
	st, err := latestPerDomain(stored)
	if err != nil {
		return stored, false, err
	}
	here, err := latestPerDomain(at)
	if err != nil {
		return stored, false, err
	}
	for d, g := range st {
		if h, ok := here[d]; !ok || h.SequenceNumber != g.SequenceNumber {
			return stored, false, nil
		}
	}
	out, err := mergeLatest(stored, at)
	return out, err == nil, err
}
