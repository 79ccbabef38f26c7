package bundles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"
)

// Sign reads a .tar.gz bundle from in and writes to out the same files, byte
// for byte, plus a .signatures.json: one JWT, signed with key, listing the
// SHA-256 of every file, as `opa sign` computes them (JSON and YAML data and
// the manifest hashed by value, everything else by bytes). An existing
// .signatures.json is replaced. The bundle must parse: Sign refuses to sign
// what OPA would not load.
func Sign(ctx context.Context, in io.Reader, out io.Writer, key SigningKey) error {
	cfg, keyID, err := key.signingConfig()
	if err != nil {
		return err
	}
	data, err := readLimited(in)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	if _, err := readBundle(data, "", nil); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	rb, err := readRaw("", data)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	token, err := signFiles(rb.Files, cfg, keyID, key.Scope)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	sigs, err := json.MarshalIndent(bundle.SignaturesConfig{Signatures: []string{token}}, "", " ")
	if err != nil {
		return err
	}
	files := append(rb.Files[:len(rb.Files):len(rb.Files)], rawFile{Path: "/" + SignaturesFile, Data: sigs})
	if err := writeArchive(out, files); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	return nil
}

// signFiles hashes the files as OPA's verifier will and signs the list.
func signFiles(files []rawFile, cfg *bundle.SigningConfig, keyID, scope string) (string, error) {
	h, err := bundle.NewSignatureHasher(bundle.SHA256)
	if err != nil {
		return "", err
	}
	infos := make([]bundle.FileInfo, 0, len(files))
	for _, f := range files {
		var v any = f.Data
		if bundle.IsStructuredDoc(f.Name) {
			if err := util.Unmarshal(f.Data, &v); err != nil {
				return "", fmt.Errorf("%s: %w", f.Name, err)
			}
		}
		sum, err := h.HashFile(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", f.Name, err)
		}
		infos = append(infos, bundle.NewFile(f.Name, hex.EncodeToString(sum), string(bundle.SHA256)))
	}
	if scope != "" {
		// OPA takes extra claims only from a file; the key id then travels
		// in the JWT header alone, which is where OPA looks first.
		claims, err := json.Marshal(map[string]any{"scope": scope})
		if err != nil {
			return "", err
		}
		f, err := os.CreateTemp("", "toolgate-claims-*.json")
		if err != nil {
			return "", err
		}
		defer os.Remove(f.Name())
		_, werr := f.Write(claims)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", werr
		}
		c := *cfg
		c.ClaimsPath = f.Name()
		cfg = &c
	}
	return bundle.GenerateSignedToken(infos, cfg, keyID)
}

// writeArchive writes files as a .tar.gz with fixed times and modes, so the
// same files give the same bytes.
func writeArchive(w io.Writer, files []rawFile) error {
	gw := gzip.NewWriter(w)
	tw := tar.NewWriter(gw)
	for _, f := range files {
		hdr := &tar.Header{
			Name:     f.Path,
			Mode:     0o644,
			Size:     int64(len(f.Data)),
			Typeflag: tar.TypeReg,
			ModTime:  time.Unix(0, 0).UTC(),
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gw.Close()
}

// readBundle parses an archive with OPA's bundle reader. With cfg nil any
// signature is ignored; otherwise the signature is mandatory and checked.
// Delta bundles are refused: toolgate needs whole snapshots.
func readBundle(data []byte, name string, cfg *bundle.VerificationConfig) (*bundle.Bundle, error) {
	tl := bundle.NewTarballLoaderWithBaseURL(bytes.NewReader(data), name).WithSizeLimitBytes(MaxBundleBytes)
	r := bundle.NewCustomReader(tl).
		WithRegoVersion(ast.RegoV1).
		WithSizeLimitBytes(MaxBundleBytes).
		WithProcessAnnotations(true)
	if cfg != nil {
		r = r.WithBundleVerificationConfig(cfg)
	} else {
		r = r.WithSkipBundleVerification(true)
	}
	b, err := r.Read()
	if err != nil {
		return nil, err
	}
	if b.Type() == bundle.DeltaBundleType {
		return nil, errors.New("delta bundles are not supported: give a snapshot bundle")
	}
	return &b, nil
}
