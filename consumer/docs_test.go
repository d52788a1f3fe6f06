package consumer

import (
	"os"
	"strings"
	"testing"
)

// docs/consumer.md shows consumer/example_layout_test.go (from its
// imports on) unchanged, so the page's snippet compiles and runs.
func TestDocsSnippet(t *testing.T) {
	ex, err := os.ReadFile("example_layout_test.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/consumer.md")
	if err != nil {
		t.Fatal(err)
	}
	src := string(ex)
	body := src[strings.Index(src, "import ("):]
	if !strings.Contains(string(doc), "```go\n"+body+"```") {
		t.Fatal(`docs/consumer.md, "A complete consumer": the snippet differs from consumer/example_layout_test.go; copy the file from "import (" on`)
	}
}
