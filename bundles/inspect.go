package bundles

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"
)

// Name is the name decisions report for a bundle: the manifest's metadata
// "name" when it is a non-empty string, else the base name of src without
// .tar.gz or .tgz (for a URL, of its path).
func Name(src string, b *bundle.Bundle) string {
	if b != nil {
		if n, ok := b.Manifest.Metadata["name"].(string); ok && strings.TrimSpace(n) != "" {
			return n
		}
	}
	base := filepath.Base(filepath.Clean(src))
	if isURL(src) {
		if u, err := url.Parse(src); err == nil {
			base = path.Base(u.Path)
			if base == "/" || base == "." || base == "" {
				base = u.Host
			}
		}
	}
	for _, ext := range []string{".tar.gz", ".tgz"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base
}

// Revision is the manifest's revision ("" when it has none).
func Revision(b *bundle.Bundle) string {
	if b == nil {
		return ""
	}
	return b.Manifest.Revision
}

// Info describes a bundle without verifying it.
type Info struct {
	Name        string          `json:"name"`
	Revision    string          `json:"revision"`
	Roots       []string        `json:"roots"`
	RegoVersion *int            `json:"rego_version,omitempty"`
	Metadata    map[string]any  `json:"metadata,omitempty"`
	Files       []FileEntry     `json:"files"`
	Signed      bool            `json:"signed"`
	Signatures  []SignatureInfo `json:"signatures,omitempty"`
}

// FileEntry is one file in the bundle with the SHA-256 of its bytes.
type FileEntry struct {
	Name   string `json:"name"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

// SignatureInfo is what a signature claims, read without checking it.
type SignatureInfo struct {
	Algorithm string   `json:"algorithm"`
	KeyID     string   `json:"key_id,omitempty"`
	Scope     string   `json:"scope,omitempty"`
	Issuer    string   `json:"issuer,omitempty"`
	IssuedAt  int64    `json:"issued_at,omitempty"`
	Files     []string `json:"files"`
	Plugin    string   `json:"plugin,omitempty"`
}

// Inspect reads the bundle at p (a .tar.gz or a directory) and describes its
// manifest, files and signatures. It checks nothing: use Verify for that.
func Inspect(p string) (Info, error) {
	rb, err := readRaw(p, nil)
	if err != nil {
		return Info{}, fmt.Errorf("inspect %s: %w", p, err)
	}
	var b *bundle.Bundle
	if rb.IsDir {
		b, err = loadLocal(p, nil)
	} else {
		b, err = readBundle(rb.Archive, "", nil)
	}
	if err != nil {
		return Info{}, fmt.Errorf("inspect %s: %w", p, err)
	}
	info := Info{
		Name:        Name(p, b),
		Revision:    b.Manifest.Revision,
		RegoVersion: b.Manifest.RegoVersion,
		Metadata:    b.Manifest.Metadata,
		Signed:      rb.Signatures != nil,
	}
	if b.Manifest.Roots != nil {
		info.Roots = *b.Manifest.Roots
	}
	for _, f := range rb.Files {
		sum := sha256.Sum256(f.Data)
		info.Files = append(info.Files, FileEntry{Name: strings.TrimPrefix(f.Path, "/"), Size: len(f.Data), SHA256: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(info.Files, func(a, b FileEntry) int { return strings.Compare(a.Name, b.Name) })
	if rb.Signatures != nil {
		var sc bundle.SignaturesConfig
		if err := util.NewJSONDecoder(bytes.NewReader(rb.Signatures)).Decode(&sc); err != nil {
			return info, fmt.Errorf("inspect %s: %s: %w", p, SignaturesFile, err)
		}
		for _, tok := range sc.Signatures {
			si, err := decodeToken(tok)
			if err != nil {
				return info, fmt.Errorf("inspect %s: %s: %w", p, SignaturesFile, err)
			}
			si.Plugin = sc.Plugin
			info.Signatures = append(info.Signatures, si)
		}
	}
	return info, nil
}

// decodeToken reads a JWT's header and claims without verifying it.
func decodeToken(tok string) (SignatureInfo, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return SignatureInfo{}, fmt.Errorf("token has %d parts, not 3", len(parts))
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	var ds bundle.DecodedSignature
	for i, v := range []any{&hdr, &ds} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return SignatureInfo{}, fmt.Errorf("token part %d: %w", i+1, err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return SignatureInfo{}, fmt.Errorf("token part %d: %w", i+1, err)
		}
	}
	si := SignatureInfo{Algorithm: hdr.Alg, KeyID: hdr.Kid, Scope: ds.Scope, Issuer: ds.Issuer, IssuedAt: ds.IssuedAt}
	if si.KeyID == "" {
		si.KeyID = ds.KeyID
	}
	si.Files = []string{}
	for _, f := range ds.Files {
		si.Files = append(si.Files, f.Name)
	}
	slices.Sort(si.Files)
	return si, nil
}
