package bundles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// testKey is a key pair in PEM, written to a temporary directory too.
type testKey struct {
	Alg               string
	Private, Public   []byte
	PrivPath, PubPath string
}

var (
	keysOnce sync.Once
	ecKey    *ecdsa.PrivateKey
	ecKey2   *ecdsa.PrivateKey
	rsaKey   *rsa.PrivateKey
)

func genKeys(t testing.TB) {
	keysOnce.Do(func() {
		var err error
		if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if ecKey2, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
}

// newKey returns the ES256 (P-256), the second ES256, or the RS256 key as PEM files.
func newKey(t testing.TB, which string) testKey {
	t.Helper()
	genKeys(t)
	var priv any
	var alg string
	switch which {
	case "ES256":
		priv, alg = ecKey, "ES256"
	case "ES256-other":
		priv, alg = ecKey2, "ES256"
	case "RS256":
		priv, alg = rsaKey, "RS256"
	default:
		t.Fatalf("unknown key %q", which)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	var pub any
	switch k := priv.(type) {
	case *ecdsa.PrivateKey:
		pub = &k.PublicKey
	case *rsa.PrivateKey:
		pub = &k.PublicKey
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	k := testKey{
		Alg:     alg,
		Private: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		Public:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}),
	}
	dir := t.TempDir()
	k.PrivPath, k.PubPath = filepath.Join(dir, "key.pem"), filepath.Join(dir, "pub.pem")
	if err := os.WriteFile(k.PrivPath, k.Private, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k.PubPath, k.Public, 0o644); err != nil {
		t.Fatal(err)
	}
	return k
}

// buildBundle builds testdata/policy with a revision.
func buildBundle(t testing.TB, revision string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Build(context.Background(), filepath.Join("testdata", "policy"), &buf, BuildOptions{Revision: revision}); err != nil {
		t.Fatalf("Build: %v", err)
	}
	return buf.Bytes()
}

// signedBundle builds and signs testdata/policy.
func signedBundle(t testing.TB, revision string, k testKey, keyID string) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := Sign(context.Background(), bytes.NewReader(buildBundle(t, revision)), &out, SigningKey{PEM: k.Private, KeyID: keyID}); err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return out.Bytes()
}

func writeFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type entry struct {
	name string
	data []byte
}

func untar(t testing.TB, data []byte) []entry {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []entry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{h.Name, b})
	}
}

func retar(t testing.TB, es []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gw)
	for _, e := range es {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// edit returns the archive with fn applied to the entry named name.
func edit(t testing.TB, data []byte, name string, fn func([]byte) []byte) []byte {
	t.Helper()
	es := untar(t, data)
	found := false
	for i := range es {
		if es[i].name == name {
			es[i].data = fn(es[i].data)
			found = true
		}
	}
	if !found {
		t.Fatalf("no %s in the archive", name)
	}
	return retar(t, es)
}
