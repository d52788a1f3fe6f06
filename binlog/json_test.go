package binlog

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// goMySQL decodes binary JSON with go-mysql's own decoder, as the Reader
// set it up before json.go (RenderJSONAsMySQLText): through a parser fed a
// crafted table map with one JSON column and a WRITE_ROWS event.
type goMySQL struct{ p *replication.BinlogParser }

var jsonTableMap = []byte{61, 0, 0, 0, 0, 0, 1, 0, 2, 'i', 'm', 0, 1, 't', 0, 1,
	mysql.MYSQL_TYPE_JSON, 1, 4, // metadata: a 4-byte length
	0} // null bitmap

func newGoMySQL(t testing.TB) *goMySQL {
	t.Helper()
	p := replication.NewBinlogParser()
	p.SetRenderJSONAsMySQLText(true)
	// A MySQL 8.0.26 file sets the parser's format description (CRC32).
	if err := p.ParseFile("testdata/binlogs/mysql_type_bit.000001", 0, func(*replication.BinlogEvent) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(rawEvent(replication.TABLE_MAP_EVENT, jsonTableMap)); err != nil {
		t.Fatal(err)
	}
	return &goMySQL{p: p}
}

func (g *goMySQL) render(doc []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("go-mysql panicked: %v", r)
		}
	}()
	b := []byte{61, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 0x01, 0x00} // no STMT_END flag: the parser keeps the table map
	b = binary.LittleEndian.AppendUint32(b, uint32(len(doc)))
	b = append(b, doc...)
	e, err := g.p.Parse(rawEvent(replication.WRITE_ROWS_EVENTv2, b))
	if err != nil {
		return nil, err
	}
	rows := e.Event.(*replication.RowsEvent).Rows
	if len(rows) != 1 || len(rows[0]) != 1 {
		return nil, fmt.Errorf("go-mysql decoded %d rows", len(rows))
	}
	switch v := rows[0][0].(type) {
	case string:
		return []byte(v), nil
	case []byte:
		return v, nil
	}
	return nil, fmt.Errorf("go-mysql gave %T", rows[0][0])
}

// sameJSON reports how two JSON texts differ as JSON: token by token (so
// object members in the same order), strings after decoding (a's opaque
// values' base64 without its line breaks, b's zero TIME with its 6
// digits), numbers as
// exact decimal values (1e20 equals 100000000000000000000.0) or, when
// either is a double's text, as the same float64.
func sameJSON(a, b []byte) error {
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	for i := 0; ; i++ {
		ta, ea := da.Token()
		tb, eb := db.Token()
		if errors.Is(ea, io.EOF) && errors.Is(eb, io.EOF) {
			return nil
		}
		if ea != nil || eb != nil {
			return fmt.Errorf("token %d: %v / %v in %.200q / %.200q", i, ea, eb, a, b)
		}
		na, aNum := ta.(json.Number)
		nb, bNum := tb.(json.Number)
		if aNum && bNum {
			if !sameNumber(string(na), string(nb)) {
				return fmt.Errorf("token %d: number %s / %s", i, na, nb)
			}
			continue
		}
		// MySQL's base64 breaks lines every 76 characters, go-mysql's not.
		if sa, ok := ta.(string); ok && strings.HasPrefix(sa, "base64:type") {
			ta = strings.ReplaceAll(sa, "\n", "")
		}
		// go-mysql prints a zero TIME without its fraction, MySQL with.
		if tb == "00:00:00" {
			tb = "00:00:00.000000"
		}
		if ta != tb {
			return fmt.Errorf("token %d: %#v / %#v", i, ta, tb)
		}
	}
}

func sameNumber(a, b string) bool {
	ra, oka := new(big.Rat).SetString(a)
	rb, okb := new(big.Rat).SetString(b)
	if oka && okb && ra.Cmp(rb) == 0 {
		return true
	}
	if strings.ContainsAny(a+b, ".eE") {
		var fa, fb float64
		_, e1 := fmt.Sscan(a, &fa)
		_, e2 := fmt.Sscan(b, &fb)
		return e1 == nil && e2 == nil && fa == fb
	}
	return false
}

func render(t *testing.T, doc []byte) string {
	t.Helper()
	b, err := appendMySQLJSON(nil, doc)
	if err != nil {
		t.Fatalf("render %x: %v", doc, err)
	}
	return string(b)
}

// Doubles print as my_gcvt prints them (strings/dtoa.cc), checked against
// what MySQL 9.7 printed for CAST(x AS JSON) and JSON_ARRAY(x).
func TestMySQLDouble(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{1e20, "1e20"}, {1e300, "1e300"}, {1e-7, "0.0000001"}, {0.1, "0.1"},
		{math.Copysign(0, -1), "-0.0"}, {0, "0.0"}, {3, "3.0"}, {-3, "-3.0"},
		{1e15, "1e15"}, {1e14, "100000000000000.0"}, {1e-15, "0.000000000000001"},
		{1.5e-15, "0.0000000000000015"}, {1e-16, "1e-16"}, {1.2345678901234568e17, "1.2345678901234568e17"},
		{1234567890123456.7, "1234567890123456.8"}, {123.456, "123.456"}, {-2.5e-300, "-2.5e-300"},
		{math.MaxFloat64, "1.7976931348623157e308"}, {5e-324, "5e-324"}, {1.5, "1.5"},
		{100, "100.0"}, {0.000001, "0.000001"}, {12345678901234567890.0, "1.2345678901234567e19"},
	} {
		if got := string(appendMySQLDouble(nil, c.f)); got != c.want {
			t.Errorf("%v: %s, want %s", c.f, got, c.want)
		}
	}
}

// jsonGen encodes random values in MySQL's binary JSON format, choosing
// small or large containers and every scalar type, as MySQL's serializer
// (json_binary.cc, serialize_json_value) lays them out.
type jsonGen struct {
	r     *rand.Rand
	depth int
}

// value returns a type tag and the value's bytes (a container's bytes
// start at its element count).
func (g *jsonGen) value() (byte, []byte) {
	k := g.r.IntN(16)
	if g.depth > 6 && k < 4 {
		k += 4
	}
	switch k {
	case 0, 1, 2, 3:
		g.depth++
		defer func() { g.depth-- }()
		n := g.r.IntN(6)
		if g.r.IntN(8) == 0 {
			n = g.r.IntN(40)
		}
		large := g.r.IntN(5) == 0
		return g.container(k%2 == 0, large, n)
	case 4:
		return jsonLiteral, []byte{byte(g.r.IntN(3))}
	case 5:
		return jsonInt16, binary.LittleEndian.AppendUint16(nil, uint16(g.r.Uint32()))
	case 6:
		return jsonUint16, binary.LittleEndian.AppendUint16(nil, uint16(g.r.Uint32()))
	case 7:
		return jsonInt32, binary.LittleEndian.AppendUint32(nil, g.r.Uint32())
	case 8:
		return jsonUint32, binary.LittleEndian.AppendUint32(nil, g.r.Uint32())
	case 9:
		return jsonInt64, binary.LittleEndian.AppendUint64(nil, g.r.Uint64())
	case 10:
		return jsonUint64, binary.LittleEndian.AppendUint64(nil, g.r.Uint64())
	case 11:
		return jsonDouble, binary.LittleEndian.AppendUint64(nil, math.Float64bits(g.double()))
	case 12, 13:
		return jsonString, varString(g.str())
	default:
		return g.opaque()
	}
}

func (g *jsonGen) double() float64 {
	switch g.r.IntN(4) {
	case 0:
		return float64(g.r.IntN(2000000) - 1000000)
	case 1:
		return float64(g.r.IntN(2000000)-1000000) / math.Pow(10, float64(g.r.IntN(12)))
	}
	for {
		f := math.Float64frombits(g.r.Uint64())
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
	}
}

// str returns a random valid UTF-8 string with characters that need
// escaping, HTML characters, U+2028 and 4-byte characters.
func (g *jsonGen) str() []byte {
	pieces := []string{"a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\r", "\b", "\f", "\x00", "\x01", "\x1f", "\x7f",
		"<", ">", "&", "é", "中", "😀", "\u2028", "\u2029", "\ufeff", "'"}
	n := g.r.IntN(12)
	if g.r.IntN(20) == 0 {
		n = 200 + g.r.IntN(300) // a 2-byte length
	}
	var b []byte
	for i := 0; i < n; i++ {
		b = append(b, pieces[g.r.IntN(len(pieces))]...)
	}
	return b
}

func varString(s []byte) []byte {
	var b []byte
	l := len(s)
	for {
		c := byte(l & 0x7f)
		l >>= 7
		if l == 0 {
			b = append(b, c)
			break
		}
		b = append(b, c|0x80)
	}
	return append(b, s...)
}

// opaque returns a DECIMAL, a temporal value or another opaque type.
func (g *jsonGen) opaque() (byte, []byte) {
	var ft byte
	var v []byte
	switch g.r.IntN(4) {
	case 0:
		ft, v = fieldNewDecimal, g.decimal()
	case 1:
		ft = []byte{fieldDate, fieldDatetime, fieldTimestamp}[g.r.IntN(3)]
		y, mo, d := 1000+g.r.IntN(9000), 1+g.r.IntN(12), 1+g.r.IntN(28)
		h, mi, s, us := g.r.IntN(24), g.r.IntN(60), g.r.IntN(60), g.r.IntN(1000000)
		if ft == fieldDate {
			h, mi, s, us = 0, 0, 0, 0
		}
		ymd := int64((y*13+mo)<<5 | d)
		p := (ymd<<17|int64(h<<12|mi<<6|s))<<24 | int64(us)
		v = binary.LittleEndian.AppendUint64(nil, uint64(p))
	case 2:
		ft = fieldTime
		h, mi, s, us := g.r.IntN(839), g.r.IntN(60), g.r.IntN(60), g.r.IntN(1000000)
		p := int64(h<<12|mi<<6|s)<<24 | int64(us)
		if g.r.IntN(2) == 0 {
			p = -p
		}
		v = binary.LittleEndian.AppendUint64(nil, uint64(p))
	default:
		ft = []byte{mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_BIT, mysql.MYSQL_TYPE_GEOMETRY}[g.r.IntN(4)]
		v = make([]byte, g.r.IntN(130))
		for i := range v {
			v[i] = byte(g.r.Uint32())
		}
	}
	return jsonOpaque, append([]byte{ft}, varString(v)...)
}

// decimal returns a random DECIMAL(p,s) in JSON's form: precision, scale,
// then decimal2bin's bytes.
func (g *jsonGen) decimal() []byte {
	prec := 1 + g.r.IntN(65)
	scale := g.r.IntN(min(prec, 30) + 1)
	intg := prec - scale
	digits := func(n int) uint32 {
		if n == 0 {
			return 0
		}
		return uint32(g.r.Int64N(int64(pow10[n])))
	}
	var b []byte
	put := func(x uint32, n int) {
		nb := 4
		if n < 9 {
			nb = decDigBytes[n]
		}
		for i := nb - 1; i >= 0; i-- {
			b = append(b, byte(x>>(8*i)))
		}
	}
	if intg%9 > 0 {
		put(digits(intg%9), intg%9)
	}
	for i := 0; i < intg/9; i++ {
		put(digits(9), 9)
	}
	for i := 0; i < scale/9; i++ {
		put(digits(9), 9)
	}
	if scale%9 > 0 {
		put(digits(scale%9), scale%9)
	}
	b[0] ^= 0x80
	if g.r.IntN(2) == 0 {
		for i := range b {
			b[i] = ^b[i]
		}
	}
	return append([]byte{byte(prec), byte(scale)}, b...)
}

func inlined(tp byte, large bool) bool {
	switch tp {
	case jsonLiteral, jsonInt16, jsonUint16:
		return true
	case jsonInt32, jsonUint32:
		return large
	}
	return false
}

// container lays out an object (keys sorted by length, then bytes, as
// MySQL stores them) or an array of n random elements.
func (g *jsonGen) container(object, large bool, n int) (byte, []byte) {
	osz := 2
	if large {
		osz = 4
	}
	put := func(b []byte, v int) []byte {
		if large {
			return binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		return binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	keys := map[string]bool{}
	var ks []string
	if object {
		for len(ks) < n {
			k := string(g.str())
			if !keys[k] {
				keys[k] = true
				ks = append(ks, k)
			}
		}
		sortMySQLKeys(ks)
	}
	header := 2*osz + n*(osz+1)
	if object {
		header += n * (osz + 2)
	}
	var tail []byte
	keyOffs := make([]int, n)
	for i, k := range ks {
		keyOffs[i] = header + len(tail)
		tail = append(tail, k...)
	}
	type entry struct {
		tp  byte
		val []byte
		off int
	}
	es := make([]entry, n)
	for i := range es {
		tp, v := g.value()
		es[i] = entry{tp: tp, val: v}
		if !inlined(tp, large) {
			es[i].off = header + len(tail)
			tail = append(tail, v...)
		}
	}
	size := header + len(tail)
	if !large && size > math.MaxUint16 {
		return g.container(object, true, n)
	}
	b := put(put(nil, n), size)
	for i, k := range ks {
		b = binary.LittleEndian.AppendUint16(put(b, keyOffs[i]), uint16(len(k)))
	}
	for _, e := range es {
		b = append(b, e.tp)
		if inlined(e.tp, large) {
			v := make([]byte, osz)
			copy(v, e.val)
			b = append(b, v...)
		} else {
			b = put(b, e.off)
		}
	}
	b = append(b, tail...)
	tp := byte(jsonSmallArray)
	if object {
		tp = jsonSmallObject
	}
	if large {
		tp++
	}
	return tp, b
}

func sortMySQLKeys(ks []string) {
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && (len(ks[j]) < len(ks[j-1]) || len(ks[j]) == len(ks[j-1]) && ks[j] < ks[j-1]); j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
}

func (g *jsonGen) doc() []byte {
	tp, v := g.value()
	return append([]byte{tp}, v...)
}

// Random binary JSON documents (every type, small and large containers)
// render as JSON equal to go-mysql's reading of them, member order
// included, and as valid JSON text.
func FuzzMySQLJSON(f *testing.F) {
	for i := uint64(0); i < 20; i++ {
		f.Add(i)
	}
	g := newGoMySQL(f)
	f.Fuzz(func(t *testing.T, seed uint64) {
		doc := (&jsonGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}).doc()
		mine, err := appendMySQLJSON(nil, doc)
		if err != nil {
			t.Fatalf("seed %d: render %x: %v", seed, doc, err)
		}
		if !json.Valid(mine) || !utf8.Valid(mine) {
			t.Fatalf("seed %d: not valid JSON: %.300q", seed, mine)
		}
		theirs, err := g.render(doc)
		if err != nil {
			t.Fatalf("seed %d: go-mysql: %v", seed, err)
		}
		if err := sameJSON(mine, theirs); err != nil {
			t.Fatalf("seed %d: %v\nmine   %.300q\ntheirs %.300q", seed, err, mine, theirs)
		}
	})
}

// Malformed binary JSON gives errJSON, never a panic, and leaves dst as
// it was.
func TestMySQLJSONMalformed(t *testing.T) {
	g := &jsonGen{r: rand.New(rand.NewPCG(1, 2))}
	for i := 0; i < 3000; i++ {
		doc := g.doc()
		cut := doc[:g.r.IntN(len(doc))]
		flip := bytes.Clone(doc)
		flip[g.r.IntN(len(flip))] ^= byte(1 + g.r.IntN(255))
		for _, bad := range [][]byte{cut, flip} {
			out, err := appendMySQLJSON([]byte("x"), bad)
			if err != nil && (!errors.Is(err, errJSON) || string(out) != "x") {
				t.Fatalf("%x: %q, %v", bad, out, err)
			}
		}
	}
	for _, bad := range [][]byte{{0x0d}, {jsonLiteral, 3}, {jsonDouble, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f},
		{jsonSmallArray, 1, 0, 9, 0, jsonLiteral, 0, 0}, {jsonString, 0x80}, {jsonOpaque, fieldDate, 7, 1, 2, 3, 4, 5, 6, 7}} {
		if _, err := appendMySQLJSON(nil, bad); !errors.Is(err, errJSON) {
			t.Errorf("%x: %v, want errJSON", bad, err)
		}
	}
	if got := render(t, nil); got != "null" {
		t.Errorf("empty value: %s, want null", got)
	}
	if _, err := appendMySQLJSON(nil, nestArrays(jsonMaxDepth+1)); !errors.Is(err, errJSON) {
		t.Errorf("%d nested arrays: %v, want errJSON", jsonMaxDepth+1, err)
	}
	if got := render(t, nestArrays(jsonMaxDepth)); got != strings.Repeat("[", jsonMaxDepth)+strings.Repeat("]", jsonMaxDepth) {
		t.Errorf("%d nested arrays: %s", jsonMaxDepth, got)
	}
}

// nestArrays returns n arrays nested in one another, the innermost empty.
func nestArrays(n int) []byte {
	inner := []byte{0, 0, 4, 0} // count 0, size 4
	for i := 1; i < n; i++ {
		b := binary.LittleEndian.AppendUint16(nil, 1)
		b = binary.LittleEndian.AppendUint16(b, uint16(7+len(inner)))
		b = append(b, jsonSmallArray, 7, 0)
		inner = append(b, inner...)
	}
	return append([]byte{jsonSmallArray}, inner...)
}

// BenchmarkMySQLJSON compares the CPU per payload of go-mysql's rendering
// (the Reader before json.go) with appendMySQLJSON's, on an IM message
// payload.
func BenchmarkMySQLJSON(b *testing.B) {
	doc := benchPayload(b)
	b.Run("go-mysql", func(b *testing.B) {
		g := newGoMySQL(b)
		b.ReportAllocs()
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if _, err := g.render(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendMySQLJSON", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(doc)))
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = appendMySQLJSON(buf[:0], doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchPayload returns the recorded corpus's IM message payload (an
// object of a dozen members, a nested object and an array, about 600
// bytes of text).
func benchPayload(b *testing.B) []byte {
	for _, c := range loadJSONCorpus(b) {
		if c.Name == "im_payload" {
			bin, err := hex.DecodeString(c.Binary)
			if err != nil {
				b.Fatal(err)
			}
			return bin
		}
	}
	b.Fatal("no im_payload in the corpus")
	return nil
}
