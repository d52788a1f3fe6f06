package binlog

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
)

// XA transactions (MySQL manual, "XA Transactions"; MariaDB 10.5+ logs
// them the same way). `XA START … XA END; XA PREPARE` is logged as an event
// group that ends at XA_PREPARE_LOG_EVENT; its outcome comes later, as an
// event group of its own whose query is `XA COMMIT X'…',X'…',n` or
// `XA ROLLBACK X'…',X'…',n`. Transactions committed by others may lie in
// between. `XA COMMIT … ONE PHASE` ends at an XA_PREPARE_LOG_EVENT with
// its one-phase flag set: committed there.
//
// The outbox rows of a prepared XA transaction are held until its XA COMMIT
// (then published in the XA COMMIT's place in commit order) or XA ROLLBACK
// (then dropped). While one is held, the resumable position of every
// transaction emitted is the position before the held one started, so that
// a restart reads its prepare again: the transactions after it may be
// published twice after a crash, none is lost.

// preparedXA is a prepared XA transaction with outbox rows.
type preparedXA struct {
	xid    string   // xidKey
	events []Event  // its outbox rows
	start  Position // end of the last complete transaction before it
}

// xidKey is the canonical form of an XID: hex gtrid, hex bqual, formatID.
func xidKey(gtrid, bqual []byte, formatID int64) string {
	return hex.EncodeToString(gtrid) + "," + hex.EncodeToString(bqual) + "," + strconv.FormatInt(formatID, 10)
}

// parseXAPrepare decodes the body of an XA_PREPARE_LOG_EVENT (MySQL source
// libbinlogevents XA_prepare_event: one_phase 1 byte, formatID 4, gtrid
// length 4, bqual length 4, then gtrid and bqual; little-endian).
func parseXAPrepare(body []byte) (xid string, onePhase bool, err error) {
	if len(body) < 13 {
		return "", false, fmt.Errorf("%w: XA_PREPARE_LOG_EVENT of %d bytes, want at least 13", ErrCorruptEvent, len(body))
	}
	formatID := int64(int32(binary.LittleEndian.Uint32(body[1:])))
	gl, bl := binary.LittleEndian.Uint32(body[5:]), binary.LittleEndian.Uint32(body[9:])
	if gl > 64 || bl > 64 || uint64(len(body)) < 13+uint64(gl)+uint64(bl) {
		return "", false, fmt.Errorf("%w: XA_PREPARE_LOG_EVENT with gtrid length %d, bqual length %d in %d bytes", ErrCorruptEvent, gl, bl, len(body))
	}
	data := body[13:]
	return xidKey(data[:gl], data[gl:gl+bl], formatID), body[0] != 0, nil
}

// parseXAEnd recognises `XA COMMIT xid` and `XA ROLLBACK xid` as the server
// logs them (xid as X'hex',X'hex',formatID; quoted strings and a missing
// bqual or formatID are accepted too). ok is false for any other statement.
func parseXAEnd(q []byte) (xid string, commit, ok bool) {
	q = bytes.TrimSpace(q)
	var rest []byte
	switch {
	case hasPrefixFold(q, "XA COMMIT "):
		rest, commit = q[len("XA COMMIT "):], true
	case hasPrefixFold(q, "XA ROLLBACK "):
		rest = q[len("XA ROLLBACK "):]
	default:
		return "", false, false
	}
	var parts [][]byte
	for len(rest) > 0 {
		rest = bytes.TrimLeft(rest, " \t\r\n")
		if len(rest) == 0 {
			break
		}
		var v []byte
		var n int
		switch {
		case (rest[0] == 'X' || rest[0] == 'x') && len(rest) > 1 && rest[1] == '\'':
			end := bytes.IndexByte(rest[2:], '\'')
			if end < 0 {
				return "", false, false
			}
			b, err := hex.DecodeString(string(rest[2 : 2+end]))
			if err != nil {
				return "", false, false
			}
			v, n = b, 2+end+1
		case rest[0] == '\'' || rest[0] == '"':
			end := bytes.IndexByte(rest[1:], rest[0])
			if end < 0 {
				return "", false, false
			}
			v, n = rest[1:1+end], 1+end+1
		default:
			end := bytes.IndexAny(rest, ", \t")
			if end < 0 {
				end = len(rest)
			}
			v, n = rest[:end], end
		}
		parts = append(parts, v)
		rest = bytes.TrimLeft(rest[n:], " \t\r\n")
		if len(rest) > 0 && rest[0] == ',' {
			rest = rest[1:]
		} else {
			break // e.g. ONE PHASE
		}
	}
	if len(parts) == 0 || len(parts) > 3 {
		return "", false, false
	}
	var bqual []byte
	formatID := int64(1)
	if len(parts) > 1 {
		bqual = parts[1]
	}
	if len(parts) > 2 {
		id, err := strconv.ParseInt(string(parts[2]), 10, 64)
		if err != nil {
			return "", false, false
		}
		formatID = id
	}
	return xidKey(parts[0], bqual, formatID), commit, true
}
