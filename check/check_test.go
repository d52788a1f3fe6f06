package check

import (
	"bytes"
	"errors"
	"testing"
)

func TestCheckReport(t *testing.T) {
	var b bytes.Buffer
	r := NewReport(&b)
	r.ok("redis", "up")
	r.fail("topic", "t does not exist: create it")
	r.Summary()
	want := "OK    redis        up\nFAIL  topic        t does not exist: create it\nresult: FAILED (1 of 2 checks failed)\n"
	if b.String() != want || r.failed != 1 {
		t.Errorf("got:\n%s", b.String())
	}
	if errs := split(errors.Join(errors.New("a"), errors.New("b"))); len(errs) != 2 {
		t.Errorf("split: %v", errs)
	}
}
