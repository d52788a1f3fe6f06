package lint

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const checkpointPkg = "github.com/cdc-outbox/cdc-outbox/checkpoint"

// checkpointWrites returns "file:line name" of every use, in the non-test
// Go files under root outside the checkpoint package's own directory, of
// checkpoint.Apply (applying a checkpoint write or delete) and of
// checkpoint.WriteOptions (needed to call Store.Save or Store.Delete
// directly, bypassing Apply).
func checkpointWrites(t *testing.T, root string) (applies, direct []string) {
	t.Helper()
	parseGoFiles(t, root, func(fset *token.FileSet, f *ast.File) {
		name := ""
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == checkpointPkg {
				name = "checkpoint"
				if im.Name != nil {
					name = im.Name.Name
				}
			}
		}
		if name == "" {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == name {
				at := fset.Position(sel.Pos()).String()
				switch sel.Sel.Name {
				case "Apply":
					applies = append(applies, at+" checkpoint.Apply")
				case "WriteOptions":
					direct = append(direct, at+" checkpoint.WriteOptions")
				}
			}
			return true
		})
	}, "checkpoint")
	return applies, direct
}

// One call site applies checkpoint writes: outside package checkpoint
// (whose Committer writes while streaming), every checkpoint write or
// delete (the start-up phases' intents, checkpoint set and reset) goes
// through pipeline's applyIntents, the one caller of checkpoint.Apply;
// nothing calls Store.Save or Store.Delete directly (they need a
// checkpoint.WriteOptions). See pipeline/phases.go.
func TestOneCheckpointWriteSite(t *testing.T) {
	applies, direct := checkpointWrites(t, "../..")
	if len(applies) != 1 || !strings.Contains(applies[0], filepath.Join("pipeline", "phases.go")) {
		t.Errorf("checkpoint.Apply must be called in one place, pipeline's applyIntents (return checkpoint.Intent values from a start-up phase instead); found:\n%s",
			strings.Join(applies, "\n"))
	}
	if len(direct) > 0 {
		t.Errorf("checkpoint writes outside checkpoint.Apply (return a checkpoint.Intent instead):\n%s", strings.Join(direct, "\n"))
	}
}

// The check itself finds a second call site, under another import name,
// and a direct Store.Save.
func TestCheckpointWritesFinds(t *testing.T) {
	dir := t.TempDir()
	src := "package x\nimport cp \"" + checkpointPkg + "\"\n" +
		"func f(w *cp.Writer) { cp.Apply(nil, w, cp.Intent{}); cp.Apply(nil, w, cp.Intent{}) }\n" +
		"func g(s *cp.Store) { _ = s.Save(nil, cp.Checkpoint{}, cp.WriteOptions{}) }\n"
	if err := writeFile(filepath.Join(dir, "x.go"), src); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, "x_test.go"), "package x\nimport \""+checkpointPkg+"\"\nvar _ = checkpoint.Apply\n"); err != nil {
		t.Fatal(err)
	}
	applies, direct := checkpointWrites(t, dir)
	if len(applies) != 2 || len(direct) != 1 {
		t.Fatalf("found %v and %v, want two Apply and one WriteOptions", applies, direct)
	}
}
