package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// parseGoFiles parses every non-test Go file under root (skipping hidden
// directories, testdata and the directories skip names, relative to
// root) and calls visit with each.
func parseGoFiles(t *testing.T, root string, visit func(fset *token.FileSet, f *ast.File), skip ...string) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root {
			rel, _ := filepath.Rel(root, path)
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || slices.Contains(skip, filepath.ToSlash(rel)) {
				return filepath.SkipDir
			}
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		visit(fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// goStatements returns "file:line" of every go statement in the non-test
// Go files under root.
func goStatements(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	parseGoFiles(t, root, func(fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				found = append(found, fset.Position(g.Pos()).String())
			}
			return true
		})
	})
	return found
}

// No bare go statement outside tests: every goroutine has an owner that
// waits for it (errgroup.Group.Go, as in pipeline.Run), so that no stage
// outlives the one that started it.
func TestNoBareGoStatements(t *testing.T) {
	if found := goStatements(t, "../.."); len(found) > 0 {
		t.Errorf("bare go statements (use an errgroup.Group owned by the function, see pipeline.Run):\n%s", strings.Join(found, "\n"))
	}
}

// The check itself finds a go statement.
func TestGoStatementsFinds(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(filepath.Join(dir, "x.go"), "package x\nfunc f() { go f() }\n"); err != nil {
		t.Fatal(err)
	}
	if found := goStatements(t, dir); len(found) != 1 {
		t.Fatalf("found %v, want one", found)
	}
}
