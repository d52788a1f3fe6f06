package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"runtime/debug"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The image's CycloneDX SBOM (cdc-outbox_V_oci.cdx.json): the image as the
// metadata component (purl pkg:oci with the index digest), one application
// component per binary and platform with its SHA-256 (the bytes in the
// layer), holding as sub-components the Go modules of that binary's own SBOM
// (cyclonedx-gomod: make release writes them first), and the CA bundle as
// data with the x509roots/fallback version. No timestamp or serial number:
// the same image gives the same SBOM.

type bom struct {
	Schema      string      `json:"$schema"`
	BOMFormat   string      `json:"bomFormat"`
	SpecVersion string      `json:"specVersion"`
	Version     int         `json:"version"`
	Metadata    bomMetadata `json:"metadata"`
	Components  []component `json:"components"`
}

type bomMetadata struct {
	Component component `json:"component"`
}

type component struct {
	BOMRef     string      `json:"bom-ref,omitempty"`
	Type       string      `json:"type"`
	Name       string      `json:"name"`
	Version    string      `json:"version,omitempty"`
	Scope      string      `json:"scope,omitempty"`
	Hashes     []hash      `json:"hashes,omitempty"`
	PURL       string      `json:"purl,omitempty"`
	Properties []property  `json:"properties,omitempty"`
	Components []component `json:"components,omitempty"`
}

type hash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

type property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func sha256Of(b []byte) []hash {
	s := sha256.Sum256(b)
	return []hash{{Alg: "SHA-256", Content: hex.EncodeToString(s[:])}}
}

// fallbackVersion is the version of the module the CA bundle comes from, as built into this tool.
func fallbackVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "golang.org/x/crypto/x509roots/fallback" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// imageSBOM describes the image of s with index digest d; repo is the
// repository it is published under (for the purl).
func imageSBOM(s imageSpec, d v1.Hash, repo string) (*bom, error) {
	name := path.Base(repo)
	b := &bom{Schema: "http://cyclonedx.org/schema/bom-1.6.schema.json", BOMFormat: "CycloneDX", SpecVersion: "1.6", Version: 1}
	b.Metadata.Component = component{BOMRef: "image", Type: "container", Name: name, Version: s.Version,
		PURL: fmt.Sprintf("pkg:oci/%s@%s?repository_url=%s&tag=%s", name, url.QueryEscape(d.String()), url.QueryEscape(repo), tagOf(s.Version))}
	for _, k := range slicesSorted(s.labels()) {
		b.Metadata.Component.Properties = append(b.Metadata.Component.Properties, property{Name: k, Value: s.labels()[k]})
	}
	bf, err := baseFiles()
	if err != nil {
		return nil, err
	}
	for _, f := range bf {
		if f.name == caFile {
			b.Components = append(b.Components, component{BOMRef: "ca-certificates", Type: "data", Name: "/" + caFile,
				Version: fallbackVersion(), Hashes: sha256Of(f.contents),
				Properties: []property{{Name: "source", Value: "golang.org/x/crypto/x509roots/fallback/bundle"}}})
		}
	}
	for _, arch := range slicesSorted(s.Binaries) {
		for i, name := range []string{"cdc-outbox", "cdc-outbox-probe"} {
			file := s.Binaries[arch][i]
			bin, err := os.ReadFile(file)
			if err != nil {
				return nil, err
			}
			mods, err := modulesOf(file + ".cdx.json")
			if err != nil {
				return nil, err
			}
			ref := "linux/" + arch + "/" + name
			for j := range mods {
				mods[j].BOMRef = ref + ":" + mods[j].BOMRef // unique in this BOM: the same module is in every binary
			}
			b.Components = append(b.Components, component{BOMRef: ref, Type: "application", Name: name, Version: s.Version,
				Hashes: sha256Of(bin), Components: mods,
				Properties: []property{{Name: "platform", Value: "linux/" + arch}, {Name: "path", Value: "/" + binDir + "/" + name},
					{Name: "sbom", Value: path.Base(file) + ".cdx.json"}}})
		}
	}
	return b, nil
}

// modulesOf reads the components (the Go modules) of a binary's SBOM.
func modulesOf(file string) ([]component, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w (make release writes the binaries' SBOMs before the image)", err)
	}
	var b bom
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if b.BOMFormat != "CycloneDX" || len(b.Components) == 0 {
		return nil, fmt.Errorf("%s: not a CycloneDX SBOM with components", file)
	}
	return b.Components, nil
}

func writeSBOM(b *bom, file string) error {
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(out, '\n'), 0o644)
}

// checkSBOM: the image SBOM names the image's digest, and each binary's
// hash in it is the hash of the file in the image's layer (files: per
// platform, path → contents).
func checkSBOM(file string, d v1.Hash, layers map[string]map[string]*entry) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var b bom
	if err := json.Unmarshal(raw, &b); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var errs []error
	if !strings.Contains(b.Metadata.Component.PURL, url.QueryEscape(d.String())) {
		errs = append(errs, fmt.Errorf("%s: purl %s does not name the image %s", file, b.Metadata.Component.PURL, d))
	}
	seen := 0
	for _, c := range b.Components {
		if c.Type != "application" {
			continue
		}
		var platform, p string
		for _, pr := range c.Properties {
			switch pr.Name {
			case "platform":
				platform = pr.Value
			case "path":
				p = pr.Value
			}
		}
		e := layers[platform][strings.TrimPrefix(p, "/")]
		if e == nil {
			errs = append(errs, fmt.Errorf("%s: %s %s is not in the image", file, platform, p))
			continue
		}
		if len(c.Hashes) != 1 || c.Hashes[0] != sha256Of(e.data)[0] || len(c.Components) == 0 {
			errs = append(errs, fmt.Errorf("%s: %s %s: hash or modules do not match the image's file", file, platform, p))
		}
		seen++
	}
	if want := 2 * len(layers); seen != want {
		errs = append(errs, fmt.Errorf("%s: %d binaries, want %d", file, seen, want))
	}
	return errors.Join(errs...)
}

func slicesSorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
