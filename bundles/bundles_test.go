package bundles

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// opaRead loads a bundle with OPA's own reader and verification, keyed by
// the JWT's kid as OPA's configuration would be.
func opaRead(data []byte, k testKey, keyID string) (bundle.Bundle, error) {
	cfg := bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{
		keyID: {Key: string(k.Public), Algorithm: k.Alg},
	}, "", "", nil)
	return bundle.NewReader(bytes.NewReader(data)).WithBundleVerificationConfig(cfg).Read()
}

func TestBuildSignVerifyRoundTrip(t *testing.T) {
	tests := []struct {
		key   string
		keyID string
	}{
		{key: "ES256"},
		{key: "RS256"},
		{key: "ES256", keyID: "release-2025"},
		{key: "RS256", keyID: "ops"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"/"+tt.keyID, func(t *testing.T) {
			k := newKey(t, tt.key)
			signed := signedBundle(t, "rev-42", k, tt.keyID)
			path := writeFile(t, "tier1.tar.gz", signed)
			pub, err := os.ReadFile(k.PubPath)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Verify(context.Background(), path, VerificationKey{PEM: pub, KeyID: tt.keyID})
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got := Revision(b); got != "rev-42" {
				t.Errorf("revision = %q, want rev-42", got)
			}
			if got := Name(path, b); got != "tier1-test" {
				t.Errorf("name = %q, want the manifest's tier1-test", got)
			}
			if len(b.Modules) != 1 || b.Data["toolgate"] == nil {
				t.Errorf("modules %d, data %v", len(b.Modules), b.Data)
			}

			// OPA's own reader, with OPA's key configuration, accepts it.
			id := tt.keyID
			if id == "" {
				id = DefaultKeyID
			}
			ob, err := opaRead(signed, k, id)
			if err != nil {
				t.Fatalf("OPA's reader refused the signed bundle: %v", err)
			}
			if ob.Manifest.Revision != "rev-42" || ob.Manifest.RegoVersion == nil || *ob.Manifest.RegoVersion != 1 {
				t.Errorf("OPA read manifest %v", ob.Manifest)
			}
			if ob.Manifest.Roots == nil || !slices.Equal(*ob.Manifest.Roots, []string{"toolgate"}) {
				t.Errorf("roots = %v", ob.Manifest.Roots)
			}
		})
	}
}

func TestSignKeepsFilesByteForByte(t *testing.T) {
	k := newKey(t, "ES256")
	unsigned := buildBundle(t, "r1")
	signed := signedBundle(t, "r1", k, "")
	want := untar(t, unsigned)
	got := untar(t, signed)
	if len(got) != len(want)+1 || got[len(got)-1].name != "/"+SignaturesFile {
		t.Fatalf("signed archive entries %v", got)
	}
	for i := range want {
		if want[i].name != got[i].name || !bytes.Equal(want[i].data, got[i].data) {
			t.Errorf("entry %d: %s changed in signing", i, want[i].name)
		}
	}
	// Signing a signed bundle replaces its signature.
	var again bytes.Buffer
	if err := Sign(context.Background(), bytes.NewReader(signed), &again, SigningKey{PEM: newKey(t, "RS256").Private}); err != nil {
		t.Fatal(err)
	}
	if _, err := opaRead(again.Bytes(), newKey(t, "RS256"), DefaultKeyID); err != nil {
		t.Errorf("re-signed bundle refused: %v", err)
	}
}

// tamperSignature rewrites the JWT payload (here: the hash list an attacker
// would want to change) and keeps the old signature.
func tamperSignature(b []byte) []byte {
	var sc bundle.SignaturesConfig
	if err := json.Unmarshal(b, &sc); err != nil || len(sc.Signatures) != 1 {
		return []byte("not json")
	}
	parts := strings.Split(sc.Signatures[0], ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = bytes.Replace(payload, []byte(`"hash":"`), []byte(`"hash":"00`), 1)
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	sc.Signatures[0] = strings.Join(parts, ".")
	out, _ := json.Marshal(sc)
	return out
}

func TestTamperedBundleIsRefusedNamingTheFile(t *testing.T) {
	k := newKey(t, "ES256")
	signed := signedBundle(t, "r1", k, "")
	replace := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte {
			if !bytes.Contains(b, []byte(old)) {
				t.Fatalf("%q not found in %s", old, b)
			}
			return bytes.Replace(b, []byte(old), []byte(new), 1)
		}
	}
	tests := []struct {
		name     string
		data     []byte
		wantFile string
	}{
		{"rego changed", edit(t, signed, "/policy.rego", replace(`== "low"`, `!= "low"`)), "policy.rego"},
		{"data changed", edit(t, signed, "/data.json", replace(`"critical"`, `"low"`)), "data.json"},
		{"manifest changed", edit(t, signed, "/.manifest", replace(`"r1"`, `"r2"`)), ".manifest"},
		{"signature payload changed", edit(t, signed, "/"+SignaturesFile, tamperSignature), SignaturesFile},
		{"signature garbage", edit(t, signed, "/"+SignaturesFile, func([]byte) []byte { return []byte("{") }), SignaturesFile},
		{"file added", retar(t, append(untar(t, signed), entry{"/extra.rego", []byte("package toolgate.extra\n\nx := 1\n")})), "extra.rego"},
		{"file removed", retar(t, slices.DeleteFunc(untar(t, signed), func(e entry) bool { return e.name == "/data.json" })), "data.json"},
		{"unsigned", buildBundle(t, "r1"), SignaturesFile},
		{"signed with another key", signedBundle(t, "r1", newKey(t, "ES256-other"), ""), SignaturesFile},
		{"signed with another algorithm's key", signedBundle(t, "r1", newKey(t, "RS256"), ""), SignaturesFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "b.tar.gz", tt.data)
			_, err := Verify(context.Background(), path, VerificationKey{PEM: k.Public})
			var ve *VerifyError
			if !errors.As(err, &ve) {
				t.Fatalf("Verify = %v, want a *VerifyError", err)
			}
			if ve.File != tt.wantFile || !strings.Contains(err.Error(), tt.wantFile) {
				t.Errorf("refusal names %q (%v), want %q", ve.File, err, tt.wantFile)
			}
			// Load with the key refuses it the same way.
			if _, err := Load(context.Background(), path, &VerificationKey{PEM: k.Public}); !errors.As(err, &ve) {
				t.Errorf("Load accepted it: %v", err)
			}
			// And OPA itself refuses it too.
			if _, err := opaRead(tt.data, k, DefaultKeyID); err == nil {
				t.Errorf("OPA's reader accepted the bad bundle")
			}
		})
	}
}

func TestScope(t *testing.T) {
	k := newKey(t, "ES256")
	var out bytes.Buffer
	if err := Sign(context.Background(), bytes.NewReader(buildBundle(t, "r1")), &out, SigningKey{PEM: k.Private, Scope: "prod"}); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "b.tar.gz", out.Bytes())
	tests := []struct {
		scope string
		ok    bool
	}{{"prod", true}, {"staging", false}, {"", false}}
	for _, tt := range tests {
		_, err := Verify(context.Background(), path, VerificationKey{PEM: k.Public, Scope: tt.scope})
		if (err == nil) != tt.ok {
			t.Errorf("scope %q: err = %v, want ok=%v", tt.scope, err, tt.ok)
		}
	}
	info, err := Inspect(path)
	if err != nil || len(info.Signatures) != 1 || info.Signatures[0].Scope != "prod" || info.Signatures[0].KeyID != DefaultKeyID {
		t.Errorf("Inspect = %+v, %v", info, err)
	}
}

func TestLoadSources(t *testing.T) {
	k := newKey(t, "ES256")
	unsignedPath := writeFile(t, "plain.tar.gz", buildBundle(t, "r7"))
	signedPath := writeFile(t, "signed.tgz", signedBundle(t, "r8", k, ""))
	tests := []struct {
		name    string
		src     string
		key     *VerificationKey
		wantRev string
		wantErr bool
	}{
		{"directory, no key", filepath.Join("testdata", "policy"), nil, "", false},
		{"tar.gz, no key", unsignedPath, nil, "r7", false},
		{"signed tar.gz, no key: signature ignored", signedPath, nil, "r8", false},
		{"signed tar.gz, key", signedPath, &VerificationKey{PEM: k.Public}, "r8", false},
		{"unsigned tar.gz, key", unsignedPath, &VerificationKey{PEM: k.Public}, "", true},
		{"unsigned directory, key", filepath.Join("testdata", "policy"), &VerificationKey{PEM: k.Public}, "", true},
		{"missing file", filepath.Join(t.TempDir(), "nope.tar.gz"), nil, "", true},
		{"not a bundle", writeFile(t, "x.tar.gz", []byte("hello")), nil, "", true},
		{"bad key", unsignedPath, &VerificationKey{PEM: []byte("nope")}, "", true},
		{"private key as verification key", signedPath, &VerificationKey{PEM: k.Private}, "", true},
		{"algorithm does not fit the key", signedPath, &VerificationKey{PEM: k.Public, Alg: "RS256"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Load(context.Background(), tt.src, tt.key)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Load err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && Revision(b) != tt.wantRev {
				t.Errorf("revision %q, want %q", Revision(b), tt.wantRev)
			}
		})
	}
}

func TestBuildRefusesBadPolicies(t *testing.T) {
	tests := []struct {
		dir  string
		opts BuildOptions
		want string
	}{
		{filepath.Join("testdata", "broken"), BuildOptions{}, "policy.rego"},
		{filepath.Join("testdata", "outside-roots"), BuildOptions{}, "root"},
		{filepath.Join("testdata", "policy"), BuildOptions{Roots: []string{"elsewhere"}}, "root"},
		{filepath.Join("testdata", "nope"), BuildOptions{}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			var buf bytes.Buffer
			err := Build(context.Background(), tt.dir, &buf, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build = %v, want an error mentioning %q", err, tt.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes on failure", buf.Len())
			}
		})
	}
}

func TestBuildOptions(t *testing.T) {
	var buf bytes.Buffer
	err := Build(context.Background(), filepath.Join("testdata", "policy"), &buf, BuildOptions{Revision: "v9", Roots: []string{"toolgate/tier1", "toolgate/registry"}, Name: "custom"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.NewReader(&buf).Read()
	if err != nil {
		t.Fatal(err)
	}
	if b.Manifest.Revision != "v9" || Name("x.tar.gz", &b) != "custom" || len(*b.Manifest.Roots) != 2 {
		t.Errorf("manifest %v", b.Manifest)
	}
}

func TestSignRefusals(t *testing.T) {
	ec, rs := newKey(t, "ES256"), newKey(t, "RS256")
	good := buildBundle(t, "r1")
	tests := []struct {
		name string
		in   []byte
		key  SigningKey
	}{
		{"public key", good, SigningKey{PEM: ec.Public}},
		{"no key", good, SigningKey{}},
		{"ES256 with RSA key", good, SigningKey{PEM: rs.Private, Alg: "ES256"}},
		{"RS256 with EC key", good, SigningKey{PEM: ec.Private, Alg: "RS256"}},
		{"HMAC", good, SigningKey{PEM: ec.Private, Alg: "HS256"}},
		{"not a bundle", []byte("plain text"), SigningKey{PEM: ec.Private}},
		{"broken rego", retar(t, append(untar(t, good), entry{"/bad.rego", []byte("package x\n\ny := {")})), SigningKey{PEM: ec.Private}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Sign(context.Background(), bytes.NewReader(tt.in), &out, tt.key); err == nil {
				t.Fatal("Sign succeeded")
			}
			if out.Len() != 0 {
				t.Errorf("wrote %d bytes on failure", out.Len())
			}
		})
	}
}

func TestInspect(t *testing.T) {
	k := newKey(t, "RS256")
	path := writeFile(t, "tier1.tar.gz", signedBundle(t, "r5", k, "ops"))
	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range info.Files {
		names = append(names, f.Name)
	}
	if info.Revision != "r5" || info.Name != "tier1-test" || !info.Signed || !slices.Equal(info.Roots, []string{"toolgate"}) {
		t.Errorf("info = %+v", info)
	}
	if !slices.Equal(names, []string{".manifest", "data.json", "policy.rego"}) {
		t.Errorf("files = %v", names)
	}
	if len(info.Signatures) != 1 || info.Signatures[0].Algorithm != "RS256" || info.Signatures[0].KeyID != "ops" || len(info.Signatures[0].Files) != 3 {
		t.Errorf("signatures = %+v", info.Signatures)
	}
	dirInfo, err := Inspect(filepath.Join("testdata", "policy"))
	if err != nil || dirInfo.Signed || dirInfo.Name != "tier1-test" {
		t.Errorf("directory info = %+v, %v", dirInfo, err)
	}
}

func TestName(t *testing.T) {
	tests := []struct{ src, want string }{
		{"/srv/bundles/tier1.tar.gz", "tier1"},
		{"policies", "policies"},
		{"b.tgz", "b"},
		{"https://example.test/bundles/prod.tar.gz?x=1", "prod"},
		{"https://example.test/", "example.test"},
	}
	for _, tt := range tests {
		if got := Name(tt.src, &bundle.Bundle{}); got != tt.want {
			t.Errorf("Name(%q) = %q, want %q", tt.src, got, tt.want)
		}
	}
	b := &bundle.Bundle{Manifest: bundle.Manifest{Metadata: map[string]any{"name": "named"}}}
	if got := Name("x.tar.gz", b); got != "named" {
		t.Errorf("Name with metadata = %q", got)
	}
}

func TestSignedDirectoryIsPathSensitive(t *testing.T) {
	k := newKey(t, "ES256")
	dir := filepath.Join(t.TempDir(), "unpacked")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range untar(t, signedBundle(t, "r1", k, "")) {
		if err := os.WriteFile(filepath.Join(dir, strings.TrimPrefix(e.name, "/")), e.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Verify(context.Background(), dir, VerificationKey{PEM: k.Public})
	var ve *VerifyError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "ship a signed .tar.gz") {
		t.Fatalf("Verify of an unpacked signed archive = %v", err)
	}
}
