package bundles

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/loader"
)

// MaxBundleBytes bounds a bundle: the compressed archive read from a file or
// over HTTP, and each file inside it once decompressed.
const MaxBundleBytes = 64 << 20

// SignaturesFile is the name of the signature file inside a bundle.
const SignaturesFile = ".signatures.json"

// rawFile is one file of a bundle, as OPA's bundle loaders see it.
type rawFile struct {
	// Name is the name a signature must list: the path inside a .tar.gz,
	// or for a directory the path as given plus the file's path in it
	// (which is why signed directories are path-sensitive).
	Name string
	// Path is the file's path inside the bundle, with a leading slash.
	Path string
	Data []byte
}

// rawBundle is a bundle's files before OPA parses them.
type rawBundle struct {
	Files      []rawFile
	Signatures []byte // the .signatures.json, nil when absent
	IsDir      bool
	Archive    []byte // the .tar.gz bytes; nil for a directory
}

// readArchive reads a .tar.gz file whole, up to MaxBundleBytes.
func readArchive(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f)
}

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBundleBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBundleBytes {
		return nil, fmt.Errorf("bundle larger than %d bytes", MaxBundleBytes)
	}
	return data, nil
}

// readRaw lists a bundle's files: a directory when path is one, else the
// archive in data (read from path when data is nil).
func readRaw(path string, data []byte) (*rawBundle, error) {
	rb := &rawBundle{}
	var dl bundle.DirectoryLoader
	if data == nil {
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if st.IsDir() {
			rb.IsDir = true
			dl, _, err = loader.GetBundleDirectoryLoader(path)
			if err != nil {
				return nil, err
			}
		} else if data, err = readArchive(path); err != nil {
			return nil, err
		}
	}
	if !rb.IsDir {
		rb.Archive = data
		dl = bundle.NewTarballLoaderWithBaseURL(bytes.NewReader(data), "").WithSizeLimitBytes(MaxBundleBytes)
	}
	dl = dl.WithSizeLimitBytes(MaxBundleBytes)
	for {
		f, err := dl.NextFile()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("bundle read failed: %w", err)
		}
		var buf bytes.Buffer
		n, err := f.Read(&buf, MaxBundleBytes+1)
		f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w", f.Path(), err)
		}
		if n > MaxBundleBytes {
			return nil, fmt.Errorf("%s: larger than %d bytes", f.Path(), MaxBundleBytes)
		}
		if bundle.IsSignaturesFile(f.Path()) {
			if rb.Signatures != nil {
				return nil, fmt.Errorf("bundle contains more than one %s", SignaturesFile)
			}
			rb.Signatures = buf.Bytes()
			continue
		}
		name := f.Path()
		if rb.IsDir {
			name = f.URL()
		}
		rb.Files = append(rb.Files, rawFile{
			Name: strings.TrimPrefix(name, "/"),
			Path: "/" + strings.TrimPrefix(f.Path(), "/"),
			Data: buf.Bytes(),
		})
	}
	return rb, nil
}
