package audit

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Key types GenerateKey accepts.
const (
	KeyEd25519   = "ed25519"
	KeyECDSAP256 = "ecdsa-p256"
)

// DefaultKeyType is the key type GenerateKey writes when none is named.
// Ed25519 signatures need no randomness (RFC 8032: the nonce is derived
// from the key and the message, so a weak random source at signing time
// cannot leak the key, as it can with ECDSA), are shorter (64 bytes), and
// are made in about 24 µs with 5 allocations where ECDSA P-256 takes about
// 40 µs and 65 (BenchmarkSign on the 2-core development machine): a
// signature per decision is, after the policy, the largest single cost of
// an audited decision.
const DefaultKeyType = KeyEd25519

// CheckKeyType returns an error naming the key types GenerateKey makes
// unless keyType is one of them.
func CheckKeyType(keyType string) error {
	if keyType == KeyEd25519 || keyType == KeyECDSAP256 {
		return nil
	}
	return fmt.Errorf("key type %q is not %s or %s", keyType, KeyEd25519, KeyECDSAP256)
}

// Key file names GenerateKey writes in its directory.
const (
	KeyFile    = "toolgate.key"
	PubKeyFile = "toolgate.pub"
)

// GenerateKey writes a new signing key pair to dir: toolgate.key (PKCS#8 PEM,
// mode 0600, encrypted with passphrase when one is given, as sigstore's
// "ENCRYPTED SIGSTORE PRIVATE KEY") and toolgate.pub (PKIX PEM). It never
// overwrites an existing key.
func GenerateKey(dir, keyType, passphrase string) (keyPath, pubPath string, err error) {
	if keyType == "" {
		keyType = DefaultKeyType
	}
	if err := CheckKeyType(keyType); err != nil {
		return "", "", fmt.Errorf("audit: %w", err)
	}
	var priv crypto.Signer
	if keyType == KeyEd25519 {
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	} else {
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return "", "", fmt.Errorf("audit: generate key: %w", err)
	}
	var privPEM []byte
	if passphrase != "" {
		der, err := cryptoutils.MarshalPrivateKeyToEncryptedDER(priv, cryptoutils.StaticPasswordFunc([]byte(passphrase)))
		if err != nil {
			return "", "", fmt.Errorf("audit: encrypt key: %w", err)
		}
		privPEM = cryptoutils.PEMEncode(cryptoutils.EncryptedSigstorePrivateKeyPEMType, der)
	} else if privPEM, err = cryptoutils.MarshalPrivateKeyToPEM(priv); err != nil {
		return "", "", fmt.Errorf("audit: encode key: %w", err)
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		return "", "", fmt.Errorf("audit: encode public key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("audit: %w", err)
	}
	keyPath, pubPath = filepath.Join(dir, KeyFile), filepath.Join(dir, PubKeyFile)
	if err := writeNew(keyPath, privPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(pubPath, pubPEM, 0o644); err != nil {
		_ = os.Remove(keyPath)
		return "", "", err
	}
	return keyPath, pubPath, nil
}

// writeNew creates path (failing if it exists), writes data and syncs it.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("audit: write %s: %w", path, err)
	}
	return nil
}

// LoadSigner reads a PEM private key (ECDSA P-256 or Ed25519; encrypted when
// passphrase is given). Signatures use SHA-256 for ECDSA.
func LoadSigner(path, passphrase string) (signature.SignerVerifier, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit: signing key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		slog.Warn("audit: signing key is readable by others; chmod 600 it", "path", path, "mode", fi.Mode().Perm().String())
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("audit: signing key %s: not PEM", path)
	}
	var pf cryptoutils.PassFunc
	switch {
	case block.Type == string(cryptoutils.EncryptedSigstorePrivateKeyPEMType) || block.Type == "ENCRYPTED PRIVATE KEY":
		if passphrase == "" {
			return nil, fmt.Errorf("audit: signing key %s is encrypted: a passphrase is needed", path)
		}
		pf = cryptoutils.StaticPasswordFunc([]byte(passphrase))
	case passphrase != "":
		return nil, fmt.Errorf("audit: signing key %s is not encrypted but a passphrase was given", path)
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(data, pf)
	if err != nil {
		return nil, fmt.Errorf("audit: signing key %s: %w", path, err)
	}
	if err := checkKeyType(priv); err != nil {
		return nil, fmt.Errorf("audit: signing key %s: %w", path, err)
	}
	sv, err := signature.LoadSignerVerifier(priv, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("audit: signing key %s: %w", path, err)
	}
	return sv, nil
}

// LoadVerifier reads a PEM public key written by GenerateKey.
func LoadVerifier(pubPath string) (signature.Verifier, error) {
	data, err := os.ReadFile(pubPath)
	if err != nil {
		return nil, fmt.Errorf("audit: public key: %w", err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("audit: public key %s: %w", pubPath, err)
	}
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("audit: public key %s: only ECDSA P-256 is supported", pubPath)
		}
	case ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("audit: public key %s: %T is not ECDSA P-256 or Ed25519", pubPath, pub)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("audit: public key %s: %w", pubPath, err)
	}
	return v, nil
}

func checkKeyType(priv crypto.PrivateKey) error {
	switch k := priv.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return errors.New("only ECDSA P-256 is supported")
		}
	case ed25519.PrivateKey:
	default:
		return fmt.Errorf("%T is not ECDSA P-256 or Ed25519", priv)
	}
	return nil
}
