package binlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// maxEventSize bounds the size of one binlog event read from a file. The
// server never writes an event larger than max_allowed_packet (at most
// 1 GiB) plus its header; a larger size field is corruption.
const maxEventSize = 1<<30 + 1<<20

// FileConfig configures a FileReader.
type FileConfig struct {
	// Schema and Table name the outbox table.
	Schema, Table string
	// Flavor is "mysql", "mariadb" or empty to take it from the first
	// file's format description event (its server version).
	Flavor string
	// Columns are the outbox table's column names in ordinal order (see
	// ColumnsFromCreateTable). They are used only for table map events that
	// carry no column names (binlog_row_metadata=MINIMAL, MySQL < 8.0.1);
	// when neither is available, reading fails with ErrNoColumns.
	Columns []string
	// Start is where to start: File is the base name of one of the files,
	// Pos the offset of a transaction boundary in it (as in a checkpoint or
	// a Txn's End), and GTIDSet the GTID set executed before it. The zero
	// value starts at the beginning of the first file.
	Start Position
	// End, when its File is set, stops reading before the first event that
	// begins at or after End.File:End.Pos. A transaction that End cuts is
	// not emitted. The zero value reads to the end of the last file.
	End Position
	// TxnBuffer is the capacity of the Txns channel (default 256).
	TxnBuffer int
	// Tables, when set, are the outbox tables to read (NewTableSet, as the
	// Reader's); nil: Schema.Table with the im preset.
	Tables *TableSet
}

// FileResult says how far a FileReader got.
type FileResult struct {
	// Txns and Events count what was emitted.
	Txns, Events int
	// End is the end of the last emitted transaction (a resumable
	// position), or the start position when none was emitted.
	End Position
	// StopFile and StopOffset name where reading stopped: the end of the
	// last file, the configured End, or the start of a truncated event.
	StopFile   string
	StopOffset int64
	// AtEnd is true when reading stopped at the configured End.
	AtEnd bool
	// Truncated is non-nil when the last file ends inside an event (a copy
	// taken while the server was writing) or inside a transaction. Its Err
	// wraps ErrTruncated; it names the file and offset where the data
	// stops. Everything before End was emitted; what follows was not.
	Truncated *FileError
}

// FileError is an error about one binlog file, at a byte offset of it (the
// start of the event concerned).
type FileError struct {
	File   string
	Offset int64
	Err    error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("binlog file %s offset %d: %v", e.File, e.Offset, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// FileReader reads transactions from binlog files on disk (archived
// binlogs, a backup) instead of a replication connection. It frames them
// with the same state machine as Reader, so the Txn values, their events
// and their positions (file base name, end_log_pos, GTIDs) are those the
// live Reader produces for the same binlog. Create it with NewFileReader
// and read Txns() while Run runs; after Run returns, Result says where it
// stopped.
//
// Files are read in the given order; a rotate event at the end of a file
// must name the next file. Decoding failures, including panics inside the
// go-mysql decoder, are returned as *FileError naming the file and the
// offset of the event. A last file that really ends early (inside an
// event whose header is consistent, or inside a transaction) ends the read
// cleanly after the last complete transaction (Run returns nil,
// Result().Truncated says where). Damage is an error wrapping
// ErrCorruptEvent: an event whose recorded end (end_log_pos) is not its
// offset plus its size (an event removed or resized before it, a corrupt
// size field), a CRC32 mismatch, an event type that is neither framed nor
// deliberately ignored (see eventKinds; unless LOG_EVENT_IGNORABLE_F), a
// transaction opening while the previous one has no commit event. A file
// that ends before its format description event does is an error wrapping
// ErrTruncated, also when it is the last.
type FileReader struct {
	paths []string
	cfg   FileConfig
	log   *zap.Logger
	out   chan Txn
	res   FileResult

	// parserHook, when set (tests), adjusts the go-mysql parser.
	parserHook func(*replication.BinlogParser)
	// slowRows (tests) decodes every rows event with go-mysql, as before
	// the fast path (fastrows.go), to compare the two.
	slowRows bool
	decoders []*rowsDecoder // the fast decoders of the files read (tests)
	set      *TableSet
}

// tables returns the outbox tables read (FileConfig.Tables or the single
// im table).
func (fr *FileReader) tables() *TableSet { return fr.set }

// NewFileReader returns a FileReader over paths, in binlog order (see
// BinlogFiles). It checks the configuration and that cfg.Start and cfg.End
// name files of the list; it opens nothing. log may be nil.
func NewFileReader(paths []string, cfg FileConfig, log *zap.Logger) (*FileReader, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no binlog files given", ErrFileOrder)
	}
	if (cfg.Table == "" || cfg.Schema == "") && cfg.Tables == nil {
		return nil, fmt.Errorf("%w: schema and table of the outbox table are required", ErrFileOrder)
	}
	switch cfg.Flavor {
	case "", FlavorMySQL, FlavorMariaDB:
	default:
		return nil, fmt.Errorf("%w: flavor %q: want mysql, mariadb or empty to detect", ErrFileOrder, cfg.Flavor)
	}
	if cfg.TxnBuffer < 1 {
		cfg.TxnBuffer = 256
	}
	r := &FileReader{paths: paths, cfg: cfg, log: log.Named("binlog-file"), out: make(chan Txn, cfg.TxnBuffer), set: cfg.Tables}
	if r.set == nil {
		r.set = defaultTables(Config{Schema: cfg.Schema, Table: cfg.Table})
	}
	first, last := 0, len(paths)-1
	if cfg.Start.File != "" {
		if first = r.index(cfg.Start.File); first < 0 {
			return nil, fmt.Errorf("%w: start file %s is not among the binlog files (%s … %s)", ErrStart, cfg.Start.File, filepath.Base(paths[0]), filepath.Base(paths[last]))
		}
	}
	if cfg.End.File != "" {
		if last = r.index(cfg.End.File); last < first {
			return nil, fmt.Errorf("%w: end file %s is not among the binlog files at or after the start", ErrStart, cfg.End.File)
		}
	}
	return r, nil
}

func (r *FileReader) index(base string) int {
	for i, p := range r.paths {
		if filepath.Base(p) == base {
			return i
		}
	}
	return -1
}

// Txns returns the channel of committed transactions, in binlog order. It
// is closed when Run returns.
func (r *FileReader) Txns() <-chan Txn { return r.out }

// Result returns where reading stopped. Call it after Run returned.
func (r *FileReader) Result() FileResult { return r.res }

// Run reads the files and sends each complete transaction to Txns. It
// returns nil at the end of the last file (or at cfg.End, or after a
// truncated last file: see Result), when ctx is cancelled, or the first
// error, a *FileError naming the file and offset.
func (r *FileReader) Run(ctx context.Context) error {
	defer close(r.out)
	fr := r.newRun(ctx)
	for i, path := range r.paths {
		base := filepath.Base(path)
		if r.cfg.Start.File != "" && i < r.index(r.cfg.Start.File) {
			continue
		}
		last := i == len(r.paths)-1 || base == r.cfg.End.File
		f, err := os.Open(path)
		if err != nil {
			return &FileError{File: base, Err: err}
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return &FileError{File: base, Err: err}
		}
		done, err := fr.readFile(base, bufio.NewReaderSize(f, 1<<16), fi.Size(), last)
		f.Close()
		if err != nil || done || base == r.cfg.End.File {
			return err
		}
	}
	return nil
}

// fileRun is the state of one Run.
type fileRun struct {
	ctx      context.Context
	r        *FileReader
	parser   *replication.BinlogParser
	st       *state
	flavor   string
	rotateTo string                // NextLogName of the rotate event that ended the previous file
	started  bool                  // a file was opened
	checksum bool                  // the current file's events end with a CRC32
	curType  replication.EventType // type of the event being decoded
}

func (r *FileReader) newRun(ctx context.Context) *fileRun {
	r.res = FileResult{End: r.cfg.Start}
	return &fileRun{ctx: ctx, r: r, flavor: r.cfg.Flavor}
}

// newParser returns a parser set up as Reader's BinlogSyncer sets up its
// own, so rows decode to the same Go values. Checksums are verified by
// verifyChecksum, not by go-mysql (which rejects the format description
// event of every cleanly closed file, see verifyChecksum).
func (fr *fileRun) newParser() *replication.BinlogParser {
	p := replication.NewBinlogParser()
	p.SetRenderJSONAsMySQLText(true)
	p.SetParseTime(true)                   // as Reader: DATETIME/TIMESTAMP as time.Time
	p.SetTimestampStringLocation(time.UTC) // as Reader: TIMESTAMP text in UTC
	dec := newRowsDecoder(fr.r.tables())
	fr.r.decoders = append(fr.r.decoders, dec)
	p.SetRowsEventDecodeFunc(func(e *replication.RowsEvent, data []byte) error {
		if fr.r.slowRows {
			pos, err := e.DecodeHeader(data)
			if err != nil {
				return err
			}
			return decodeRowsGuarded(e, data, pos, fr.curType)
		}
		return dec.decodeWith(e, data, func(pos int) error { return decodeRowsGuarded(e, data, pos, fr.curType) })
	})
	p.SetFlavor(fr.flavor)
	if fr.r.parserHook != nil {
		fr.r.parserHook(p)
	}
	return p
}

// readFile reads one file from its magic number to its end. size is the
// file's length. It returns done when reading must stop (cfg.End reached,
// or the context was cancelled).
func (fr *fileRun) readFile(base string, rd io.Reader, size int64, last bool) (done bool, err error) {
	r := fr.r
	ferr := func(off int64, err error) *FileError { return &FileError{File: base, Offset: off, Err: err} }
	stop := func(off int64) {
		r.res.StopFile, r.res.StopOffset = base, off
	}
	truncated := func(off int64, format string, a ...any) (bool, error) {
		e := ferr(off, fmt.Errorf("%w: %s", ErrTruncated, fmt.Sprintf(format, a...)))
		if !last {
			return true, e
		}
		r.res.Truncated = e
		stop(off)
		r.log.Warn("binlog file ends early; stopped after the last complete transaction",
			zap.String("file", base), zap.Int64("offset", off), zap.String("end", r.res.End.FilePos()), zap.Error(e.Err))
		return true, nil
	}

	if fr.started && fr.rotateTo != "" && fr.rotateTo != base {
		return true, ferr(0, fmt.Errorf("%w: the previous file ends with a rotate to %s, but the next file given is %s; pass the files in binlog index order without gaps", ErrFileOrder, fr.rotateTo, base))
	}
	// A file that ends before its format description event has nothing
	// that can be read, not even its format: an error, not a truncated
	// backup with nothing to replay.
	noFDE := func(off int64, format string, a ...any) (bool, error) {
		return true, ferr(off, errNoFDE(fmt.Sprintf(format, a...)))
	}
	var magic [4]byte
	if n, err := io.ReadFull(rd, magic[:]); err != nil {
		if bytes.Equal(magic[:n], replication.BinLogFileHeader[:n]) {
			return noFDE(0, "the file ends inside the 4-byte magic number (%d bytes)", n)
		}
		return true, ferr(0, fmt.Errorf("%w: %v", ErrNotBinlog, err))
	}
	if !bytes.Equal(magic[:], replication.BinLogFileHeader) {
		return true, ferr(0, fmt.Errorf("%w: magic number %x, want fe62696e", ErrNotBinlog, magic))
	}
	// A new file has its own format description event: parse it with a
	// fresh parser (table maps do not cross files).
	fr.parser = fr.newParser()
	fr.checksum = false
	sawFDE := false
	startPos := int64(4)
	if r.cfg.Start.File == base && r.cfg.Start.Pos > 4 {
		startPos = int64(r.cfg.Start.Pos)
	}
	endPos := int64(-1)
	if r.cfg.End.File == base {
		endPos = int64(r.cfg.End.Pos)
	}
	if fr.started && fr.st != nil {
		// The server sends a fake rotate event naming the file it
		// continues with; so does this reader.
		if _, err := fr.handle(&replication.BinlogEvent{
			Header: &replication.EventHeader{EventType: replication.ROTATE_EVENT},
			Event:  &replication.RotateEvent{Position: 4, NextLogName: []byte(base)},
		}, base, 4); err != nil {
			return true, err
		}
	}
	fr.started = true
	fr.rotateTo = ""

	var hdr [replication.EventHeaderSize]byte
	buf := make([]byte, 0, 1<<12)
	off := int64(4)
	for {
		if fr.ctx.Err() != nil {
			stop(off)
			return true, nil
		}
		if endPos >= 0 && off >= endPos {
			stop(off)
			r.res.AtEnd = true
			return true, nil
		}
		n, err := io.ReadFull(rd, hdr[:])
		if err == io.EOF && !sawFDE {
			return noFDE(off, "the file ends at %d", off)
		}
		if err == io.EOF {
			break
		}
		if err == io.ErrUnexpectedEOF {
			if !sawFDE {
				return noFDE(off, "the file ends inside the first event header (%d of %d bytes)", n, replication.EventHeaderSize)
			}
			return truncated(off, "event header: %d of %d bytes", n, replication.EventHeaderSize)
		}
		if err != nil {
			return true, ferr(off, err)
		}
		evSize := int64(binary.LittleEndian.Uint32(hdr[9:13]))
		typ := replication.EventType(hdr[4])
		if evSize < replication.EventHeaderSize || evSize > maxEventSize {
			return true, ferr(off, fmt.Errorf("%w: event size %d out of range [%d, %d]", ErrCorruptEvent, evSize, replication.EventHeaderSize, maxEventSize))
		}
		// Every event records where it ends (end_log_pos): in the file's
		// own coordinates it is its offset plus its size. A mismatch is a
		// removed or resized event before it, or a corrupt header (the
		// size field included), not a file that ends early. Events copied
		// from another server (a relay log: after a rotate naming another
		// file) carry that server's positions and are not checked.
		if logPos := int64(binary.LittleEndian.Uint32(hdr[13:17])); logPos != 0 && logPos != off+evSize && fr.ownPositions(base) {
			return true, ferr(off, fmt.Errorf("%w: the %s event at %d records end_log_pos %d, but its size field (%d bytes) makes it end at %d: an event before it was removed or resized, or its header is corrupt",
				ErrCorruptEvent, typ, off, logPos, evSize, off+evSize))
		}
		if size >= 0 && off+evSize > size {
			if !sawFDE {
				return noFDE(off, "event of %d bytes, the file has %d left", evSize, size-off)
			}
			return truncated(off, "event of %d bytes, the file has %d left", evSize, size-off)
		}
		if int64(cap(buf)) < evSize {
			buf = make([]byte, evSize)
		}
		buf = buf[:evSize]
		copy(buf, hdr[:])
		if n, err := io.ReadFull(rd, buf[len(hdr):]); err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return truncated(off, "event of %d bytes, %d read", evSize, int64(n)+int64(len(hdr)))
			}
			return true, ferr(off, err)
		}
		if !sawFDE && typ != replication.FORMAT_DESCRIPTION_EVENT {
			return true, ferr(off, fmt.Errorf("%w: first event is %s, want FORMAT_DESCRIPTION_EVENT (binlog format v4, MySQL 5.0+ / MariaDB)", ErrCorruptEvent, typ))
		}
		if off < startPos {
			// Before the start position: only the format description
			// event is decoded; the rest is skipped.
			if off+evSize > startPos {
				return true, ferr(off, fmt.Errorf("%w: start position %s:%d is inside the event at %d (size %d): not an event boundary", ErrStart, base, startPos, off, evSize))
			}
			if typ != replication.FORMAT_DESCRIPTION_EVENT {
				off += evSize
				continue
			}
		}
		if fr.checksum && typ != replication.FORMAT_DESCRIPTION_EVENT {
			if err := verifyChecksum(buf); err != nil {
				return true, ferr(off, err)
			}
		}
		if kind := eventKinds[typ]; kind == kindUnknown {
			if binary.LittleEndian.Uint16(hdr[17:19])&replication.LOG_EVENT_IGNORABLE_F != 0 {
				// MySQL's rule: an event a reader does not know may be
				// skipped when it says it can be (Log_event::LOG_EVENT_IGNORABLE_F).
				off += evSize
				buf = buf[:0]
				continue
			}
			inTxn := ""
			if fr.st != nil && fr.st.inTxn {
				inTxn = fmt.Sprintf(" inside the transaction that began at %d (its outbox rows would be lost)", fr.st.txnStart)
			}
			return true, ferr(off, fmt.Errorf("%w: unknown event type %d%s: the file is corrupt or from a server version this reader does not know; nothing after %s was read",
				ErrCorruptEvent, byte(typ), inTxn, r.res.End.FilePos()))
		}
		fr.curType = typ
		if typ == replication.MARIADB_QUERY_COMPRESSED_EVENT {
			body := buf[replication.EventHeaderSize:]
			if fr.checksum {
				body = body[:len(body)-replication.BinlogChecksumLength]
			}
			if err := checkCompressedQuery(body); err != nil {
				return true, ferr(off, err)
			}
		}
		ev, err := fr.parse(buf)
		if err != nil {
			return true, ferr(off, err)
		}
		if fde, ok := ev.Event.(*replication.FormatDescriptionEvent); ok {
			sawFDE = true
			fr.checksum = fde.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32
			if fr.checksum {
				if err := verifyChecksum(buf); err != nil {
					return true, ferr(off, err)
				}
			}
			if err := fr.init(fde); err != nil {
				return true, ferr(off, err)
			}
		}
		if off >= startPos {
			if re, ok := ev.Event.(*replication.RotateEvent); ok {
				fr.rotateTo = string(re.NextLogName)
			} else {
				fr.rotateTo = ""
			}
			if _, err := fr.handle(ev, base, off); err != nil {
				return true, err
			}
		}
		off += evSize
		buf = buf[:0]
	}
	if off < startPos {
		return true, ferr(off, fmt.Errorf("%w: start position %s:%d is past the end of the file (%d bytes)", ErrStart, base, startPos, off))
	}
	stop(off)
	if last && fr.st != nil && (fr.st.inTxn || len(fr.st.events) > 0 || fr.st.gtid != "") {
		r.res.Truncated = ferr(off, fmt.Errorf("%w: the file ends inside a transaction that began after %s", ErrTruncated, r.res.End.FilePos()))
		r.log.Warn("last binlog file ends inside a transaction; stopped after the last complete one",
			zap.String("file", base), zap.Int64("offset", off), zap.String("end", r.res.End.FilePos()))
	}
	return false, nil
}

// maxUncompressed bounds the declared uncompressed size of a MariaDB
// compressed event; the server never writes more than max_allowed_packet.
const maxUncompressed = 1 << 30

// decodeRowsGuarded decodes a rows event as go-mysql does (DecodeHeader,
// then DecodeData), refusing first what would make DecodeData loop
// forever or allocate without bound on corrupt input: row data when no
// column is in the event's bitmaps (each row image would then consume no
// byte), and a compressed body declaring more than maxUncompressed bytes.
func decodeRowsGuarded(e *replication.RowsEvent, data []byte, pos int, typ replication.EventType) error {
	if pos >= len(data) {
		return e.DecodeData(pos, data)
	}
	switch typ {
	case replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1, replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1,
		replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
		if n, ok := mariadbUncompressedSize(data[pos:]); !ok || n > maxUncompressed {
			return fmt.Errorf("compressed rows event declares %d uncompressed bytes (more than %d, or a bad header)", n, maxUncompressed)
		}
	case replication.PARTIAL_UPDATE_ROWS_EVENT:
		// Each after image starts with a length-encoded integer: progress.
		return e.DecodeData(pos, data)
	}
	cols := int(e.ColumnCount)
	if !anyBit(e.ColumnBitmap1, cols) && !anyBit(e.ColumnBitmap2, cols) {
		return fmt.Errorf("rows event: no column in its bitmaps but %d bytes of row data", len(data)-pos)
	}
	return e.DecodeData(pos, data)
}

// anyBit reports whether one of the first n bits of bitmap is set.
func anyBit(bitmap []byte, n int) bool {
	for i := 0; i < n && i>>3 < len(bitmap); i++ {
		if bitmap[i>>3]&(1<<(uint(i)&7)) != 0 {
			return true
		}
	}
	return false
}

// mariadbUncompressedSize reads the header of MariaDB's compressed event
// data (mysql.DecompressMariadbData): one byte whose low 3 bits give the
// length of the big-endian uncompressed size that follows.
func mariadbUncompressedSize(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	h := int(b[0] & 0x07)
	if h == 0 || len(b) < 1+h {
		return 0, false
	}
	var n uint64
	for _, c := range b[1 : 1+h] {
		n = n<<8 | uint64(c)
	}
	return n, true
}

// checkCompressedQuery refuses a MARIADB_QUERY_COMPRESSED_EVENT whose
// compressed query declares more than maxUncompressed bytes, before
// go-mysql allocates them. body is the event without header and checksum.
func checkCompressedQuery(body []byte) error {
	// Post-header: thread id 4, exec time 4, schema length 1, error code 2,
	// status variables length 2; then status variables, schema, NUL.
	if len(body) < 13 {
		return nil // go-mysql reports it
	}
	q := 13 + int(binary.LittleEndian.Uint16(body[11:13])) + int(body[8]) + 1
	if q >= len(body) {
		return nil
	}
	if n, ok := mariadbUncompressedSize(body[q:]); !ok || n > maxUncompressed {
		return fmt.Errorf("%w: compressed query declares %d uncompressed bytes (more than %d, or a bad header)", ErrCorruptEvent, n, maxUncompressed)
	}
	return nil
}

// verifyChecksum checks the CRC32 at the end of an event. The server
// computes the format description event's checksum with the
// LOG_EVENT_BINLOG_IN_USE_F header flag as it was when the event was
// written, then clears the flag in place when it closes the file (MySQL
// binlog.cc, MariaDB log.cc), so for that event both states are tried.
func verifyChecksum(ev []byte) error {
	if len(ev) < replication.EventHeaderSize+replication.BinlogChecksumLength {
		return fmt.Errorf("%w: event of %d bytes has no room for its checksum", ErrCorruptEvent, len(ev))
	}
	body, sum := ev[:len(ev)-replication.BinlogChecksumLength], binary.LittleEndian.Uint32(ev[len(ev)-replication.BinlogChecksumLength:])
	if crc32.ChecksumIEEE(body) == sum {
		return nil
	}
	if replication.EventType(ev[4]) == replication.FORMAT_DESCRIPTION_EVENT {
		flipped := bytes.Clone(body)
		flipped[17] ^= byte(replication.LOG_EVENT_BINLOG_IN_USE_F)
		if crc32.ChecksumIEEE(flipped) == sum {
			return nil
		}
	}
	return fmt.Errorf("%w: %s event: CRC32 checksum mismatch", ErrCorruptEvent, replication.EventType(ev[4]))
}

// Event kinds of the file reader: every event type it may meet is either
// framed (decoded and passed to the state machine: transactions, rows,
// GTIDs, rotations) or deliberately ignored (it carries nothing the
// publisher needs: session variables of statement-based logging, GTID
// bookkeeping, annotations, heartbeats, statement-based LOAD DATA of other
// tables, an incident marker, which the server follows with a rotate).
// Any other type is fatal unless flagged LOG_EVENT_IGNORABLE_F.
type eventKind uint8

const (
	kindUnknown eventKind = iota
	kindFramed
	kindIgnored
)

var eventKinds = func() map[replication.EventType]eventKind {
	m := map[replication.EventType]eventKind{}
	for _, t := range []replication.EventType{
		replication.FORMAT_DESCRIPTION_EVENT, replication.ROTATE_EVENT, replication.QUERY_EVENT, replication.XID_EVENT,
		replication.TABLE_MAP_EVENT, replication.WRITE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv0,
		replication.WRITE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv1,
		replication.WRITE_ROWS_EVENTv2, replication.UPDATE_ROWS_EVENTv2, replication.DELETE_ROWS_EVENTv2, replication.PARTIAL_UPDATE_ROWS_EVENT,
		replication.GTID_EVENT, replication.ANONYMOUS_GTID_EVENT, replication.GTID_TAGGED_LOG_EVENT, replication.XA_PREPARE_LOG_EVENT,
		replication.TRANSACTION_PAYLOAD_EVENT, replication.MARIADB_GTID_EVENT, replication.MARIADB_GTID_LIST_EVENT,
		replication.MARIADB_QUERY_COMPRESSED_EVENT, replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1,
		replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1, replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1,
	} {
		m[t] = kindFramed
	}
	for _, t := range []replication.EventType{
		replication.START_EVENT_V3, replication.STOP_EVENT, replication.INTVAR_EVENT, replication.RAND_EVENT, replication.USER_VAR_EVENT,
		replication.LOAD_EVENT, replication.SLAVE_EVENT, replication.CREATE_FILE_EVENT, replication.APPEND_BLOCK_EVENT,
		replication.EXEC_LOAD_EVENT, replication.DELETE_FILE_EVENT, replication.NEW_LOAD_EVENT, replication.BEGIN_LOAD_QUERY_EVENT,
		replication.EXECUTE_LOAD_QUERY_EVENT, replication.INCIDENT_EVENT, replication.HEARTBEAT_EVENT, replication.HEARTBEAT_LOG_EVENT_V2,
		replication.IGNORABLE_EVENT, replication.ROWS_QUERY_EVENT, replication.PREVIOUS_GTIDS_EVENT, replication.TRANSACTION_CONTEXT_EVENT,
		replication.VIEW_CHANGE_EVENT, replication.MARIADB_ANNOTATE_ROWS_EVENT, replication.MARIADB_BINLOG_CHECKPOINT_EVENT,
		replication.MARIADB_START_ENCRYPTION_EVENT,
	} {
		m[t] = kindIgnored
	}
	return m
}()

// ownPositions reports whether the events of file base carry positions in
// its own coordinates: true unless a rotate event in it named another file
// (a relay log, whose events keep the source server's positions).
func (fr *fileRun) ownPositions(base string) bool {
	return fr.st == nil || fr.st.file == "" || fr.st.file == base
}

// init sets the flavor from the first format description event and
// creates the framing state.
func (fr *fileRun) init(fde *replication.FormatDescriptionEvent) error {
	if fr.flavor == "" {
		fr.flavor = FlavorMySQL
		if strings.Contains(strings.ToLower(fde.ServerVersion), "mariadb") {
			fr.flavor = FlavorMariaDB
		}
		fr.parser.SetFlavor(fr.flavor)
	}
	if fr.st != nil {
		return nil
	}
	cfg := fr.r.cfg
	gset, err := mysql.ParseGTIDSet(fr.flavor, cfg.Start.GTIDSet)
	if err != nil {
		return fmt.Errorf("%w: start GTID set %q: %v", ErrStart, cfg.Start.GTIDSet, err)
	}
	start := cfg.Start
	if start.File == "" {
		start.File = filepath.Base(fr.r.paths[0])
	}
	if start.Pos < 4 {
		start.Pos = 4
	}
	fr.r.res.End = start
	fr.st = &state{
		r: &Reader{
			cfg: Config{Schema: cfg.Schema, Table: cfg.Table}, flavor: fr.flavor, columns: cfg.Columns,
			log: fr.r.log, tables: fr.r.tables(),
		},
		pos:    start,
		opened: start.Opened,
		gset:   gset,
	}
	return nil
}

// parse decodes one event, turning a panic of the decoder into an error.
func (fr *fileRun) parse(data []byte) (ev *replication.BinlogEvent, err error) {
	defer func() {
		if p := recover(); p != nil {
			ev, err = nil, fmt.Errorf("%w: %s event: go-mysql decoder panicked: %v", ErrCorruptEvent, replication.EventType(data[4]), p)
		}
	}()
	// go-mysql keeps references to the buffer (RawData, row values): give
	// it its own copy.
	ev, err = fr.parser.Parse(bytes.Clone(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %s event: %v", ErrCorruptEvent, replication.EventType(data[4]), err)
	}
	return ev, nil
}

// handle passes one event to the framing state machine and emits the
// transaction it completes.
func (fr *fileRun) handle(ev *replication.BinlogEvent, base string, off int64) (txn *Txn, err error) {
	st := fr.st
	if st == nil {
		return nil, nil
	}
	cfg := fr.r.cfg
	if e, ok := ev.Event.(*replication.RowsEvent); ok && e.Table != nil && isWriteRows(ev.Header.EventType) &&
		fr.r.tables().entry(e.Table.Schema, e.Table.Table) >= 0 &&
		len(e.Table.ColumnName) == 0 && len(cfg.Columns) == 0 {
		return nil, &FileError{File: base, Offset: off, Err: fmt.Errorf("%w: the table map of %s.%s carries no column names (written with binlog_row_metadata=MINIMAL or by MySQL < 8.0.1) and FileConfig.Columns is empty: set the columns in ordinal order, e.g. with ColumnsFromCreateTable on the table's CREATE TABLE",
			ErrNoColumns, cfg.Schema, cfg.Table)}
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%w: %s event: framing panicked: %v", ErrCorruptEvent, ev.Header.EventType, p)
			}
		}()
		txn, err = st.handle(ev, ev.Header)
	}()
	if err != nil {
		return nil, &FileError{File: base, Offset: off, Err: err}
	}
	if txn == nil {
		return nil, nil
	}
	select {
	case fr.r.out <- *txn:
	case <-fr.ctx.Done():
		return nil, nil
	}
	fr.r.res.Txns++
	fr.r.res.Events += len(txn.Events)
	fr.r.res.End = txn.End
	return txn, nil
}

// ReadFiles reads paths with a FileReader and returns all transactions.
// It suits small inputs and tests; stream with FileReader otherwise.
func ReadFiles(ctx context.Context, paths []string, cfg FileConfig, log *zap.Logger) ([]Txn, FileResult, error) {
	r, err := NewFileReader(paths, cfg, log)
	if err != nil {
		return nil, FileResult{}, err
	}
	var txns []Txn
	var g errgroup.Group
	g.Go(func() error {
		for t := range r.Txns() {
			txns = append(txns, t)
		}
		return nil
	})
	err = r.Run(ctx)
	_ = g.Wait()
	return txns, r.Result(), err
}

// BinlogFiles lists binlog files in binlog index order. pattern is a
// directory (every file whose name ends in a numeric extension, such as
// mariadb-bin.000042; index files are skipped) or a glob
// (filepath.Match syntax). Files are ordered by base name, then by the
// numeric value of the extension, so .999999 sorts before .1000000. A
// directory holding binlogs of several base names is an error: pass a glob.
func BinlogFiles(pattern string) ([]string, error) {
	var paths []string
	if fi, err := os.Stat(pattern); err == nil && fi.IsDir() {
		entries, err := os.ReadDir(pattern)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrFileOrder, err)
		}
		bases := map[string]bool{}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			b, _, ok := splitBinlogName(e.Name())
			if !ok {
				continue
			}
			bases[b] = true
			paths = append(paths, filepath.Join(pattern, e.Name()))
		}
		if len(bases) > 1 {
			names := make([]string, 0, len(bases))
			for b := range bases {
				names = append(names, b)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("%w: %s holds binlogs of several base names (%s): pass a glob such as %s",
				ErrFileOrder, pattern, strings.Join(names, ", "), filepath.Join(pattern, names[0]+".*"))
		}
	} else {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrFileOrder, pattern, err)
		}
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && !strings.HasSuffix(p, ".index") {
				paths = append(paths, p)
			}
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no binlog files match %q", ErrFileOrder, pattern)
	}
	sort.SliceStable(paths, func(i, j int) bool {
		bi, ni, oki := splitBinlogName(filepath.Base(paths[i]))
		bj, nj, okj := splitBinlogName(filepath.Base(paths[j]))
		if oki && okj {
			if bi != bj {
				return bi < bj
			}
			return ni < nj
		}
		return filepath.Base(paths[i]) < filepath.Base(paths[j])
	})
	return paths, nil
}

// splitBinlogName splits "mariadb-bin.000042" into "mariadb-bin" and 42.
func splitBinlogName(name string) (base string, n uint64, ok bool) {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || i == len(name)-1 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(name[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return name[:i], n, true
}

// ColumnsFromCreateTable returns the column names, in order, of the
// CREATE TABLE statement for table in ddl (a schema file may hold several
// statements; table may be qualified by schema or not). It understands
// what schema/*.sql use: backquoted or plain names, comments, quoted
// strings, and index/constraint clauses, which it skips.
func ColumnsFromCreateTable(ddl, table string) ([]string, error) {
	toks := sqlTokens(ddl)
	for i := 0; i+2 < len(toks); i++ {
		if !strings.EqualFold(toks[i], "CREATE") {
			continue
		}
		j := i + 1
		if strings.EqualFold(toks[j], "TEMPORARY") {
			j++
		}
		if j >= len(toks) || !strings.EqualFold(toks[j], "TABLE") {
			continue
		}
		j++
		if j+2 < len(toks) && strings.EqualFold(toks[j], "IF") && strings.EqualFold(toks[j+1], "NOT") && strings.EqualFold(toks[j+2], "EXISTS") {
			j += 3
		}
		if j >= len(toks) {
			break
		}
		name := unquoteIdent(toks[j])
		j++
		if j+1 < len(toks) && toks[j] == "." {
			name = unquoteIdent(toks[j+1])
			j += 2
		}
		if !strings.EqualFold(name, table) || j >= len(toks) || toks[j] != "(" {
			continue
		}
		var cols []string
		depth, first := 0, true
		for j++; j < len(toks); j++ {
			t := toks[j]
			switch {
			case t == "(":
				depth++
			case t == ")" && depth == 0:
				if len(cols) == 0 {
					return nil, fmt.Errorf("%w: CREATE TABLE %s has no columns", ErrNoColumns, table)
				}
				return cols, nil
			case t == ")":
				depth--
			case t == "," && depth == 0:
				first = true
			case first:
				first = false
				switch strings.ToUpper(t) {
				case "PRIMARY", "KEY", "INDEX", "UNIQUE", "CONSTRAINT", "FOREIGN", "FULLTEXT", "SPATIAL", "CHECK", "PERIOD":
				default:
					cols = append(cols, unquoteIdent(t))
				}
			}
		}
		return nil, fmt.Errorf("%w: CREATE TABLE %s is not terminated", ErrNoColumns, table)
	}
	return nil, fmt.Errorf("%w: no CREATE TABLE %s found", ErrNoColumns, table)
}

// sqlTokens splits SQL into identifiers/words, quoted strings and single
// punctuation characters, dropping comments and whitespace.
func sqlTokens(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && strings.HasPrefix(s[i:], "--") || c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			if k := strings.Index(s[i+2:], "*/"); k >= 0 {
				i += k + 4
			} else {
				i = len(s)
			}
		case c == '\'' || c == '"' || c == '`':
			k := i + 1
			for k < len(s) {
				if s[k] == '\\' && c != '`' {
					k += 2
					continue
				}
				if s[k] == c {
					if k+1 < len(s) && s[k+1] == c { // doubled quote
						k += 2
						continue
					}
					break
				}
				k++
			}
			if k >= len(s) {
				k = len(s) - 1
			}
			toks = append(toks, s[i:k+1])
			i = k + 1
		case isWordByte(c):
			k := i
			for k < len(s) && isWordByte(s[k]) {
				k++
			}
			toks = append(toks, s[i:k])
			i = k
		default:
			toks = append(toks, s[i:i+1])
			i++
		}
	}
	return toks
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func unquoteIdent(t string) string {
	if len(t) >= 2 && t[0] == '`' && t[len(t)-1] == '`' {
		return strings.ReplaceAll(t[1:len(t)-1], "``", "`")
	}
	return t
}
