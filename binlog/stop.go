package binlog

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// stopper is the end of a bounded read (Reader.StopAt).
type stopper struct {
	pos  Position      // file:pos end; zero when stopping by GTID set
	gset mysql.GTIDSet // GTID set end; nil when stopping by file:pos
}

// StopAt bounds the read: Run returns nil, after emitting every transaction
// that ends at or before stop, as soon as the stream reaches stop, instead
// of streaming until cancelled. Call it before Run.
//
// With a file:pos stop (stop.File set), a transaction is emitted when its
// end (the end_log_pos of its XID/COMMIT event) is at or before stop; Run
// returns once an event ends at or after stop, so a transaction that
// straddles stop is not emitted, and a stop between transactions that is
// no transaction's end (e.g. after a rotation, or the binlog end read from
// SHOW BINARY LOG STATUS) ends the read there too. With a GTID set stop
// (stop.GTIDSet, File empty), Run returns after the first transaction
// after which the executed set contains stop.GTIDSet; for that to be
// reached the reader should start from a GTID set (MySQL sets are tracked
// from the start position's set).
func (r *Reader) StopAt(stop Position) error {
	if stop.File != "" {
		r.stop = &stopper{pos: Position{File: stop.File, Pos: stop.Pos}}
		return nil
	}
	gset, err := mysql.ParseGTIDSet(r.flavor, stop.GTIDSet)
	if err != nil || stop.GTIDSet == "" {
		return fmt.Errorf("%w: stop GTID set %q is not a %s GTID set: %v", ErrStart, stop.GTIDSet, r.flavor, err)
	}
	r.stop = &stopper{gset: gset}
	return nil
}

// step handles one event: it returns the transaction to emit (nil when
// none) and whether the read is done (StopAt reached).
func (r *Reader) step(st *state, ev *replication.BinlogEvent) (*Txn, bool, error) {
	// The event's end position, in the file it was read from (before a
	// rotate event moves st.file on). Artificial events (the rotate and
	// format description sent at the start of a dump, heartbeats of some
	// servers) carry log_pos 0.
	st.fillPos(ev.Header) // MariaDB 11.4+: positions inside a transaction
	at := Position{File: cmp.Or(st.file, st.pos.File), Pos: ev.Header.LogPos}
	txn, err := st.handle(ev, ev.Header)
	if err != nil || r.stop == nil {
		return txn, false, err
	}
	if r.stop.gset != nil {
		if txn != nil && st.gset != nil && st.gset.Contain(r.stop.gset) {
			return txn, true, nil
		}
		return txn, false, nil
	}
	if at.Pos == 0 || at.File == "" || ComparePos(at, r.stop.pos) < 0 {
		return txn, false, nil
	}
	// at >= stop: a transaction completing here is within the range only
	// when it ends exactly at stop.
	if txn != nil && ComparePos(txn.End, r.stop.pos) > 0 {
		txn = nil
	}
	return txn, true, nil
}

// ComparePos orders two file:pos positions of one server: -1 when a is
// before b, 0 when equal, +1 when after. Files compare by the numeric
// extension of their name (mariadb-bin.000009 < mariadb-bin.1000000), or
// as strings when the names do not share a base name. GTID sets are ignored.
func ComparePos(a, b Position) int {
	if c := compareFiles(a.File, b.File); c != 0 {
		return c
	}
	return cmp.Compare(a.Pos, b.Pos)
}

func compareFiles(a, b string) int {
	if a == b {
		return 0
	}
	ia, ib := strings.LastIndexByte(a, '.'), strings.LastIndexByte(b, '.')
	if ia >= 0 && ib >= 0 && a[:ia] == b[:ib] {
		na, errA := strconv.ParseUint(a[ia+1:], 10, 64)
		nb, errB := strconv.ParseUint(b[ib+1:], 10, 64)
		if errA == nil && errB == nil {
			return cmp.Compare(na, nb)
		}
	}
	return strings.Compare(a, b)
}

// CheckRange checks the range of a bounded read from from to to against
// end, the binlog's current end (Server.Latest): to must be after from and
// neither may be after end. Positions compare by file:pos when both have a
// file, by GTID set (in flavor's syntax) when both have only a set; a
// file:pos and a GTID set cannot be compared and pass. Failures wrap ErrRange.
func CheckRange(flavor string, from, to, end Position) error {
	if from.File != "" && end.File != "" && ComparePos(from, end) > 0 {
		return fmt.Errorf("%w: start %s is after the end of the binlog (%s)", ErrRange, from.FilePos(), end.FilePos())
	}
	if to.File != "" && end.File != "" && ComparePos(to, end) > 0 {
		return fmt.Errorf("%w: end %s is after the end of the binlog (%s): not written yet", ErrRange, to.FilePos(), end.FilePos())
	}
	switch {
	case from.File != "" && to.File != "":
		if ComparePos(to, from) <= 0 {
			return fmt.Errorf("%w: end %s is not after start %s", ErrRange, to.FilePos(), from.FilePos())
		}
	case from.File == "" && to.File == "" && from.GTIDSet != "" && to.GTIDSet != "":
		fs, err := mysql.ParseGTIDSet(flavor, from.GTIDSet)
		if err != nil {
			return fmt.Errorf("%w: start GTID set %q: %v", ErrRange, from.GTIDSet, err)
		}
		ts, err := mysql.ParseGTIDSet(flavor, to.GTIDSet)
		if err != nil {
			return fmt.Errorf("%w: end GTID set %q: %v", ErrRange, to.GTIDSet, err)
		}
		if fs.Contain(ts) {
			return fmt.Errorf("%w: end gtid:%s is not after start gtid:%s (the start already contains it)", ErrRange, to.GTIDSet, from.GTIDSet)
		}
		if end.GTIDSet != "" {
			if es, err := mysql.ParseGTIDSet(flavor, end.GTIDSet); err == nil && !es.Contain(ts) {
				return fmt.Errorf("%w: end gtid:%s is not in the server's executed set %s: not written yet", ErrRange, to.GTIDSet, end.GTIDSet)
			}
		}
	}
	return nil
}
