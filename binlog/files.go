package binlog

import (
	"errors"
	"fmt"
	"os"
	"slices"
)

// Text formats the position as "file:pos", "gtid:set", or both separated
// by a space when both are known; "(none)" when neither is. It is the one
// text form of a position in messages and output; ParseStart reads either
// part back.
func (p Position) Text() string {
	switch {
	case p.File != "" && p.GTIDSet != "":
		return p.FilePos() + " gtid:" + p.GTIDSet
	case p.File != "":
		return p.FilePos()
	case p.GTIDSet != "":
		return "gtid:" + p.GTIDSet
	}
	return "(none)"
}

// Span returns the binlog bytes from a to b, given the files and their
// sizes (SHOW BINARY LOGS, oldest first): within one file the offset
// difference; across files the rest of a's file, the whole files in
// between and b.Pos bytes of b's file; and how many files after a's the
// span reaches into. ok is false when a or b has no file, a file not in
// files, or b is before a.
func Span(files []LogFile, a, b Position) (bytes int64, after int, ok bool) {
	ia := slices.IndexFunc(files, func(f LogFile) bool { return f.Name == a.File })
	ib := slices.IndexFunc(files, func(f LogFile) bool { return f.Name == b.File })
	if ia < 0 || ib < 0 || ib < ia || (ia == ib && b.Pos < a.Pos) {
		return 0, 0, false
	}
	if ia == ib {
		return int64(b.Pos) - int64(a.Pos), 0, true
	}
	n := max(files[ia].Size-int64(a.Pos), 0)
	for i := ia + 1; i < ib; i++ {
		n += files[i].Size
	}
	return n + int64(b.Pos), ib - ia, true
}

// SchemaColumns reads the outbox table's column names from a schema file
// (its CREATE TABLE), for binlogs without column names; path "" gives none.
func SchemaColumns(path, table string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	ddl, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("schema file: %w", err)
	}
	cols, err := ColumnsFromCreateTable(string(ddl), table)
	if err != nil {
		return nil, fmt.Errorf("schema file %s: %w", path, err)
	}
	return cols, nil
}

// NoColumnsHint adds the fix to an ErrNoColumns error; other errors are
// returned as they are.
func NoColumnsHint(err error) error {
	if errors.Is(err, ErrNoColumns) {
		return fmt.Errorf("%w; give the outbox table's CREATE TABLE with --schema-file (e.g. schema/mariadb.sql) or source.schema-file", err)
	}
	return err
}

// InspectFiles lists the binlog files of pattern (BinlogFiles) and
// inspects each (InspectFile), in order.
func InspectFiles(pattern string) ([]FileInfo, error) {
	paths, err := BinlogFiles(pattern)
	if err != nil {
		return nil, err
	}
	infos := make([]FileInfo, 0, len(paths))
	for _, path := range paths {
		fi, err := InspectFile(path)
		if err != nil {
			return nil, err
		}
		infos = append(infos, fi)
	}
	return infos, nil
}

// CheckChain checks that each file but the last ends with a rotate event
// naming the next one: a file copied while the server was still writing it
// lacks what came after the copy, and reading on into the next file would
// skip that silently. Errors wrap ErrFileOrder in a *FileError naming the
// file and the offset where it ends.
func CheckChain(infos []FileInfo) error {
	for i := 0; i+1 < len(infos); i++ {
		fi, next := infos[i], infos[i+1]
		if fi.RotateTo == next.Name {
			continue
		}
		why := "ends with no rotate event (copied while the server was still writing it, or the server stopped uncleanly): what the server wrote to it after the copy is missing"
		if fi.Truncated {
			why = "ends inside an event (copied while the server was writing it)"
		} else if fi.RotateTo != "" {
			why = fmt.Sprintf("ends with a rotate to %s: a file is missing between", fi.RotateTo)
		}
		return &FileError{File: fi.Name, Offset: fi.Clean, Err: fmt.Errorf("%w: %s, but %s follows it; copy the complete file again (or end the range before it)",
			ErrFileOrder, why, next.Name)}
	}
	return nil
}
