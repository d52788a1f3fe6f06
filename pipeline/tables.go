package pipeline

import (
	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/config"
)

// Checked is the validation of the source's outbox tables that run does
// at start and check reports: the TableSet (binlog.NewTableSet with
// router.topic), checked against the server (Server.CheckTables: a missing
// table or mapped column, a column type a role does not take, a template
// over a nullable column, a pattern matching no table; every problem
// joined, each naming the setting, the table, the column and the fix); the
// tables found with their compiled mappings (none for the im table read
// without a mapping, TableSet.Legacy); and the single table's column names
// (Server.Columns) for binlogs without them, none with source.tables.
func Checked(cfg config.Config, srv tableServer) (*binlog.TableSet, []*binlog.Table, []string, error) {
	tables, err := binlog.NewTableSet(cfg.Source, cfg.Router.Topic)
	if err != nil {
		return nil, nil, nil, err
	}
	found, err := srv.CheckTables(tables)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(cfg.Source.Tables) > 0 {
		return tables, found, nil, nil
	}
	cols, err := srv.Columns()
	return tables, found, cols, err
}

// tableServer is what Checked asks the server (*binlog.Server).
type tableServer interface {
	CheckTables(ts *binlog.TableSet) ([]*binlog.Table, error)
	Columns() ([]string, error)
}
