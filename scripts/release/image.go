package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's user: distroless's "nonroot", numeric so that Kubernetes'
// runAsNonRoot can check it without reading /etc/passwd.
const (
	uid       = 65532
	userSpec  = "65532:65532"
	binDir    = "usr/local/bin"
	caFile    = "etc/ssl/certs/ca-certificates.crt"
	entryPath = "/usr/local/bin/cdc-outbox"
)

// imageSpec is what one release image is made of: the binaries per
// platform (GOARCH → the cdc-outbox and cdc-outbox-probe files) and the
// stamps that go into its labels.
type imageSpec struct {
	Version, Commit, Source string
	Created                 time.Time // the commit's time: every file and the config carry it
	Binaries                map[string][2]string
}

// labels are the OCI annotations of the image config and the index.
func (s imageSpec) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "cdc-outbox",
		"org.opencontainers.image.description": "Publishes transactional-outbox rows from the MySQL/MariaDB binlog to Kafka",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.revision":    s.Commit,
		"org.opencontainers.image.source":      s.Source,
		"org.opencontainers.image.url":         s.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
	}
}

// file is one tar entry of a layer.
type file struct {
	name     string
	mode     int64 // permission bits (and fs.ModeSticky as 01000)
	uid      int
	dir      bool
	contents []byte
}

// baseFiles are the platform-independent files: the nonroot user and group
// (and root's, for tools reading /etc/passwd), a home directory, /tmp, and
// the Mozilla root certificates of golang.org/x/crypto/x509roots/fallback
// (pinned by go.sum, so the same commit gives the same bundle on any
// machine; roots with a distrust-after constraint, which PEM cannot carry,
// are left out).
func baseFiles() ([]file, error) {
	var certs bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&certs, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n < 50 {
		return nil, fmt.Errorf("only %d root certificates in x509roots/fallback/bundle", n)
	}
	return []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, contents: []byte("root:x:0:\nnonroot:x:65532:\nnogroup:x:65534:\n")},
		{name: "etc/passwd", mode: 0o644, contents: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: caFile, mode: 0o644, contents: certs.Bytes()},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, uid: uid, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
	}, nil
}

// appFiles are the two binaries of one platform under /usr/local/bin.
func appFiles(bins [2]string) ([]file, error) {
	fs := []file{{name: "usr", mode: 0o755, dir: true}, {name: "usr/local", mode: 0o755, dir: true}, {name: binDir, mode: 0o755, dir: true}}
	for i, name := range []string{"cdc-outbox", "cdc-outbox-probe"} {
		b, err := os.ReadFile(bins[i])
		if err != nil {
			return nil, err
		}
		fs = append(fs, file{name: binDir + "/" + name, mode: 0o755, contents: b})
	}
	return fs, nil
}

// tarOf writes files as a tar stream with every time set to mtime and no
// user or group names: the same files give the same bytes.
func tarOf(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: mtime, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.contents))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.contents); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func layerOf(files []file, mtime time.Time) (v1.Layer, error) {
	b, err := tarOf(files, mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// buildIndex makes the multi-platform image: per platform a base layer
// (the same blob for every platform) and the binaries' layer, a config
// that runs cdc-outbox as uid 65532, and the OCI labels.
func buildIndex(s imageSpec) (v1.ImageIndex, error) {
	bf, err := baseFiles()
	if err != nil {
		return nil, err
	}
	base, err := layerOf(bf, s.Created)
	if err != nil {
		return nil, err
	}
	arches := make([]string, 0, len(s.Binaries))
	for a := range s.Binaries {
		arches = append(arches, a)
	}
	sort.Strings(arches)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range arches {
		af, err := appFiles(s.Binaries[arch])
		if err != nil {
			return nil, err
		}
		app, err := layerOf(af, s.Created)
		if err != nil {
			return nil, err
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.Append(img,
			mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: s.Created},
				CreatedBy: "scripts/release: /etc/passwd, /etc/group (nonroot 65532), CA certificates, /home/nonroot, /tmp"}},
			mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: s.Created},
				CreatedBy: "scripts/release: /usr/local/bin/cdc-outbox, /usr/local/bin/cdc-outbox-probe"}})
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: s.Created}
		if arch == "arm64" {
			cf.Variant = "v8"
		}
		cf.Config = v1.Config{
			User:       userSpec,
			Entrypoint: []string{entryPath},
			Cmd:        []string{"run", "--config", "/etc/cdc-outbox/config.yaml"},
			// the variable overrides metrics-addr of the config file (every interface of
			// the container); the probe reads its port from it
			Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/" + caFile, "CDC_OUTBOX_METRICS_ADDR=:9108"},
			ExposedPorts: map[string]struct{}{"9108/tcp": {}},
			WorkingDir:   "/home/nonroot",
			Labels:       s.labels(),
			Healthcheck: &v1.HealthConfig{Test: []string{"CMD", "/usr/local/bin/cdc-outbox-probe"},
				Interval: 15 * time.Second, Timeout: 5 * time.Second, StartPeriod: 60 * time.Second, Retries: 3},
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		img = mutate.Annotations(img, s.labels()).(v1.Image)
		p := v1.Platform{OS: "linux", Architecture: arch, Variant: cf.Variant}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.Annotations(idx, s.labels()).(v1.ImageIndex), nil
}

// writeLayout writes idx as an OCI image layout in dir (tagged tagOf(version)
// by org.opencontainers.image.ref.name) and the same tree as a tar archive
// (an "oci-archive": skopeo copy oci-archive:FILE, podman load -i FILE).
func writeLayout(idx v1.ImageIndex, version, dir, archive string, mtime time.Time) (v1.Hash, error) {
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tagOf(version)})); err != nil {
		return v1.Hash{}, err
	}
	d, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if archive == "" {
		return d, nil
	}
	var files []file
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		f := file{name: filepath.ToSlash(rel), mode: 0o644, dir: e.IsDir()}
		if f.dir {
			f.mode = 0o755
		} else if f.contents, err = os.ReadFile(p); err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return v1.Hash{}, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name }) // WalkDir's order, made explicit
	b, err := tarOf(files, mtime)
	if err != nil {
		return v1.Hash{}, err
	}
	return d, os.WriteFile(archive, b, 0o644)
}

// tagOf is the image tag of version: a tag has no "+" (0.0.0-dev+abc → 0.0.0-dev_abc).
func tagOf(version string) string { return strings.ReplaceAll(version, "+", "_") }

// binariesIn finds dist's release binaries of version for each arch:
// cdc-outbox_<version>_linux_<arch> and cdc-outbox-probe_<version>_linux_<arch>.
func binariesIn(dist, version string, arches []string) (map[string][2]string, error) {
	m := map[string][2]string{}
	for _, a := range arches {
		a = strings.TrimPrefix(a, "linux/")
		var pair [2]string
		for i, name := range []string{"cdc-outbox", "cdc-outbox-probe"} {
			pair[i] = path.Join(dist, fmt.Sprintf("%s_%s_linux_%s", name, version, a))
			if _, err := os.Stat(pair[i]); err != nil {
				return nil, err
			}
		}
		m[a] = pair
	}
	return m, nil
}
