package bundles

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/compile"
	"github.com/open-policy-agent/opa/v1/loader"
)

// BuildOptions set the manifest of a built bundle. Empty fields keep what the
// directory's own .manifest says.
type BuildOptions struct {
	Revision string
	// Roots are the data paths the bundle owns (for example "toolgate").
	Roots []string
	// Name, when set, is recorded as the manifest's metadata "name", the
	// name decisions report for the bundle.
	Name string
}

// Build reads the policy directory dir (its .rego files, data.json and
// data.yaml files and optional .manifest), compiles it as `opa build -b`
// does, and writes an unsigned .tar.gz bundle to w with a .manifest carrying
// the revision, the roots and rego_version 1. File paths inside the archive
// are relative to dir. A .signatures.json in dir is ignored: sign the
// archive with Sign.
func Build(ctx context.Context, dir string, w io.Writer, opts BuildOptions) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("build: %s is not a directory", dir)
	}
	b, err := loader.NewFileLoader().
		WithFS(os.DirFS(dir)).
		WithRegoVersion(ast.RegoV1).
		WithProcessAnnotation(true).
		WithSkipBundleVerification(true).
		AsBundle(".")
	if err != nil {
		return fmt.Errorf("build %s: %w", dir, err)
	}
	b.Signatures = bundle.SignaturesConfig{}
	for i := range b.Modules {
		m := &b.Modules[i]
		p := strings.TrimPrefix(m.RelativePath, "/")
		m.URL, m.Path = p, p
	}
	if opts.Revision != "" {
		b.Manifest.Revision = opts.Revision
	}
	if len(opts.Roots) > 0 {
		roots := append([]string(nil), opts.Roots...)
		b.Manifest.Roots = &roots
	}
	if opts.Name != "" {
		if b.Manifest.Metadata == nil {
			b.Manifest.Metadata = map[string]any{}
		}
		b.Manifest.Metadata["name"] = opts.Name
	}
	b.Manifest.Init()
	b.Manifest.SetRegoVersion(ast.RegoV1)

	var buf bytes.Buffer
	c := compile.New().
		WithBundle(b).
		WithRegoVersion(ast.RegoV1).
		WithOutput(&buf)
	if err := c.Build(ctx); err != nil {
		return fmt.Errorf("build %s: %w", dir, err)
	}
	// Read it back as OPA will: this checks the roots against the packages
	// and the data.
	if _, err := readBundle(buf.Bytes(), "", nil); err != nil {
		return fmt.Errorf("build %s: %w", dir, err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	return nil
}
