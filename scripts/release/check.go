package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// checkLayout loads the OCI image layout in dir as a runtime would and
// checks what a Kubernetes user relies on: one index tagged version (tagOf) with
// exactly the platforms arches, and for each image the user (numeric,
// non-root), the entrypoint, the labels, the files (static binaries of the
// right architecture, passwd, CA certificates); the binary of the machine's
// own architecture is extracted and run with --version, which must print
// version. It returns the index digest and each platform's files (path
// without the leading "/" → tar entry).
func checkLayout(dir string, s imageSpec, arches []string) (v1.Hash, map[string]map[string]*entry, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return v1.Hash{}, nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return v1.Hash{}, nil, err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return v1.Hash{}, nil, err
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != tagOf(s.Version) {
		return v1.Hash{}, nil, fmt.Errorf("index.json: want one index tagged %s, got %+v", tagOf(s.Version), tm.Manifests)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return v1.Hash{}, nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return v1.Hash{}, nil, err
	}
	var errs []error
	if err := wantLabels("index annotations", im.Annotations, s.labels()); err != nil {
		errs = append(errs, err)
	}
	var got []string
	layers := map[string]map[string]*entry{}
	for _, d := range im.Manifests {
		if d.Platform == nil {
			errs = append(errs, fmt.Errorf("manifest %s: no platform", d.Digest))
			continue
		}
		got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			return v1.Hash{}, nil, err
		}
		files, err := checkImage(img, d.Platform, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Platform, err))
		}
		layers[d.Platform.OS+"/"+d.Platform.Architecture] = files
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(arches))
	if !slices.Equal(got, want) {
		errs = append(errs, fmt.Errorf("platforms %v, want %v", got, want))
	}
	dg, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, nil, err
	}
	if dg != tm.Manifests[0].Digest {
		errs = append(errs, fmt.Errorf("index digest %s, index.json names %s", dg, tm.Manifests[0].Digest))
	}
	return dg, layers, errors.Join(errs...)
}

func wantLabels(what string, got, want map[string]string) error {
	var errs []error
	for k, v := range want {
		if got[k] != v {
			errs = append(errs, fmt.Errorf("%s: %s = %q, want %q", what, k, got[k], v))
		}
	}
	return errors.Join(errs...)
}

func checkImage(img v1.Image, p *v1.Platform, s imageSpec) (map[string]*entry, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	var errs []error
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		errs = append(errs, fmt.Errorf("config says %s/%s", cf.OS, cf.Architecture))
	}
	if cf.Config.User != userSpec {
		errs = append(errs, fmt.Errorf("user %q, want %q (numeric, non-root)", cf.Config.User, userSpec))
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{entryPath}) {
		errs = append(errs, fmt.Errorf("entrypoint %q, want [%s]", cf.Config.Entrypoint, entryPath))
	}
	if cf.Config.Healthcheck == nil || !slices.Contains(cf.Config.Healthcheck.Test, "/usr/local/bin/cdc-outbox-probe") {
		errs = append(errs, fmt.Errorf("healthcheck %+v, want cdc-outbox-probe", cf.Config.Healthcheck))
	}
	if err := wantLabels("labels", cf.Config.Labels, s.labels()); err != nil {
		errs = append(errs, err)
	}
	if !cf.Created.Time.Equal(s.Created) {
		errs = append(errs, fmt.Errorf("created %s, want the commit's time %s", cf.Created.Time, s.Created))
	}
	files, err := flatten(img)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"cdc-outbox", "cdc-outbox-probe"} {
		if err := checkBinary(files, binDir+"/"+name, p.Architecture); err != nil {
			errs = append(errs, err)
		}
	}
	if h := files["home/nonroot"]; h == nil || h.hdr.Uid != uid || h.hdr.Typeflag != tar.TypeDir {
		errs = append(errs, errors.New("no /home/nonroot directory owned by 65532"))
	}
	if pw := files["etc/passwd"]; pw == nil || !strings.Contains(string(pw.data), "nonroot:x:65532:65532:") {
		errs = append(errs, errors.New("/etc/passwd has no nonroot user 65532"))
	}
	if n, err := countCerts(files[caFile]); err != nil || n < 50 {
		errs = append(errs, fmt.Errorf("/%s: %d certificates (%v)", caFile, n, err))
	}
	if errs == nil && p.Architecture == runtime.GOARCH {
		if err := runVersion(files[binDir+"/cdc-outbox"].data, s.Version); err != nil {
			errs = append(errs, err)
		}
	}
	return files, errors.Join(errs...)
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// flatten reads the image's filesystem as a runtime unpacks it (the layers
// merged, whiteouts applied) into a map by path without the leading "/".
func flatten(img v1.Image) (map[string]*entry, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]*entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[strings.Trim(h.Name, "/")] = &entry{hdr: h, data: b}
	}
}

// goArch maps ELF machines to GOARCH.
var goArch = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}

// checkBinary: a regular executable file, an ELF of arch, statically linked
// (no program interpreter).
func checkBinary(files map[string]*entry, name, arch string) error {
	e := files[name]
	if e == nil {
		return fmt.Errorf("no /%s", name)
	}
	if e.hdr.Typeflag != tar.TypeReg || e.hdr.Mode&0o111 == 0 {
		return fmt.Errorf("/%s: not an executable file (mode %o)", name, e.hdr.Mode)
	}
	f, err := elf.NewFile(bytes.NewReader(e.data))
	if err != nil {
		return fmt.Errorf("/%s: %w", name, err)
	}
	if goArch[f.Machine] != arch {
		return fmt.Errorf("/%s: ELF machine %s in the %s image", name, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("/%s: dynamically linked (PT_INTERP)", name)
		}
	}
	return nil
}

func countCerts(e *entry) (int, error) {
	if e == nil {
		return 0, errors.New("missing")
	}
	n, rest := 0, e.data
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return n, nil
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return n, err
		}
		n++
	}
}

// runVersion runs the image's binary with --version; its output must name version.
func runVersion(bin []byte, version string) error {
	dir, err := os.MkdirTemp("", "cdc-outbox-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f := filepath.Join(dir, "cdc-outbox")
	if err := os.WriteFile(f, bin, 0o755); err != nil {
		return err
	}
	out, err := exec.Command(f, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("/%s/cdc-outbox --version: %w: %s", binDir, err, out)
	}
	if !strings.Contains(string(out), version) {
		return fmt.Errorf("/%s/cdc-outbox --version printed %q, want %s", binDir, out, version)
	}
	return nil
}

// untar unpacks the image archive (regular files and directories only,
// no path leaving dir) into dir.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("%s: entry %q leaves the directory", archive, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(name, b, 0o644)
			}
		default:
			err = fmt.Errorf("%s: entry %q of type %c", archive, h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}
