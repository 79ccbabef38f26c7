package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeECKey(t *testing.T, dir, name string) (priv, pub string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalECPrivateKey(k)
	pder, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	priv, pub = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".pub.pem")
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder}), 0o644); err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

func TestBundleCommands(t *testing.T) {
	dir := t.TempDir()
	priv, pub := writeECKey(t, dir, "key")
	_, otherPub := writeECKey(t, dir, "other")
	policy := filepath.Join("..", "..", "bundles", "testdata", "policy")
	plain, signed := filepath.Join(dir, "b.tar.gz"), filepath.Join(dir, "b.signed.tar.gz")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"build", []string{"bundle", "build", policy, "-o", plain, "--revision", "r1"}, exitOK, ""},
		{"sign", []string{"bundle", "sign", plain, "--signing-key", priv, "--signing-alg", "ES256", "--key-id", "k1", "-o", signed}, exitOK, ""},
		{"verify ok", []string{"bundle", "verify", signed, "--verification-key", pub, "--key-id", "k1"}, exitOK, `revision "r1"`},
		{"verify unsigned", []string{"bundle", "verify", plain, "--verification-key", pub}, exitError, ".signatures.json"},
		{"verify wrong key", []string{"bundle", "verify", signed, "--verification-key", otherPub}, exitError, ".signatures.json"},
		{"verify no key", []string{"bundle", "verify", signed}, exitUsage, "--verification-key"},
		{"verify private key", []string{"bundle", "verify", signed, "--verification-key", priv}, exitUsage, "private key"},
		{"sign no output", []string{"bundle", "sign", plain, "--signing-key", priv}, exitUsage, "-o"},
		{"sign wrong alg", []string{"bundle", "sign", plain, "--signing-key", priv, "--signing-alg", "RS256", "-o", filepath.Join(dir, "x")}, exitError, "RS256"},
		{"build not a dir", []string{"bundle", "build", plain}, exitUsage, "not a directory"},
		{"inspect", []string{"bundle", "inspect", signed}, exitOK, `key id "k1"`},
		{"inspect json", []string{"bundle", "inspect", signed, "--output", "json"}, exitOK, `"revision": "r1"`},
		{"inspect bad format", []string{"bundle", "inspect", signed, "--output", "xml"}, exitUsage, "xml"},
		{"inspect missing", []string{"bundle", "inspect", filepath.Join(dir, "nope.tar.gz")}, exitUsage, "nope"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := run(tt.args, strings.NewReader(""), &out, &errOut)
		if code != tt.wantCode {
			t.Fatalf("%s: exit %d, want %d (stderr %s)", tt.name, code, tt.wantCode, errOut.String())
		}
		if !strings.Contains(out.String()+errOut.String(), tt.wantOut) {
			t.Errorf("%s: output %q lacks %q", tt.name, out.String()+errOut.String(), tt.wantOut)
		}
	}
}

// TestEvalEnforcesSignedBundles: with a verification key, eval runs a bundle
// signed with its private key and refuses an unsigned one, naming why.
func TestEvalEnforcesSignedBundles(t *testing.T) {
	dir := t.TempDir()
	priv, pub := writeECKey(t, dir, "k")
	policy := filepath.Join(dir, "policy")
	os.MkdirAll(policy, 0o755)
	os.WriteFile(filepath.Join(policy, "p.rego"), []byte("package toolgate.tier1\n\ndecision := {\"decision\": \"escalate\", \"reasons\": []}\n"), 0o600)
	unsigned := filepath.Join(dir, "b.tar.gz")
	signed := filepath.Join(dir, "b.signed.tar.gz")
	if code, _, errs := runCLI(t, "", "bundle", "build", policy, "-o", unsigned, "--revision", "r7"); code != 0 {
		t.Fatalf("build: %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "", "bundle", "sign", unsigned, "--signing-key", priv, "-o", signed); code != 0 {
		t.Fatalf("sign: %d %s", code, errs)
	}
	r := req("trusted", "file_read", `{}`)
	code, out, errs := runCLI(t, r, "eval", "--no-state", "--bundle", signed, "--verification-key", pub)
	if code != exitEscalate || !strings.Contains(out, `"revision":"r7"`) {
		t.Fatalf("signed: exit %d %s %s", code, out, errs)
	}
	code, _, errs = runCLI(t, r, "eval", "--no-state", "--bundle", unsigned, "--verification-key", pub)
	if code != exitUsage || !strings.Contains(errs, ".signatures.json") {
		t.Fatalf("unsigned: exit %d %s", code, errs)
	}
	code, _, errs = runCLI(t, r, "eval", "--no-state", "--verification-key", pub)
	if code != exitUsage || !strings.Contains(errs, "not signed") {
		t.Fatalf("embedded with key: exit %d %s", code, errs)
	}
}
