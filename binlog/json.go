package binlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// MySQL binary JSON, rendered as MySQL prints it.
//
// MySQL 5.7+ stores a JSON column in its binary format (MySQL source
// sql-common/json_binary.h, "JSON binary format"; WL#8132), and the binlog
// carries those bytes. appendMySQLJSON turns them into the text that
// `SELECT payload` returns: Json_wrapper::to_string in
// sql-common/json_dom.cc (wrapper_to_string, not pretty):
//
//   - objects `{"k": v, "k2": v2}` and arrays `[v, v2]`: ", " between
//     members, ": " after a key; members in stored order (MySQL sorts keys
//     by length, then bytes, at INSERT);
//   - strings quoted by double_quote(): `"` `\` and the control characters
//     below 0x20 escaped (\b \t \n \f \r, else \u00xx), everything else
//     (<, >, &, U+2028, invalid UTF-8) byte for byte;
//   - integers in decimal; doubles by my_gcvt(MY_GCVT_ARG_DOUBLE,
//     MY_GCVT_MAX_FIELD_WIDTH) with ".0" appended when that has neither a
//     '.' nor an 'e' (1e20 → 1e20, 1e-7 → 0.0000001, 3 → 3.0, see
//     appendMySQLDouble);
//   - opaque values: DECIMAL unquoted as decimal2string prints it (scale
//     kept: 1.50), DATE/TIME/DATETIME/TIMESTAMP quoted by my_TIME_to_str
//     with 6 fractional digits ("2020-01-02", "12:00:00.000000",
//     "2020-01-02 03:04:05.000000"), VAR_STRING as a string, any other
//     type as "base64:type<N>:<MySQL base64, a newline every 76 chars>".
//
// Nothing here allocates but the appends to dst, and there is no reflection
// or encoding/json: this runs for every outbox row of a MySQL drain.

// Binary JSON type tags (json_binary.h, JSONB_TYPE_*).
const (
	jsonSmallObject = 0x00
	jsonLargeObject = 0x01
	jsonSmallArray  = 0x02
	jsonLargeArray  = 0x03
	jsonLiteral     = 0x04
	jsonInt16       = 0x05
	jsonUint16      = 0x06
	jsonInt32       = 0x07
	jsonUint32      = 0x08
	jsonInt64       = 0x09
	jsonUint64      = 0x0a
	jsonDouble      = 0x0b
	jsonString      = 0x0c
	jsonOpaque      = 0x0f

	jsonNull  = 0x00
	jsonTrue  = 0x01
	jsonFalse = 0x02
)

// MySQL field types that an opaque JSON value can carry and that
// wrapper_to_string prints specially (enum_field_types, mysql_com.h).
const (
	fieldTimestamp  = 7
	fieldDate       = 10
	fieldTime       = 11
	fieldDatetime   = 12
	fieldNewDecimal = 246
	fieldVarString  = 253
)

// jsonMaxDepth bounds the nesting the renderer follows. MySQL refuses
// documents deeper than 100 (JSON_DOCUMENT_MAX_DEPTH); a deeper binary
// value is corrupt, and a bound keeps a crafted one from recursing deep.
const jsonMaxDepth = 100

// errJSON reports binary JSON the renderer cannot render: truncated,
// inconsistent offsets, an unknown type tag, an out-of-range temporal or
// decimal value. Callers fall back to go-mysql's decoder, which reports
// (or renders) it its own way.
var errJSON = errors.New("binlog: invalid MySQL binary JSON")

func jsonErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errJSON}, a...)...)
}

// appendMySQLJSON appends the MySQL text form of the binary JSON document
// doc (a JSON column's value from a row image, without its length prefix)
// to dst. An empty doc is the JSON null literal, as MySQL reads it
// (Field_json::val_json: an empty value, left by INSERT IGNORE or a
// non-strict INSERT of NULL into a NOT NULL column, is null). On error dst
// is returned as given (nothing appended) with an error wrapping errJSON.
func appendMySQLJSON(dst, doc []byte) ([]byte, error) {
	if len(doc) == 0 {
		return append(dst, "null"...), nil
	}
	n := len(dst)
	out, err := appendJSONValue(dst, doc[0], doc[1:], 0)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

// appendJSONValue appends the value of type tp whose bytes start at data
// (for a container: data starts at its element count, and its offsets are
// relative to there).
func appendJSONValue(dst []byte, tp byte, data []byte, depth int) ([]byte, error) {
	switch tp {
	case jsonSmallObject, jsonLargeObject, jsonSmallArray, jsonLargeArray:
		return appendJSONContainer(dst, tp, data, depth)
	case jsonLiteral:
		if len(data) < 1 {
			return dst, jsonErr("truncated literal")
		}
		return appendJSONLiteral(dst, data[0])
	case jsonInt16:
		if len(data) < 2 {
			return dst, jsonErr("truncated int16")
		}
		return strconv.AppendInt(dst, int64(int16(binary.LittleEndian.Uint16(data))), 10), nil
	case jsonUint16:
		if len(data) < 2 {
			return dst, jsonErr("truncated uint16")
		}
		return strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint16(data)), 10), nil
	case jsonInt32:
		if len(data) < 4 {
			return dst, jsonErr("truncated int32")
		}
		return strconv.AppendInt(dst, int64(int32(binary.LittleEndian.Uint32(data))), 10), nil
	case jsonUint32:
		if len(data) < 4 {
			return dst, jsonErr("truncated uint32")
		}
		return strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(data)), 10), nil
	case jsonInt64:
		if len(data) < 8 {
			return dst, jsonErr("truncated int64")
		}
		return strconv.AppendInt(dst, int64(binary.LittleEndian.Uint64(data)), 10), nil
	case jsonUint64:
		if len(data) < 8 {
			return dst, jsonErr("truncated uint64")
		}
		return strconv.AppendUint(dst, binary.LittleEndian.Uint64(data), 10), nil
	case jsonDouble:
		if len(data) < 8 {
			return dst, jsonErr("truncated double")
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(data))
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return dst, jsonErr("double %v", f)
		}
		return appendMySQLDouble(dst, f), nil
	case jsonString:
		s, err := jsonVarBytes(data)
		if err != nil {
			return dst, err
		}
		return appendJSONString(dst, s), nil
	case jsonOpaque:
		if len(data) < 1 {
			return dst, jsonErr("truncated opaque value")
		}
		v, err := jsonVarBytes(data[1:])
		if err != nil {
			return dst, err
		}
		return appendJSONOpaque(dst, data[0], v)
	}
	return dst, jsonErr("unknown type 0x%02x", tp)
}

func appendJSONLiteral(dst []byte, v byte) ([]byte, error) {
	switch v {
	case jsonNull:
		return append(dst, "null"...), nil
	case jsonTrue:
		return append(dst, "true"...), nil
	case jsonFalse:
		return append(dst, "false"...), nil
	}
	return dst, jsonErr("unknown literal 0x%02x", v)
}

// appendJSONContainer appends an object or array. Layout (json_binary.h):
// element count, byte size (2 bytes each when small, 4 when large), then
// per member of an object a key entry (key offset, uint16 key length),
// then per element a value entry (type byte, then the value itself when
// it is inlined — literals and 16-bit integers, and 32-bit integers in a
// large container — else its offset), then keys and values.
func appendJSONContainer(dst []byte, tp byte, data []byte, depth int) ([]byte, error) {
	if depth >= jsonMaxDepth {
		return dst, jsonErr("nested deeper than %d", jsonMaxDepth)
	}
	large := tp == jsonLargeObject || tp == jsonLargeArray
	object := tp == jsonSmallObject || tp == jsonLargeObject
	osz := 2
	if large {
		osz = 4
	}
	if len(data) < 2*osz {
		return dst, jsonErr("truncated container header")
	}
	count, size := jsonOffset(data, large), jsonOffset(data[osz:], large)
	if size > len(data) || size < 2*osz {
		return dst, jsonErr("container size %d, %d bytes left", size, len(data))
	}
	data = data[:size]
	keyEntry, valueEntry := osz+2, osz+1
	header := 2 * osz
	if object {
		header += count * keyEntry
	}
	valueEntries := header
	header += count * valueEntry
	if count > size || header > size {
		return dst, jsonErr("container of %d elements in %d bytes", count, size)
	}
	if object {
		dst = append(dst, '{')
	} else {
		dst = append(dst, '[')
	}
	var err error
	for i := 0; i < count; i++ {
		if i > 0 {
			dst = append(dst, ',', ' ')
		}
		if object {
			e := 2*osz + i*keyEntry
			off, l := jsonOffset(data[e:], large), int(binary.LittleEndian.Uint16(data[e+osz:]))
			if off < header || off+l > size {
				return dst, jsonErr("key %d at %d+%d outside the object (%d..%d)", i, off, l, header, size)
			}
			dst = appendJSONString(dst, data[off:off+l])
			dst = append(dst, ':', ' ')
		}
		e := valueEntries + i*valueEntry
		vt := data[e]
		switch {
		case vt == jsonLiteral:
			dst, err = appendJSONLiteral(dst, data[e+1])
		case vt == jsonInt16 || vt == jsonUint16 || (large && (vt == jsonInt32 || vt == jsonUint32)):
			dst, err = appendJSONValue(dst, vt, data[e+1:e+valueEntry], depth+1)
		default:
			off := jsonOffset(data[e+1:], large)
			if off < header || off >= size {
				return dst, jsonErr("value %d at %d outside the container (%d..%d)", i, off, header, size)
			}
			dst, err = appendJSONValue(dst, vt, data[off:], depth+1)
		}
		if err != nil {
			return dst, err
		}
	}
	if object {
		return append(dst, '}'), nil
	}
	return append(dst, ']'), nil
}

func jsonOffset(b []byte, large bool) int {
	if large {
		return int(binary.LittleEndian.Uint32(b))
	}
	return int(binary.LittleEndian.Uint16(b))
}

// jsonVarBytes reads a length (7 bits per byte, low first, the high bit
// set on all but the last byte; at most 5 bytes) and that many bytes.
func jsonVarBytes(data []byte) ([]byte, error) {
	var l uint64
	for i := 0; i < 5 && i < len(data); i++ {
		l |= uint64(data[i]&0x7f) << (7 * i)
		if data[i]&0x80 == 0 {
			if l > uint64(len(data)-i-1) {
				return nil, jsonErr("string of %d bytes, %d left", l, len(data)-i-1)
			}
			return data[i+1 : i+1+int(l)], nil
		}
	}
	return nil, jsonErr("bad variable-length size")
}

// jsonEscape marks the bytes double_quote() escapes.
var jsonEscape = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// appendJSONString appends s quoted as double_quote() (json_dom.cc) does.
func appendJSONString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !jsonEscape[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		start = i + 1
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSONOpaque appends an opaque value of MySQL field type ft.
func appendJSONOpaque(dst []byte, ft byte, v []byte) ([]byte, error) {
	switch ft {
	case fieldNewDecimal:
		return appendJSONDecimal(dst, v)
	case fieldDate, fieldTime, fieldDatetime, fieldTimestamp:
		if len(v) != 8 {
			return dst, jsonErr("temporal value of %d bytes, want 8", len(v))
		}
		dst = append(dst, '"')
		dst, err := appendPackedTime(dst, ft, int64(binary.LittleEndian.Uint64(v)))
		if err != nil {
			return dst, err
		}
		return append(dst, '"'), nil
	case fieldVarString:
		return appendJSONString(dst, v), nil
	}
	// "base64:type<N>:" and MySQL's base64 (mysys/base64.cc: a newline
	// after every 76 characters), quoted: only the newlines need escaping.
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	dst = append(dst, `"base64:type`...)
	dst = strconv.AppendUint(dst, uint64(ft), 10)
	dst = append(dst, ':')
	line := 0
	for i := 0; i < len(v); i += 3 {
		if line == 76 {
			dst = append(dst, '\\', 'n')
			line = 0
		}
		c := uint(v[i]) << 16
		if i+1 < len(v) {
			c |= uint(v[i+1]) << 8
		}
		if i+2 < len(v) {
			c |= uint(v[i+2])
		}
		dst = append(dst, b64[c>>18&63], b64[c>>12&63])
		if i+1 < len(v) {
			dst = append(dst, b64[c>>6&63])
		} else {
			dst = append(dst, '=')
		}
		if i+2 < len(v) {
			dst = append(dst, b64[c&63])
		} else {
			dst = append(dst, '=')
		}
		line += 4
	}
	return append(dst, '"'), nil
}

// appendPackedTime appends a temporal value in MySQL's packed longlong
// form (my_time.cc, TIME_from_longlong_*_packed: the integer part above
// bit 24, microseconds below) as my_TIME_to_str(t, 6) prints it.
func appendPackedTime(dst []byte, ft byte, p int64) ([]byte, error) {
	neg := p < 0
	if neg {
		p = -p
	}
	usec := p % (1 << 24)
	ip := p >> 24
	if usec > 999999 {
		return dst, jsonErr("temporal value with %d microseconds", usec)
	}
	if ft == fieldTime {
		h, m, s := ip>>12%(1<<10), ip>>6%(1<<6), ip%(1<<6)
		if neg {
			dst = append(dst, '-')
		}
		if h < 10 {
			dst = append(dst, '0')
		}
		dst = strconv.AppendInt(dst, h, 10)
		dst = append(dst, ':')
		dst = appendDigits(dst, int(m), 2)
		dst = append(dst, ':')
		dst = appendDigits(dst, int(s), 2)
		dst = append(dst, '.')
		return appendDigits(dst, int(usec), 6), nil
	}
	ymd, hms := ip>>17, ip%(1<<17)
	y, mo, d := ymd>>5/13, ymd>>5%13, ymd%(1<<5)
	h, mi, s := hms>>12, hms>>6%(1<<6), hms%(1<<6)
	if y > 9999 || h > 99 {
		return dst, jsonErr("temporal value out of range (year %d, hour %d)", y, h)
	}
	dst = appendDigits(dst, int(y), 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(mo), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(d), 2)
	if ft == fieldDate {
		return dst, nil
	}
	dst = append(dst, ' ')
	dst = appendDigits(dst, int(h), 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, int(mi), 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, int(s), 2)
	dst = append(dst, '.')
	return appendDigits(dst, int(usec), 6), nil
}

// appendDigits appends the low width decimal digits of v (v >= 0),
// zero-padded.
func appendDigits(dst []byte, v, width int) []byte {
	var b [10]byte
	for i := width - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, b[:width]...)
}

// decDigBytes is the bytes of a group of n < 9 decimal digits in MySQL's
// binary DECIMAL (strings/decimal.cc, dig2bytes); 9 digits take 4 bytes.
var decDigBytes = [10]int{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}

var pow10 = [10]uint32{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000}

// appendJSONDecimal appends a JSON DECIMAL: precision and scale bytes,
// then MySQL's binary DECIMAL (decimal2bin: the integer digits in groups
// of 9, the leading partial group first, then the fraction's groups, the
// trailing partial group last, each big-endian; the sign bit flipped, and
// every byte inverted for a negative number), printed as decimal2string:
// no leading zeros ("0" for none), exactly scale fraction digits.
func appendJSONDecimal(dst []byte, v []byte) ([]byte, error) {
	if len(v) < 2 {
		return dst, jsonErr("truncated decimal")
	}
	prec, scale := int(v[0]), int(v[1])
	if prec < 1 || prec > 90 || scale > 30 || scale > prec { // literals reach precision 66
		return dst, jsonErr("decimal(%d,%d)", prec, scale)
	}
	intg := prec - scale
	intg0, intg0x, frac0, frac0x := intg/9, intg%9, scale/9, scale%9
	size := decDigBytes[intg0x] + 4*intg0 + 4*frac0 + decDigBytes[frac0x]
	if len(v)-2 != size {
		return dst, jsonErr("decimal(%d,%d) of %d bytes, want %d", prec, scale, len(v)-2, size)
	}
	var b [48]byte // at most 4*10 bytes for 90 digits
	copy(b[:], v[2:])
	neg := b[0]&0x80 == 0
	b[0] ^= 0x80
	if neg {
		for i := 0; i < size; i++ {
			b[i] = ^b[i]
		}
	}
	pos := 0
	group := func(n int) (uint32, error) {
		nb := 4
		if n < 9 {
			nb = decDigBytes[n]
		}
		var x uint32
		for i := 0; i < nb; i++ {
			x = x<<8 | uint32(b[pos+i])
		}
		pos += nb
		if x >= pow10[n] {
			return 0, jsonErr("decimal digit group %d out of range", x)
		}
		return x, nil
	}
	if neg {
		dst = append(dst, '-')
	}
	start := len(dst)
	digits := false
	put := func(x uint32, n int) {
		if !digits {
			if x == 0 {
				return
			}
			dst = strconv.AppendUint(dst, uint64(x), 10)
			digits = true
			return
		}
		dst = appendDigits(dst, int(x), n)
	}
	if intg0x > 0 {
		x, err := group(intg0x)
		if err != nil {
			return dst[:start], err
		}
		put(x, intg0x)
	}
	for i := 0; i < intg0; i++ {
		x, err := group(9)
		if err != nil {
			return dst[:start], err
		}
		put(x, 9)
	}
	if !digits {
		dst = append(dst, '0')
	}
	if scale == 0 {
		return dst, nil
	}
	dst = append(dst, '.')
	for i := 0; i < frac0; i++ {
		x, err := group(9)
		if err != nil {
			return dst[:start], err
		}
		dst = appendDigits(dst, int(x), 9)
	}
	if frac0x > 0 {
		x, err := group(frac0x)
		if err != nil {
			return dst[:start], err
		}
		dst = appendDigits(dst, int(x), frac0x)
	}
	return dst, nil
}

// appendMySQLDouble appends f as wrapper_to_string prints a JSON double:
// my_gcvt(f, MY_GCVT_ARG_DOUBLE, MY_GCVT_MAX_FIELD_WIDTH = 34) (strings/
// dtoa.cc), then ".0" if that has neither '.' nor 'e'.
//
// my_gcvt takes the shortest digits that read back as f (dtoa mode 4 with
// 34 digits allowed: never fewer than the shortest round-trip form, which
// strconv also gives) and picks the 'f' format when the decimal exponent
// decpt (f = 0.DIGITS × 10^decpt) is within -14..15, or is 16 with 17
// digits (MAX_DECPT_FOR_F_FORMAT = DBL_DIG = 15; within those bounds the
// 'f' form always fits the field width); else the 'e' format, with no '+'
// and no leading zeros in the exponent: 1e20, 1.5e-15 is 0.0000000000000015,
// 1e-15 is 0.000000000000001, 1e-16 is 1e-16, 1e15 is 1e15, 1e14 is
// 100000000000000.0, -0 is -0.0.
func appendMySQLDouble(dst []byte, f float64) []byte {
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], math.Abs(f), 'e', -1, 64) // d[.ddd]e±XX
	var digs [20]byte
	nd := 0
	i := 0
	for ; i < len(e) && e[i] != 'e'; i++ {
		if e[i] != '.' {
			digs[nd] = e[i]
			nd++
		}
	}
	exp := 0
	sign := 1
	for i++; i < len(e); i++ {
		switch c := e[i]; c {
		case '-':
			sign = -1
		case '+':
		default:
			exp = exp*10 + int(c-'0')
		}
	}
	decpt := sign*exp + 1
	d := digs[:nd]
	if math.Signbit(f) {
		dst = append(dst, '-')
	}
	if decpt >= -14 && (decpt <= 15 || nd > decpt) {
		switch {
		case decpt <= 0:
			dst = append(dst, '0', '.')
			for k := decpt; k < 0; k++ {
				dst = append(dst, '0')
			}
			dst = append(dst, d...)
		case decpt < nd:
			dst = append(dst, d[:decpt]...)
			dst = append(dst, '.')
			dst = append(dst, d[decpt:]...)
		default:
			dst = append(dst, d...)
			for k := nd; k < decpt; k++ {
				dst = append(dst, '0')
			}
			dst = append(dst, '.', '0')
		}
		return dst
	}
	dst = append(dst, d[0])
	if nd > 1 {
		dst = append(dst, '.')
		dst = append(dst, d[1:]...)
	}
	dst = append(dst, 'e')
	x := decpt - 1
	if x < 0 {
		dst = append(dst, '-')
		x = -x
	}
	return strconv.AppendInt(dst, int64(x), 10)
}
