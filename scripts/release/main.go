// Command release builds and checks cdc-outbox's container image without a
// Docker daemon (make release, make release-check):
//
//	go run . image -dist DIR -version V -commit C -date RFC3339 [-source URL] [-platforms "linux/amd64 linux/arm64"]
//	go run . check-image  (the same flags)
//
// image reads DIR/cdc-outbox_V_linux_<arch> and DIR/cdc-outbox-probe_V_linux_<arch>
// (make release builds them) and writes the multi-platform OCI image as the
// layout DIR/cdc-outbox_V_oci/ and its tar archive DIR/cdc-outbox_V_oci.tar
// (skopeo copy oci-archive:…, podman load -i …), and prints the index digest.
// FROM scratch: a base layer (/etc/passwd and /etc/group with the nonroot user
// 65532, the Mozilla CA certificates of golang.org/x/crypto/x509roots/fallback,
// /home/nonroot, /tmp) shared by the platforms, and a layer with the two
// static binaries; every time is the commit's, so the same commit gives the
// same digest. It also writes the image's SBOM, DIR/cdc-outbox_V_oci.cdx.json
// (imageSBOM), from the binaries' SBOMs DIR/<binary>.cdx.json. check-image
// unpacks the archive and checks it (checkLayout) and the SBOM against it.
//
// It is its own module so that go-containerregistry and the SBOM tool
// (go tool cyclonedx-gomod) stay out of the publisher's go.mod.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: release image|check-image -dist DIR -version V -commit C -date RFC3339")
	}
	fl := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dist := fl.String("dist", "dist", "the release directory (make release's DIST)")
	version := fl.String("version", "", "the release's version (make's VERSION)")
	commit := fl.String("commit", "unknown", "the commit built (org.opencontainers.image.revision)")
	date := fl.String("date", "", "the commit's time, RFC 3339 (every file's and the config's time)")
	source := fl.String("source", "https://github.com/cdc-outbox/cdc-outbox", "org.opencontainers.image.source")
	platforms := fl.String("platforms", "linux/amd64 linux/arm64", "space-separated os/arch")
	repo := fl.String("repo", "ghcr.io/cdc-outbox/cdc-outbox", "the repository the image is published under (the SBOM's purl)")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	if *version == "" {
		return fmt.Errorf("-version is required")
	}
	created, err := time.Parse(time.RFC3339, *date)
	if err != nil {
		return fmt.Errorf("-date %q: want the commit's time as RFC 3339 (make's DATE; the build needs git history): %w", *date, err)
	}
	arches := strings.Fields(*platforms)
	s := imageSpec{Version: *version, Commit: *commit, Source: *source, Created: created.UTC()}
	dir := filepath.Join(*dist, "cdc-outbox_"+*version+"_oci")
	switch args[0] {
	case "image":
		if s.Binaries, err = binariesIn(*dist, *version, arches); err != nil {
			return err
		}
		idx, err := buildIndex(s)
		if err != nil {
			return err
		}
		d, err := writeLayout(idx, *version, dir, dir+".tar", created)
		if err != nil {
			return err
		}
		b, err := imageSBOM(s, d, *repo)
		if err != nil {
			return err
		}
		if err := writeSBOM(b, dir+".cdx.json"); err != nil {
			return err
		}
		fmt.Println(d)
		return nil
	case "check-image":
		tmp, err := os.MkdirTemp("", "cdc-outbox-oci")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if err := untar(dir+".tar", tmp); err != nil {
			return err
		}
		d, layers, err := checkLayout(tmp, s, arches)
		if err != nil {
			return fmt.Errorf("%s.tar: %w", dir, err)
		}
		if err := checkSBOM(dir+".cdx.json", d, layers); err != nil {
			return err
		}
		fmt.Printf("image %s: %s, user %s, entrypoint %s, labels, SBOM and --version %s: OK\n", d, strings.Join(arches, " "), userSpec, entryPath, *version)
		return nil
	}
	return fmt.Errorf("unknown command %q: image or check-image", args[0])
}
