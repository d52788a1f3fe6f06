package router

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/cdc-outbox/cdc-outbox/binlog"
	"github.com/cdc-outbox/cdc-outbox/mapping"
)

// The records table of docs/mapping.md (im) is the im preset: its key is the preset's key
// column, its headers are event_id, the preset's headers in order, then
// the position headers; and the typed im path (Route) sets exactly those.
func TestDocsRecordsTableIsTheIMPreset(t *testing.T) {
	r, hs := mapping.Resolve(mapping.Config{})
	want := []string{HeaderEventID}
	for _, h := range hs {
		want = append(want, h[0])
	}
	want = append(want, HeaderBinlogPos, HeaderTxnEnd, HeaderGTID)

	ev := binlog.Event{ID: 1, EventType: "a", Pos: binlog.Position{File: "f", Pos: 4, GTID: "0-1-1"}}
	m, err := New(Config{Topic: "im.events"}, Reserved{}).Route(&ev, binlog.Position{File: "f", Pos: 9})
	if err != nil {
		t.Fatal(err)
	}
	var routed []string
	for _, h := range m.Headers {
		routed = append(routed, h.Key)
	}
	// Route sets binlog_txn_end before gtid and binlog_pos; compare as sets
	// in the preset's order for the mapped part.
	if !sameSet(routed, want) {
		t.Errorf("Route's headers %v, the im preset's %v", routed, want)
	}

	b, err := os.ReadFile("../docs/mapping.md")
	if err != nil {
		t.Fatal(err)
	}
	row := func(part string) string {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "| "+part+" |") {
				return l
			}
		}
		t.Fatalf("docs/mapping.md: no records table row %q", part)
		return ""
	}
	var readme []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(row("headers"), ""), -1) {
		readme = append(readme, m[1])
	}
	if !reflect.DeepEqual(readme, want) {
		t.Errorf("docs/mapping.md headers %v, want (the im preset) %v", readme, want)
	}
	if key := row("key"); !strings.Contains(key, "`"+r.Key[0]+"`") {
		t.Errorf("docs/mapping.md key row %q does not name the im preset's key %s", key, r.Key[0])
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}
