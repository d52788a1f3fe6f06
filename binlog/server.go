package binlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/mapping"
	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"
)

// MySQL/MariaDB error codes used in classification (MySQL manual, "Server
// Error Message Reference").
const (
	codeAccessDenied          = 1045 // ER_ACCESS_DENIED_ERROR
	codeTableAccessDenied     = 1142 // ER_TABLEACCESS_DENIED_ERROR
	codeNoSuchTable           = 1146 // ER_NO_SUCH_TABLE
	codeSpecificAccess        = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR
	codeParse                 = 1064 // ER_PARSE_ERROR
	codeMasterFatalReading    = 1236 // ER_MASTER_FATAL_ERROR_READING_BINLOG
	codeSlaveSameID           = 4052 // MariaDB ER_SLAVE_SAME_ID
	codeUnknownSystemVariable = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
	codeErrorWhenExecuting    = 1220 // ER_ERROR_WHEN_EXECUTING_COMMAND (SHOW BINLOG EVENTS at a bad offset)
)

// Server is a plain SQL connection to the source, used for start-up checks
// and to resolve start positions. It is not the replication connection.
type Server struct {
	cfg        Config
	conn       *Conn
	flavor     string
	version    string
	serverID   uint32
	serverUUID string
	metadata   string // binlog_row_metadata
	gtidPos    *gtidPosAnswer
	log        *zap.Logger
}

// Connect opens the SQL connection and detects the flavor when
// cfg.Flavor is empty.
func Connect(ctx context.Context, cfg Config, log *zap.Logger) (*Server, error) {
	conn, err := Dial(ctx, cfg, "")
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, conn: conn, log: log}
	if err := s.identify(); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the connection.
func (s *Server) Close() error { return s.conn.Close() }

// Flavor is "mysql" or "mariadb".
func (s *Server) Flavor() string { return s.flavor }

// ServerID is the source's @@server_id.
func (s *Server) ServerID() uint32 { return s.serverID }

// ServerUUID is the source's @@server_uuid (MySQL only; empty on MariaDB).
func (s *Server) ServerUUID() string { return s.serverUUID }

// Version is the source's VERSION().
func (s *Server) Version() string { return s.version }

func (s *Server) identify() error {
	r, err := s.conn.Execute("SELECT VERSION(), @@server_id")
	if err != nil {
		return fmt.Errorf("binlog: identify server: %w", err)
	}
	s.version, _ = r.GetString(0, 0)
	id, _ := r.GetUint(0, 1)
	s.serverID = uint32(id)
	s.flavor = s.cfg.Flavor
	detected := FlavorMySQL
	if strings.Contains(strings.ToLower(s.version), "mariadb") {
		detected = FlavorMariaDB
	}
	if s.flavor == "" {
		s.flavor = detected
	} else if s.flavor != detected {
		return fmt.Errorf("%w: source.flavor is %q but the server reports VERSION()=%q; set source.flavor: %s or leave it empty",
			ErrServerConfig, s.flavor, s.version, detected)
	}
	if s.flavor == FlavorMySQL {
		if r, err := s.conn.Execute("SELECT @@server_uuid"); err == nil {
			s.serverUUID, _ = r.GetString(0, 0)
		}
	}
	return nil
}

func (s *Server) variables() (map[string]string, error) {
	r, err := s.conn.Execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('log_bin','binlog_format','binlog_row_image','binlog_row_metadata','gtid_mode')")
	if err != nil {
		return nil, fmt.Errorf("binlog: read server variables: %w", err)
	}
	vars := make(map[string]string, r.RowNumber())
	for i := 0; i < r.RowNumber(); i++ {
		k, _ := r.GetString(i, 0)
		v, _ := r.GetString(i, 1)
		vars[strings.ToLower(k)] = strings.ToUpper(v)
	}
	return vars, nil
}

// Check verifies the server settings, the publisher's privileges and that
// no other replica uses the configured server_id. Every problem found is
// returned, joined, each naming its fix.
func (s *Server) Check(ctx context.Context) error {
	errs, err := s.settings()
	if err != nil {
		return err
	}
	if err := s.checkServerID(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckSettings is Check without the server_id check: the server settings
// and the publisher's privileges (for a caller that checks the server_ids
// itself from Replicas, as the preflight does for the range of ids a
// source uses under leases).
func (s *Server) CheckSettings() error {
	errs, err := s.settings()
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// settings returns the problems of the server settings and privileges, or
// an error when the variables cannot be read.
func (s *Server) settings() ([]error, error) {
	var errs []error
	vars, err := s.variables()
	if err != nil {
		return nil, err
	}
	if vars["log_bin"] != "ON" && vars["log_bin"] != "1" {
		errs = append(errs, fmt.Errorf("%w: log_bin is %s: enable the binary log (log_bin=<basename> in the server's [mysqld] section, then restart)", ErrServerConfig, or(vars["log_bin"], "OFF")))
	}
	if f := vars["binlog_format"]; f != "ROW" {
		errs = append(errs, fmt.Errorf("%w: binlog_format is %s: run SET GLOBAL binlog_format=ROW and set binlog_format=ROW in the server's config (sessions opened before keep the old format)", ErrServerConfig, f))
	}
	if f := vars["binlog_row_image"]; f != "FULL" {
		errs = append(errs, fmt.Errorf("%w: binlog_row_image is %s: run SET GLOBAL binlog_row_image=FULL and set binlog_row_image=FULL in the server's config", ErrServerConfig, f))
	}
	s.metadata = vars["binlog_row_metadata"]
	if s.metadata != "FULL" {
		s.log.Warn("binlog_row_metadata is not FULL: column names come from information_schema read at start, so DDL on the outbox table needs a restart; set binlog_row_metadata=FULL to avoid this",
			zap.String("binlog_row_metadata", s.metadata))
	}
	if s.cfg.PositionMode == ModeGTID && s.flavor == FlavorMySQL && vars["gtid_mode"] != "ON" {
		errs = append(errs, fmt.Errorf("%w: gtid_mode is %s but source.position-mode is gtid: enable gtid_mode=ON and enforce_gtid_consistency=ON, or use position-mode: file", ErrServerConfig, vars["gtid_mode"]))
	}
	errs = append(errs, s.checkPrivileges()...)
	return errs, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s *Server) checkPrivileges() []error {
	var errs []error
	fix := fmt.Sprintf("see schema/grants-%s.sql", s.flavor)
	// REPLICATION CLIENT (MySQL) / BINLOG MONITOR (MariaDB 10.5+) lets us list binlogs.
	if _, err := s.conn.Execute("SHOW BINARY LOGS"); err != nil {
		if code(err) == codeSpecificAccess {
			priv := "REPLICATION CLIENT"
			if s.flavor == FlavorMariaDB {
				priv = "BINLOG MONITOR"
			}
			errs = append(errs, fmt.Errorf("%w: %q cannot list binary logs: GRANT %s ON *.* TO the publisher's user (%s)", ErrPrivileges, s.cfg.User, priv, fix))
		} else {
			errs = append(errs, fmt.Errorf("binlog: SHOW BINARY LOGS: %w", err))
		}
	}
	// REPLICATION SLAVE is only exercised by the binlog dump itself, where its
	// absence shows as a misleading "1045 access denied"; read it from the grants.
	if r, err := s.conn.Execute("SHOW GRANTS"); err == nil {
		ok := false
		for i := 0; i < r.RowNumber(); i++ {
			g, _ := r.GetString(i, 0)
			g = strings.ToUpper(g)
			if strings.Contains(g, "ON *.*") && (strings.Contains(g, "REPLICATION SLAVE") || strings.Contains(g, "REPLICATION REPLICA") || strings.Contains(g, "ALL PRIVILEGES")) {
				ok = true
			}
		}
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %q lacks REPLICATION SLAVE: GRANT REPLICATION SLAVE ON *.* TO the publisher's user (%s)", ErrPrivileges, s.cfg.User, fix))
		}
	}
	if len(s.cfg.Tables) > 0 {
		return errs // the tables are checked by CheckTables
	}
	q := fmt.Sprintf("SELECT 1 FROM `%s`.`%s` LIMIT 0", s.cfg.Schema, s.cfg.Table)
	if _, err := s.conn.Execute(q); err != nil {
		switch code(err) {
		case codeTableAccessDenied:
			// The server answers a missing table with this too when the
			// user may not see it: name both causes, and the tables the
			// user can read there (a typo in source.table).
			errs = append(errs, fmt.Errorf("%w: %q cannot SELECT from %s.%s: GRANT SELECT ON %s.%s TO the publisher's user (%s); or the table does not exist: %s",
				ErrPrivileges, s.cfg.User, s.cfg.Schema, s.cfg.Table, s.cfg.Schema, s.cfg.Table, fix, s.readable()))
		case codeNoSuchTable:
			errs = append(errs, fmt.Errorf("%w: table %s.%s does not exist: create it from schema/%s.sql or fix source.schema / source.table", ErrServerConfig, s.cfg.Schema, s.cfg.Table, s.flavor))
		default:
			errs = append(errs, fmt.Errorf("binlog: %s: %w", q, err))
		}
	}
	return errs
}

// readable names, for an error, the tables of source.schema the user can
// read (information_schema lists only those): where source.table may
// have a typo.
func (s *Server) readable() string {
	var names []string
	if r, err := s.conn.Execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME LIMIT 20", s.cfg.Schema); err == nil {
		for i := 0; i < r.RowNumber(); i++ {
			n, _ := r.GetString(i, 0)
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("check source.schema (%s) and source.table (%s); the user can read no table in %s", s.cfg.Schema, s.cfg.Table, s.cfg.Schema)
	}
	return fmt.Sprintf("check source.table (%s); the user can read in %s: %s", s.cfg.Table, s.cfg.Schema, strings.Join(names, ", "))
}

// ownServerID fails with ErrOwnServerID when own, the source's
// @@server_id, is cfg.ServerID or, under leases, one of the range
// cfg.ServerIDFrom .. + ServerIDCount − 1 that the source's publishers
// register with (any term may draw it); nil otherwise.
func ownServerID(own uint32, cfg Config) error {
	if cfg.ServerIDCount <= 1 {
		if own == cfg.ServerID {
			return fmt.Errorf("%w: source.server-id %d is the source's own @@server_id: choose another", ErrOwnServerID, cfg.ServerID)
		}
		return nil
	}
	from, to := uint64(cfg.ServerIDFrom), uint64(cfg.ServerIDFrom)+uint64(cfg.ServerIDCount)-1
	if uint64(own) < from || uint64(own) > to {
		return nil
	}
	return fmt.Errorf("%w: the source's own @@server_id %d is one of the server_ids %d–%d (source.server-id %d + lease token mod ha.server-ids %d) this source's publishers register as: set source.server-id so that the range excludes %d, or lower ha.server-ids",
		ErrOwnServerID, own, from, to, cfg.ServerIDFrom, cfg.ServerIDCount, own)
}

// checkServerID fails when the source itself or a registered replica uses
// the configured server_id. A registration left by a killed publisher goes
// away once the server next writes to its dead socket, so a conflict is
// re-checked for up to cfg.ServerIDWait before failing.
func (s *Server) checkServerID(ctx context.Context) error {
	if err := ownServerID(s.serverID, s.cfg); err != nil {
		return err
	}
	deadline := time.Now().Add(s.cfg.ServerIDWait)
	warned := false
	for {
		rs, err := s.Replicas()
		if err != nil {
			// The binlog dump will report a conflict anyway, so this check
			// is best effort.
			// The error names the GRANT that enables the check.
			s.log.Warn("cannot list replicas, so a server-id conflict is not checked at start", zap.Error(err))
			return nil
		}
		host, found := replicaHost(rs, s.cfg.ServerID)
		if !found {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: replica %s already uses server_id %d: if it is a cdc-outbox publisher with this configuration, stop it first; otherwise set source.server-id to an unused value (see SHOW SLAVE HOSTS / SHOW REPLICAS)", ErrServerID, host, s.cfg.ServerID)
		}
		if !warned {
			warned = true
			s.log.Warn("a replica with our server_id is registered; waiting for it to go away (a killed publisher's connection lingers briefly)",
				zap.Uint32("server_id", s.cfg.ServerID), zap.String("replica_host", host), zap.Duration("wait", s.cfg.ServerIDWait))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Columns returns the outbox table's column names in ordinal order, from
// information_schema.COLUMNS.
func (s *Server) Columns() ([]string, error) {
	r, err := s.conn.Execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
		s.cfg.Schema, s.cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("binlog: read columns of %s.%s: %w", s.cfg.Schema, s.cfg.Table, err)
	}
	cols := make([]string, r.RowNumber())
	for i := range cols {
		cols[i], _ = r.GetString(i, 0)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: table %s.%s not found in information_schema: create it from schema/%s.sql, or fix source.schema / source.table", ErrServerConfig, s.cfg.Schema, s.cfg.Table, s.flavor)
	}
	return cols, nil
}

// TableNames returns the base tables of schema (information_schema.TABLES).
func (s *Server) TableNames(schema string) ([]string, error) {
	r, err := s.conn.Execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME", schema)
	if err != nil {
		return nil, fmt.Errorf("binlog: list the tables of %s: %w", schema, err)
	}
	names := make([]string, r.RowNumber())
	for i := range names {
		names[i], _ = r.GetString(i, 0)
	}
	return names, nil
}

// TableColumns returns a table's columns in ordinal order with their
// types and nullability (information_schema.COLUMNS); none when the table
// does not exist.
func (s *Server) TableColumns(schema, table string) ([]mapping.Column, error) {
	r, err := s.conn.Execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
		schema, table)
	if err != nil {
		return nil, fmt.Errorf("binlog: read columns of %s.%s: %w", schema, table, err)
	}
	cols := make([]mapping.Column, r.RowNumber())
	for i := range cols {
		name, _ := r.GetString(i, 0)
		dt, _ := r.GetString(i, 1)
		ct, _ := r.GetString(i, 2)
		null, _ := r.GetString(i, 3)
		cols[i] = mapping.Column{Name: name, DataType: strings.ToLower(dt), Unsigned: strings.Contains(strings.ToLower(ct), "unsigned"), Nullable: null == "YES"}
	}
	return cols, nil
}

// CheckTables validates the source's tables and mappings at start
// (TableSet.Check): a table or a mapped column that is missing, a column
// of an unsupported type, a template over a nullable column, a pattern
// that matches no table. The legacy single im table is checked by Check
// and by the reader, as before mappings.
func (s *Server) CheckTables(ts *TableSet) ([]*Table, error) {
	if ts.Legacy() {
		return nil, nil
	}
	return ts.Check(s)
}

// BinaryLogs returns the server's binlog file names, oldest first.
func (s *Server) BinaryLogs() ([]string, error) {
	r, err := s.conn.Execute("SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("binlog: SHOW BINARY LOGS: %w", err)
	}
	files := make([]string, r.RowNumber())
	for i := range files {
		files[i], _ = r.GetString(i, 0)
	}
	return files, nil
}

// Latest returns the current end of the binlog: SHOW BINARY LOG STATUS
// (MySQL 8.4+, MariaDB 10.5.2+) or SHOW MASTER STATUS, with the server's
// GTID set (Executed_Gtid_Set on MySQL, @@gtid_binlog_pos on MariaDB).
func (s *Server) Latest() (Position, error) { return latest(s.conn.Execute, s.flavor) }

// LatestOn is Latest on a connection of one's own (e.g. one holding a
// snapshot under FLUSH TABLES WITH READ LOCK): exec is its Execute.
func LatestOn(exec func(string, ...any) (*mysql.Result, error), flavor string) (Position, error) {
	return latest(exec, flavor)
}

// latest is Latest over an Execute function (unit-tested with fakes).
func latest(exec func(string, ...any) (*mysql.Result, error), flavor string) (Position, error) {
	r, err := exec("SHOW BINARY LOG STATUS")
	if code(err) == codeParse {
		r, err = exec("SHOW MASTER STATUS")
	}
	if err != nil {
		return Position{}, fmt.Errorf("binlog: read the current binlog position: %w", err)
	}
	if r.RowNumber() == 0 {
		return Position{}, fmt.Errorf("%w: the server reports no binlog position: enable log_bin", ErrServerConfig)
	}
	var p Position
	p.File, _ = r.GetString(0, 0)
	pos, _ := r.GetUint(0, 1)
	p.Pos = uint32(pos)
	if flavor == FlavorMySQL {
		if set, err := r.GetStringByName(0, "Executed_Gtid_Set"); err == nil {
			p.GTIDSet = strings.ReplaceAll(set, "\n", "")
		}
	} else if g, err := exec("SELECT @@gtid_binlog_pos"); err == nil {
		p.GTIDSet, _ = g.GetString(0, 0)
	}
	return p, nil
}

// Resolve turns a start option into a position, checking it against the
// binlogs the server still has.
func (s *Server) Resolve(st Start) (Position, error) {
	switch st.Kind {
	case StartLatest:
		return s.Latest()
	case StartEarliest:
		files, err := s.BinaryLogs()
		if err != nil {
			return Position{}, err
		}
		if len(files) == 0 {
			return Position{}, fmt.Errorf("%w: the server has no binary logs: enable log_bin", ErrServerConfig)
		}
		p := Position{File: files[0], Pos: 4}
		if s.flavor == FlavorMySQL {
			if g, err := s.conn.Execute("SELECT @@gtid_purged"); err == nil {
				p.GTIDSet, _ = g.GetString(0, 0)
				p.GTIDSet = strings.ReplaceAll(p.GTIDSet, "\n", "")
			}
		} else {
			// The file's Gtid_list: every domain before it, also those
			// known only from history (their transactions purged).
			set, err := s.gtidSetAtStart(p.File)
			if err != nil {
				return Position{}, err
			}
			if p.GTIDSet, err = NormalizeGTIDSet(s.flavor, set); err != nil {
				return Position{}, err
			}
		}
		return p, nil
	case StartFilePos:
		p := Position{File: st.File, Pos: st.Pos}
		if err := s.Available(p); err != nil {
			return p, err
		}
		// MariaDB: the GTID state at file:pos (its file's Gtid_list plus
		// what follows up to pos), so that the stored set stands for
		// everything before the position.
		set, err := s.GTIDSetAt(p)
		if err != nil {
			return Position{}, err
		}
		if p.GTIDSet, err = NormalizeGTIDSet(s.flavor, set); err != nil {
			return Position{}, err
		}
		return p, nil
	case StartGTID:
		set, err := NormalizeGTIDSet(s.flavor, st.GTIDSet)
		if err != nil {
			return Position{}, fmt.Errorf("%w: gtid:%s is not a %s GTID set: %v", ErrStart, st.GTIDSet, s.flavor, err)
		}
		return Position{GTIDSet: set}, nil
	}
	return Position{}, fmt.Errorf("%w: no checkpoint and no start option: set source.start (or --start) to latest, earliest, <file>:<pos> or gtid:<set> for the first run", ErrStart)
}

// Available checks that p's binlog file still exists on the server.
func (s *Server) Available(p Position) error {
	if p.File == "" {
		return nil
	}
	files, err := s.BinaryLogs()
	if err != nil {
		return err
	}
	for _, f := range files {
		if f == p.File {
			return nil
		}
	}
	oldest := "(none)"
	if len(files) > 0 {
		oldest = files[0] + ":4"
	}
	return fmt.Errorf("%w: binlog %s is not on the server (purged, or from another server); oldest available is %s",
		ErrPositionUnavailable, p.FilePos(), oldest)
}

// code returns the MySQL error code of err, or 0.
func code(err error) uint16 {
	var me *mysql.MyError
	if errors.As(err, &me) {
		return me.Code
	}
	return 0
}
