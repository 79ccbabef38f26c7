package audit

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"
)

func TestKeys(t *testing.T) {
	for _, keyType := range []string{KeyECDSAP256, KeyEd25519} {
		t.Run(keyType, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "keys")
			keyPath, pubPath, err := GenerateKey(dir, keyType, "s3cret")
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(keyPath)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("key mode %v, %v", fi.Mode(), err)
			}
			pemBytes, _ := os.ReadFile(keyPath)
			if !bytes.HasPrefix(pemBytes, []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----")) {
				t.Fatalf("key is not encrypted: %.60s", pemBytes)
			}
			for _, pass := range []string{"", "wrong"} {
				if _, err := LoadSigner(keyPath, pass); err == nil {
					t.Errorf("LoadSigner with passphrase %q succeeded", pass)
				}
			}
			signer, err := LoadSigner(keyPath, "s3cret")
			if err != nil {
				t.Fatal(err)
			}
			v, err := LoadVerifier(pubPath)
			if err != nil {
				t.Fatal(err)
			}
			msg := []byte("0123456789abcdef0123456789abcdef")
			sig, err := signer.SignMessage(bytes.NewReader(msg))
			if err != nil {
				t.Fatal(err)
			}
			if err := v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(msg)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := GenerateKey(dir, keyType, ""); err == nil {
				t.Fatal("GenerateKey overwrote an existing key")
			}
		})
	}
	if _, _, err := GenerateKey(t.TempDir(), "rsa", ""); err == nil {
		t.Error("rsa accepted")
	}
	plainKey, _, err := GenerateKey(t.TempDir(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(plainKey, "unexpected"); err == nil {
		t.Error("a passphrase for an unencrypted key was accepted")
	}
	if _, err := LoadVerifier(plainKey); err == nil {
		t.Error("a private key loaded as a public key")
	}
	// No type named: DefaultKeyType, Ed25519.
	sv, err := LoadSigner(plainKey, "")
	if err != nil {
		t.Fatal(err)
	}
	if pub, err := sv.PublicKey(); err != nil {
		t.Fatal(err)
	} else if _, ok := pub.(ed25519.PublicKey); !ok || DefaultKeyType != KeyEd25519 {
		t.Errorf("default key: %T, want ed25519.PublicKey", pub)
	}
}

func TestCheckKeyType(t *testing.T) {
	for kt, ok := range map[string]bool{KeyEd25519: true, KeyECDSAP256: true, "": false, "rsa": false, "ED25519": false} {
		if err := CheckKeyType(kt); (err == nil) != ok {
			t.Errorf("CheckKeyType(%q) = %v", kt, err)
		}
	}
}
