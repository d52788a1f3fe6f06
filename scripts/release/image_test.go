package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// fakeRelease builds, per arch, a small static program printing its
// -ldflags version under the release binaries' names, as make release does.
func fakeRelease(t *testing.T, version string, arches []string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	prog := "package main\n\nimport \"fmt\"\n\nvar version string\n\nfunc main() { fmt.Println(\"cdc-outbox version\", version) }\n"
	for name, text := range map[string]string{"main.go": prog, "go.mod": "module fake\n\ngo 1.26\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range arches {
		arch := strings.TrimPrefix(a, "linux/")
		for _, name := range []string{"cdc-outbox", "cdc-outbox-probe"} {
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version,
				"-o", filepath.Join(dir, name+"_"+version+"_linux_"+arch), ".")
			cmd.Dir = src
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build %s: %v\n%s", arch, err, out)
			}
			sbom := `{"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1, "components": [{"bom-ref": "pkg:golang/fake@v1?type=module", "type": "library", "name": "fake", "version": "v1"}]}`
			if err := os.WriteFile(filepath.Join(dir, name+"_"+version+"_linux_"+arch+".cdx.json"), []byte(sbom), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func build(t *testing.T, dist string, s imageSpec, arches []string) (string, v1.Hash) {
	t.Helper()
	var err error
	if s.Binaries, err = binariesIn(dist, s.Version, arches); err != nil {
		t.Fatal(err)
	}
	idx, err := buildIndex(s)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	d, err := writeLayout(idx, s.Version, dir, dir+".tar", s.Created)
	if err != nil {
		t.Fatal(err)
	}
	return dir, d
}

// The same inputs give the same digest (and archive); another commit time
// another digest. The layout passes the check, and the check refuses a
// layout of another version or missing a platform.
func TestImageReproducibleAndChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two small programs per architecture")
	}
	arches := []string{"linux/amd64", "linux/arm64"}
	dist := fakeRelease(t, "1.2.3", arches)
	s := imageSpec{Version: "1.2.3", Commit: "abc123", Source: "https://example.com/cdc-outbox",
		Created: time.Date(2026, 12, 6, 18, 14, 13, 0, time.UTC)}

	dir1, d1 := build(t, dist, s, arches)
	dir2, d2 := build(t, dist, s, arches)
	if d1 != d2 {
		t.Fatalf("two builds of the same inputs: %s and %s", d1, d2)
	}
	a1, _ := os.ReadFile(dir1 + ".tar")
	a2, _ := os.ReadFile(dir2 + ".tar")
	if string(a1) != string(a2) {
		t.Errorf("two builds of the same inputs: the archives differ")
	}
	later := s
	later.Created = s.Created.Add(time.Second)
	if _, d3 := build(t, dist, later, arches); d3 == d1 {
		t.Errorf("another commit time, the same digest %s", d3)
	}

	got, layers, err := checkLayout(dir1, s, arches)
	if err != nil || got != d1 {
		t.Fatalf("checkLayout: %s, %v; want %s", got, err, d1)
	}

	// The image SBOM: written twice the same; checked against the layers;
	// refused for another image or with a binary's hash not the layer's.
	s.Binaries, _ = binariesIn(dist, s.Version, arches)
	sb, err := imageSBOM(s, d1, "ghcr.io/cdc-outbox/cdc-outbox")
	if err != nil {
		t.Fatal(err)
	}
	sbomFile := filepath.Join(t.TempDir(), "image.cdx.json")
	if err := writeSBOM(sb, sbomFile); err != nil {
		t.Fatal(err)
	}
	if err := checkSBOM(sbomFile, d1, layers); err != nil {
		t.Errorf("checkSBOM: %v", err)
	}
	if err := checkSBOM(sbomFile, v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}, layers); err == nil {
		t.Errorf("the SBOM of %s passed as another image's", d1)
	}
	sb.Components[len(sb.Components)-1].Hashes = sha256Of([]byte("another binary"))
	if err := writeSBOM(sb, sbomFile); err != nil {
		t.Fatal(err)
	}
	if err := checkSBOM(sbomFile, d1, layers); err == nil || !strings.Contains(err.Error(), "hash") {
		t.Errorf("a binary's wrong hash passed: %v", err)
	}
	other := s
	other.Version = "1.2.4"
	if _, _, err := checkLayout(dir1, other, arches); err == nil || !strings.Contains(err.Error(), "tagged 1.2.4") {
		t.Errorf("a layout of 1.2.3 checked as 1.2.4: %v", err)
	}
	if _, _, err := checkLayout(dir1, s, append(arches, "linux/s390x")); err == nil || !strings.Contains(err.Error(), "platforms") {
		t.Errorf("a missing platform passed: %v", err)
	}
	// only amd64 binaries under the arm64 name: the ELF check refuses them
	amdOnly := fakeRelease(t, "1.2.3", []string{"linux/amd64"})
	for _, name := range []string{"cdc-outbox", "cdc-outbox-probe"} {
		b, _ := os.ReadFile(filepath.Join(amdOnly, name+"_1.2.3_linux_amd64"))
		if err := os.WriteFile(filepath.Join(amdOnly, name+"_1.2.3_linux_arm64"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bad, _ := build(t, amdOnly, s, arches)
	if _, _, err := checkLayout(bad, s, arches); err == nil || !strings.Contains(err.Error(), "ELF machine") {
		t.Errorf("amd64 binaries in the arm64 image passed: %v", err)
	}
}
