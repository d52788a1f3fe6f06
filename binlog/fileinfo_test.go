package binlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInspectFile(t *testing.T) {
	fi, err := InspectFile(fxFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name != fx6 || fi.RotateTo != fx7 || fi.Truncated || fi.Clean != fi.Size || fi.Flavor() != FlavorMariaDB || fi.Opened.IsZero() {
		t.Fatalf("%s: %+v", fx6, fi)
	}
	fi, err = InspectFile(fxFiles[1])
	if err != nil {
		t.Fatal(err)
	}
	if fi.RotateTo != "mariadb-bin.000008" {
		t.Fatalf("%s: rotate to %q", fx7, fi.RotateTo)
	}
	// A copy taken while the server wrote: cut inside the last event.
	b, err := os.ReadFile(fxFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), fx6)
	if err := os.WriteFile(cut, b[:5000], 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err = InspectFile(cut)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Truncated || fi.RotateTo != "" || fi.Clean >= 5000 || fi.Size != 5000 {
		t.Fatalf("cut copy: %+v", fi)
	}
	if _, err := InspectFile("testdata/outbox/README.md"); !errors.Is(err, ErrNotBinlog) {
		t.Fatalf("README: %v", err)
	}
}

func TestCheckFilePosition(t *testing.T) {
	for _, end := range fxWant {
		path := fxFiles[0]
		if end.End.File == fx7 {
			path = fxFiles[1]
		}
		if err := CheckFilePosition(path, end.End.Pos); err != nil {
			t.Errorf("transaction end %s: %v", end.End.FilePos(), err)
		}
	}
	if err := CheckFilePosition(fxFiles[0], 4); err != nil {
		t.Errorf("start of file: %v", err)
	}
	fi, _ := InspectFile(fxFiles[0])
	for _, c := range []struct {
		pos  uint32
		want string
	}{
		{3179, "not between two transactions"},   // the rows event of a transaction
		{3180, "not the start of an event"},      // inside it
		{uint32(fi.Size) + 1, "past the end of"}, // beyond the file
	} {
		err := CheckFilePosition(fxFiles[0], c.pos)
		var fe *FileError
		if !errors.Is(err, ErrStart) || !errors.As(err, &fe) || fe.File != fx6 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pos %d: %v, want ErrStart in a *FileError with %q", c.pos, err, c.want)
		}
	}
	if err := CheckFilePosition(fxFiles[0], uint32(fi.Size)); err != nil {
		t.Errorf("end of file: %v", err)
	}
}
