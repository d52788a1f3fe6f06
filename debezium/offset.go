package debezium

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cdc-outbox/cdc-outbox/binlog"
)

// Offset is one stored offset of a Debezium binlog connector.
type Offset struct {
	// Connector is the connector's name (the key's first element) and
	// Server its topic.prefix (the key's "server").
	Connector, Server string
	// File and Pos: the binlog position Debezium restarts at, the start
	// of the transaction it was in (its BEGIN) or, after a commit with
	// nothing to skip, the end of the last transaction.
	File string
	Pos  uint32
	// GTIDs is the GTID set Debezium restarts from (MySQL uuid:1-N,
	// MariaDB domain-server-seq); "" without GTIDs. It excludes the
	// transaction at File:Pos.
	GTIDs string
	// Event and Row: the events and rows of the transaction at File:Pos
	// that Debezium had already processed (skipped on its restart); both
	// 0 when File:Pos is between transactions.
	Event, Row int64
	// ServerID is the source's server_id of the last event; TsSec its
	// timestamp (Unix seconds).
	ServerID uint32
	TsSec    int64
	// Snapshot: the offset was stored while the initial snapshot ran
	// ("snapshot": true or "last_snapshot_record"): streaming never began.
	Snapshot bool
}

// value is the JSON of an offset value (Debezium's BinlogOffsetContext).
type value struct {
	File     string          `json:"file"`
	Pos      *uint64         `json:"pos"`
	GTIDs    string          `json:"gtids"`
	Event    int64           `json:"event"`
	Row      int64           `json:"row"`
	ServerID uint32          `json:"server_id"`
	TsSec    int64           `json:"ts_sec"`
	Snapshot json.RawMessage `json:"snapshot"`
}

// ParseRecord parses one stored offset: key and value are the JSON bytes
// of the offsets topic's record or of an entry of the offset file. A nil
// value (a tombstone: the offset was deleted) gives ok false.
func ParseRecord(key, val []byte) (o Offset, ok bool, err error) {
	var k []json.RawMessage
	if err := json.Unmarshal(key, &k); err != nil || len(k) != 2 {
		return Offset{}, false, fmt.Errorf("%w: key %q: want [\"<connector>\", {\"server\": \"<topic.prefix>\"}]", ErrOffset, key)
	}
	var part struct {
		Server string `json:"server"`
	}
	if err := json.Unmarshal(k[0], &o.Connector); err != nil {
		return Offset{}, false, fmt.Errorf("%w: key %q: the connector name is not a string", ErrOffset, key)
	}
	if err := json.Unmarshal(k[1], &part); err != nil || part.Server == "" {
		return Offset{}, false, fmt.Errorf("%w: key %q: no \"server\" partition: not a Debezium MySQL/MariaDB connector's offset", ErrOffset, key)
	}
	o.Server = part.Server
	if val == nil {
		return o, false, nil
	}
	var v value
	if err := json.Unmarshal(val, &v); err != nil {
		return Offset{}, false, fmt.Errorf("%w: value of %s/%s: %v", ErrOffset, o.Connector, o.Server, err)
	}
	if v.File == "" || v.Pos == nil || *v.Pos > 1<<32-1 {
		return Offset{}, false, fmt.Errorf("%w: value of %s/%s %s: no binlog \"file\" and \"pos\": not a Debezium MySQL/MariaDB connector's offset", ErrOffset, o.Connector, o.Server, val)
	}
	o.File, o.Pos, o.GTIDs, o.Event, o.Row, o.ServerID, o.TsSec = v.File, uint32(*v.Pos), strings.ReplaceAll(strings.TrimSpace(v.GTIDs), "\n", ""), v.Event, v.Row, v.ServerID, v.TsSec
	o.Snapshot = len(v.Snapshot) > 0 && !bytes.Equal(v.Snapshot, []byte("false"))
	return o, true, nil
}

// Java object serialization (Java Object Serialization Specification §6.4).
const (
	tcNull      = 0x70
	tcReference = 0x71
	tcClassDesc = 0x72
	tcObject    = 0x73
	tcArray     = 0x75
	tcBlockData = 0x77
	tcEndBlock  = 0x78
)

// ParseFile parses the file of Kafka Connect's FileOffsetBackingStore
// (offset.storage.file.filename): a Java-serialized
// java.util.HashMap<byte[], byte[]> of JSON keys and values. It returns the
// offsets in the file's order; entries whose value is null are left out.
func ParseFile(b []byte) ([]Offset, error) {
	r := &javaReader{b: b}
	if len(b) < 4 || binary.BigEndian.Uint16(b) != 0xACED || binary.BigEndian.Uint16(b[2:]) != 5 {
		return nil, fmt.Errorf("%w: not a Kafka Connect offset file (no Java serialization header AC ED 00 05)", ErrOffset)
	}
	r.i = 4
	// TC_OBJECT, the class descriptor of java.util.HashMap, its two
	// fields' values (loadFactor, threshold), then writeObject's block:
	// capacity and size, then size key/value objects.
	if r.byte() != tcObject {
		return nil, r.fail("want an object")
	}
	name := r.classDesc()
	if r.err == nil && name != "java.util.HashMap" {
		return nil, fmt.Errorf("%w: the offset file holds a %s, want a java.util.HashMap", ErrOffset, name)
	}
	r.skip(8) // float loadFactor, int threshold
	if r.byte() != tcBlockData || r.byte() != 8 {
		return nil, r.fail("want HashMap's block of capacity and size")
	}
	r.skip(4)
	n := int(r.int32())
	var out []Offset
	for range n {
		k, v := r.bytes(), r.bytes()
		if r.err != nil {
			break
		}
		o, ok, err := ParseRecord(k, v)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, o)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// javaReader reads the subset of the Java serialization stream that an
// offset file uses: one HashMap object and byte[] arrays (TC_ARRAY with a
// class descriptor "[B" or a back reference to it), or null.
type javaReader struct {
	b   []byte
	i   int
	err error
}

func (r *javaReader) fail(what string) error {
	if r.err == nil {
		r.err = fmt.Errorf("%w: offset file, byte %d: %s (not a Kafka Connect offset file?)", ErrOffset, r.i, what)
	}
	return r.err
}

func (r *javaReader) need(n int) bool {
	if r.err != nil || r.i+n > len(r.b) {
		r.fail("truncated")
		return false
	}
	return true
}

func (r *javaReader) byte() byte {
	if !r.need(1) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *javaReader) skip(n int) {
	if r.need(n) {
		r.i += n
	}
}

func (r *javaReader) int32() int32 {
	if !r.need(4) {
		return 0
	}
	r.i += 4
	return int32(binary.BigEndian.Uint32(r.b[r.i-4:]))
}

func (r *javaReader) utf() string {
	if !r.need(2) {
		return ""
	}
	n := int(binary.BigEndian.Uint16(r.b[r.i:]))
	r.i += 2
	if !r.need(n) {
		return ""
	}
	r.i += n
	return string(r.b[r.i-n : r.i])
}

// classDesc reads a TC_CLASSDESC after its tag: name, serialVersionUID,
// flags, the fields, the annotation's end and the superclass (TC_NULL);
// it returns the class name.
func (r *javaReader) classDesc() string {
	if r.byte() != tcClassDesc {
		r.fail("want a class descriptor")
		return ""
	}
	name := r.utf()
	r.skip(8 + 1) // serialVersionUID, flags
	if !r.need(2) {
		return ""
	}
	fields := int(binary.BigEndian.Uint16(r.b[r.i:]))
	r.i += 2
	for range fields {
		typ := r.byte()
		r.utf()
		if typ == 'L' || typ == '[' { // the field's class name: a string or a reference
			switch r.byte() {
			case 0x74: // TC_STRING
				r.utf()
			case tcReference:
				r.skip(4)
			default:
				r.fail("want a field type name")
			}
		}
	}
	if r.byte() != tcEndBlock {
		r.fail("want the class annotation's end")
	}
	if r.byte() != tcNull {
		r.fail("want no superclass")
	}
	return name
}

// bytes reads a byte[] (TC_ARRAY) or null.
func (r *javaReader) bytes() []byte {
	switch r.byte() {
	case tcNull:
		return nil
	case tcArray:
	default:
		r.fail("want a byte array")
		return nil
	}
	switch r.b[r.i] {
	case tcClassDesc:
		if name := r.classDesc(); name != "[B" && r.err == nil {
			r.fail("an array of " + name + ", want byte[]")
		}
	case tcReference:
		r.skip(5)
	default:
		r.fail("want the array's class")
	}
	n := int(r.int32())
	if n < 0 || !r.need(n) {
		r.fail("bad array length")
		return nil
	}
	r.i += n
	return slices.Clone(r.b[r.i-n : r.i])
}

// Pick returns the one offset of offs whose connector name (or, when no
// name matches, topic.prefix) is name; with name empty, the only one.
func Pick(offs []Offset, name string) (Offset, error) {
	var names []string
	for _, o := range offs {
		names = append(names, o.Connector+" (topic.prefix "+o.Server+")")
	}
	if len(offs) == 0 {
		return Offset{}, fmt.Errorf("%w: no offset stored", ErrOffset)
	}
	if name == "" {
		if len(offs) > 1 {
			return Offset{}, fmt.Errorf("%w: offsets of %d connectors (%s): name one with --connector", ErrOffset, len(offs), strings.Join(names, ", "))
		}
		return offs[0], nil
	}
	for _, by := range []func(Offset) string{func(o Offset) string { return o.Connector }, func(o Offset) string { return o.Server }} {
		if i := slices.IndexFunc(offs, func(o Offset) bool { return by(o) == name }); i >= 0 {
			return offs[i], nil
		}
	}
	return Offset{}, fmt.Errorf("%w: no connector %q among %s", ErrOffset, name, strings.Join(names, ", "))
}

// Takeover is where cdc-outbox starts after Debezium stopped at o, in
// source.position-mode mode (binlog.ModeFile or binlog.ModeGTID), and
// what it republishes (for the output):
//
//	offset                          file mode          gtid mode          republished
//	snapshot not completed          error              error              -
//	event 0, row 0 (between txns)   file:pos           gtid:<gtids>       nothing
//	event or row > 0 (in a txn)     file:pos (BEGIN)   gtid:<gtids>       the transaction at file:pos
//	no gtids                        file:pos           error              as above
func Takeover(o Offset, mode string) (binlog.Start, string, error) {
	if o.Snapshot {
		return binlog.Start{}, "", fmt.Errorf("%w: connector %s stopped during its initial snapshot (the offset says snapshot): its records are not all published; let Debezium finish the snapshot, or start cdc-outbox with --backfill", ErrOffset, o.Connector)
	}
	re := "nothing: the offset is between two transactions"
	if o.Event > 0 || o.Row > 0 {
		re = fmt.Sprintf("the transaction at %s:%d, which Debezium had started publishing (events done: %d, rows done: %d): its records may be published twice", o.File, o.Pos, o.Event, o.Row)
	}
	if mode == binlog.ModeGTID {
		if o.GTIDs == "" {
			return binlog.Start{}, "", fmt.Errorf("%w: connector %s stored no GTID set (the server has GTIDs off, or Debezium ran without them): use source.position-mode: file, which starts at %s:%d", ErrOffset, o.Connector, o.File, o.Pos)
		}
		return binlog.Start{Kind: binlog.StartGTID, GTIDSet: o.GTIDs}, re, nil
	}
	if o.Pos < 4 {
		return binlog.Start{}, "", fmt.Errorf("%w: connector %s: position %s:%d is before the first event (4)", ErrOffset, o.Connector, o.File, o.Pos)
	}
	return binlog.Start{Kind: binlog.StartFilePos, File: o.File, Pos: o.Pos}, re, nil
}
