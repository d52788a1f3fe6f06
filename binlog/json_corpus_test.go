package binlog

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// jsonCorpusFile holds binary JSON values written by a real MySQL server
// and the text `SELECT payload` returned for each, recorded by
// TestMySQLJSONCorpusLive (json_live_test.go, -tags integration) with
// -update-json-corpus. gzip-compressed (the large containers hold 66 kB
// strings): read it with zcat.
const jsonCorpusFile = "testdata/json/corpus.json.gz"

// jsonCase is one recorded value.
type jsonCase struct {
	Name    string `json:"name"`
	SQL     string `json:"sql"`     // the INSERT's payload expression
	Binary  string `json:"binary"`  // hex of the binary JSON, as the binlog carries it
	Text    string `json:"text"`    // SELECT payload
	Version string `json:"version"` // the server's VERSION()
}

func loadJSONCorpus(t testing.TB) []jsonCase {
	t.Helper()
	f, err := os.Open(jsonCorpusFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var cs []jsonCase
	if err := json.NewDecoder(zr).Decode(&cs); err != nil {
		t.Fatal(err)
	}
	if len(cs) < 30 {
		t.Fatalf("%s: %d cases", jsonCorpusFile, len(cs))
	}
	return cs
}

// Every recorded binary JSON value renders byte for byte as MySQL printed
// it, and go-mysql's decoder reads the same value (equal as JSON).
func TestMySQLJSONCorpus(t *testing.T) {
	g := newGoMySQL(t)
	for _, c := range loadJSONCorpus(t) {
		t.Run(c.Name, func(t *testing.T) {
			bin, err := hex.DecodeString(c.Binary)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendMySQLJSON([]byte("prefix"), bin)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if !bytes.HasPrefix(got, []byte("prefix")) {
				t.Fatalf("dst not appended to: %.40q", got)
			}
			if got = got[len("prefix"):]; string(got) != c.Text {
				t.Fatalf("rendered differs from SELECT payload (%s):\n got %.300q\nwant %.300q", c.SQL, got, c.Text)
			}
			gm, err := g.render(bin)
			if err != nil {
				t.Fatalf("go-mysql: %v", err)
			}
			if err := sameJSON(got, gm); err != nil {
				t.Fatalf("go-mysql's reading differs: %v", err)
			}
		})
	}
}
