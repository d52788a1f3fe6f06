package sink

// Benchmarks of the JSON validity check of poison.go (Check): the
// standard library against github.com/segmentio/encoding, which Check uses.

import (
	stdjson "encoding/json"
	"testing"

	segjson "github.com/segmentio/encoding/json"
)

var validPayload = []byte(`{"conversation_id":1234,"seq_no":99,"text":"` + string(make([]byte, 0)) + `hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello 😀","n":[1,2,3,{"a":null,"b":true}]}`)

func BenchmarkValidStd(b *testing.B) {
	b.SetBytes(int64(len(validPayload)))
	for i := 0; i < b.N; i++ {
		if !stdjson.Valid(validPayload) {
			b.Fatal()
		}
	}
}
func BenchmarkValidSegment(b *testing.B) {
	b.SetBytes(int64(len(validPayload)))
	for i := 0; i < b.N; i++ {
		if !segjson.Valid(validPayload) {
			b.Fatal()
		}
	}
}
