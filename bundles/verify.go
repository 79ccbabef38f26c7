package bundles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/util"
)

// VerifyError is a refused bundle: File names the file that differs from the
// signature (SignaturesFile when the signature itself is missing, malformed
// or made with another key), or is empty when OPA refused the bundle for a
// reason not tied to one file.
type VerifyError struct {
	File    string
	Problem string
	Err     error
}

func (e *VerifyError) Error() string {
	if e.File == "" {
		return "bundle refused: " + e.Problem
	}
	return "bundle refused: " + e.File + ": " + e.Problem
}

func (e *VerifyError) Unwrap() error { return e.Err }

// Verify checks the bundle at path (a .tar.gz or a directory) against key and
// returns it parsed. The signature is mandatory. A refusal is a *VerifyError
// naming the file that differs.
func Verify(ctx context.Context, path string, key VerificationKey) (*bundle.Bundle, error) {
	return Load(ctx, path, &key)
}

// diagnose re-does OPA's checks file by file, with OPA's own functions, to
// say which file differs. It is for the message only: acceptance is decided
// by OPA's reader afterwards.
func diagnose(rb *rawBundle, cfg *bundle.VerificationConfig) error {
	if rb.Signatures == nil {
		return &VerifyError{File: SignaturesFile, Problem: "missing: the bundle is not signed"}
	}
	var sc bundle.SignaturesConfig
	if err := util.NewJSONDecoder(bytes.NewReader(rb.Signatures)).Decode(&sc); err != nil {
		return &VerifyError{File: SignaturesFile, Problem: "malformed: " + err.Error(), Err: err}
	}
	signed, err := bundle.VerifyBundleSignature(sc, cfg)
	if err != nil {
		return &VerifyError{File: SignaturesFile, Problem: "signature not valid for the configured key: " + err.Error(), Err: err}
	}
	for _, f := range rb.Files {
		if _, ok := signed[f.Name]; !ok {
			problem := "not listed in the signature (added after signing)"
			if rb.IsDir {
				problem += "; a directory's signature lists files under the path it was signed with: ship a signed .tar.gz"
			}
			return &VerifyError{File: f.Name, Problem: problem}
		}
		if err := bundle.VerifyBundleFile(f.Name, *bytes.NewBuffer(f.Data), signed); err != nil {
			p := strings.TrimPrefix(err.Error(), f.Name+": ")
			return &VerifyError{File: f.Name, Problem: "content differs from the signature: " + p, Err: err}
		}
	}
	if len(signed) > 0 {
		missing := util.Keys(signed)
		slices.Sort(missing)
		return &VerifyError{File: missing[0], Problem: "listed in the signature but missing from the bundle"}
	}
	return nil
}

// loadLocal loads a directory or a .tar.gz. With cfg set, the signature is
// verified first file by file (to name the culprit), then by OPA's reader.
func loadLocal(path string, cfg *bundle.VerificationConfig) (*bundle.Bundle, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	if !st.IsDir() {
		data, err := readArchive(path)
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", path, err)
		}
		return loadArchive(path, data, cfg)
	}
	if cfg != nil {
		rb, err := readRaw(path, nil)
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", path, err)
		}
		if err := diagnose(rb, cfg); err != nil {
			return nil, fmt.Errorf("bundle %s: %w", path, err)
		}
	}
	fl := loader.NewFileLoader().WithRegoVersion(ast.RegoV1).WithProcessAnnotation(true)
	if cfg != nil {
		fl = fl.WithBundleVerificationConfig(cfg)
	} else {
		fl = fl.WithSkipBundleVerification(true)
	}
	b, err := fl.AsBundle(path)
	if err != nil {
		if cfg != nil {
			return nil, &VerifyError{Problem: err.Error(), Err: err}
		}
		return nil, err
	}
	if b.Type() == bundle.DeltaBundleType {
		return nil, fmt.Errorf("bundle %s: delta bundles are not supported", path)
	}
	return b, nil
}

// loadArchive parses and, with cfg set, verifies a .tar.gz held in memory.
func loadArchive(name string, data []byte, cfg *bundle.VerificationConfig) (*bundle.Bundle, error) {
	if cfg != nil {
		rb, err := readRaw(name, data)
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", name, err)
		}
		if err := diagnose(rb, cfg); err != nil {
			return nil, fmt.Errorf("bundle %s: %w", name, err)
		}
	}
	b, err := readBundle(data, "", cfg)
	if err != nil {
		if cfg != nil {
			var ve *VerifyError
			if !errors.As(err, &ve) {
				err = &VerifyError{Problem: err.Error(), Err: err}
			}
		}
		return nil, fmt.Errorf("bundle %s: %w", name, err)
	}
	return b, nil
}

// Load reads a bundle from a directory, a .tar.gz file or an http(s) URL.
// With key set the bundle must be signed by it, or Load returns a
// *VerifyError; with key nil any signature is ignored. OPA's advisory
// GHSA-g2pf-6v5v-qcc8 is why a configured key makes verification mandatory
// and why this never goes through rego.LoadBundle, which cannot verify.
func Load(ctx context.Context, src string, key *VerificationKey) (*bundle.Bundle, error) {
	var cfg *bundle.VerificationConfig
	if key != nil {
		var err error
		if cfg, err = key.VerificationConfig(); err != nil {
			return nil, err
		}
	}
	if isURL(src) {
		res, err := fetch(ctx, defaultClient, src, "")
		if err != nil {
			return nil, err
		}
		if res.notModified {
			return nil, fmt.Errorf("bundle %s: 304 Not Modified without an ETag sent", src)
		}
		b, err := loadArchive(src, res.body, cfg)
		if err != nil {
			return nil, err
		}
		b.Etag = res.etag
		return b, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return loadLocal(src, cfg)
}
