package bundles

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"
)

// DefaultKeyID is the key id used when none is given; it is OPA's default too
// (opa build --verification-key-id).
const DefaultKeyID = "default"

// SigningKey is a private key in PEM (PKCS#1, PKCS#8 or SEC 1, unencrypted).
// Alg is RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384 or ES512;
// empty means the algorithm that fits the key (RS256 for RSA, ES256 for
// P-256, ES384 for P-384, ES512 for P-521). KeyID goes into the JWT header
// ("kid"); empty means DefaultKeyID. Scope, when set, becomes the token's
// "scope" claim, which a verifier configured with a scope must match.
type SigningKey struct {
	PEM   []byte
	Alg   string
	KeyID string
	Scope string
}

// VerificationKey is a public key (or certificate) in PEM. Alg and KeyID
// default as for SigningKey. The key configured here is always the one used,
// whatever key id the bundle's token names. Scope, when set, must equal the
// token's scope claim.
type VerificationKey struct {
	PEM   []byte
	KeyID string
	Alg   string
	Scope string
}

// algorithms by key family.
var (
	rsaAlgs = map[string]bool{"RS256": true, "RS384": true, "RS512": true, "PS256": true, "PS384": true, "PS512": true}
	ecAlgs  = map[string]string{"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
)

// parsePEM decodes the single PEM block of a key, rejecting anything before
// it that is not whitespace (OPA would otherwise take the text for a file
// name).
func parsePEM(data []byte, what string) (*pem.Block, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%s: empty", what)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block found", what)
	}
	if x509.IsEncryptedPEMBlock(block) { //nolint:staticcheck // only to refuse them clearly
		return nil, fmt.Errorf("%s: encrypted PEM keys are not supported", what)
	}
	return block, nil
}

func parsePrivateKey(data []byte) (any, *pem.Block, error) {
	block, err := parsePEM(data, "signing key")
	if err != nil {
		return nil, nil, err
	}
	var key any
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, nil, fmt.Errorf("signing key: PEM block %q is not a private key", block.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("signing key: %w", err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return &k.PublicKey, block, nil
	case *ecdsa.PrivateKey:
		return &k.PublicKey, block, nil
	default:
		return nil, nil, fmt.Errorf("signing key: %T keys are not supported (use RSA or ECDSA)", key)
	}
}

func parsePublicKey(data []byte) (any, *pem.Block, error) {
	block, err := parsePEM(data, "verification key")
	if err != nil {
		return nil, nil, err
	}
	var key any
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	case "RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY":
		return nil, nil, errors.New("verification key: this is a private key; give the public key")
	default:
		return nil, nil, fmt.Errorf("verification key: PEM block %q is not a public key", block.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("verification key: %w", err)
	}
	switch key.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
		return key, block, nil
	default:
		return nil, nil, fmt.Errorf("verification key: %T keys are not supported (use RSA or ECDSA)", key)
	}
}

// algFor checks alg against the key, or picks the one that fits.
func algFor(pub any, alg string) (string, error) {
	alg = strings.ToUpper(strings.TrimSpace(alg))
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if alg == "" {
			return "RS256", nil
		}
		if !rsaAlgs[alg] {
			return "", fmt.Errorf("algorithm %q does not fit an RSA key (use RS256, RS384, RS512, PS256, PS384 or PS512)", alg)
		}
		if k.N.BitLen() < 2048 {
			return "", fmt.Errorf("RSA key of %d bits is too short (2048 at least)", k.N.BitLen())
		}
		return alg, nil
	case *ecdsa.PublicKey:
		curve := k.Curve.Params().Name
		if alg == "" {
			for a, c := range ecAlgs {
				if c == curve {
					return a, nil
				}
			}
			return "", fmt.Errorf("ECDSA curve %s is not supported (use P-256, P-384 or P-521)", curve)
		}
		want, ok := ecAlgs[alg]
		if !ok {
			return "", fmt.Errorf("algorithm %q does not fit an ECDSA key (use ES256, ES384 or ES512)", alg)
		}
		if want != curve {
			return "", fmt.Errorf("algorithm %s needs a %s key, not %s", alg, want, curve)
		}
		return alg, nil
	}
	return "", fmt.Errorf("unsupported key type %T", pub)
}

// signingConfig turns a SigningKey into OPA's signing configuration.
func (k SigningKey) signingConfig() (cfg *bundle.SigningConfig, keyID string, err error) {
	pub, block, err := parsePrivateKey(k.PEM)
	if err != nil {
		return nil, "", err
	}
	alg, err := algFor(pub, k.Alg)
	if err != nil {
		return nil, "", fmt.Errorf("signing key: %w", err)
	}
	keyID = k.KeyID
	if keyID == "" {
		keyID = DefaultKeyID
	}
	// Re-encoded so that OPA sees a PEM block at the first byte.
	return bundle.NewSigningConfig(string(pem.EncodeToMemory(block)), alg, ""), keyID, nil
}

// VerificationConfig turns the key into OPA's verification configuration:
// one key, always used, signature mandatory.
func (k VerificationKey) VerificationConfig() (*bundle.VerificationConfig, error) {
	pub, block, err := parsePublicKey(k.PEM)
	if err != nil {
		return nil, err
	}
	alg, err := algFor(pub, k.Alg)
	if err != nil {
		return nil, fmt.Errorf("verification key: %w", err)
	}
	id := k.KeyID
	if id == "" {
		id = DefaultKeyID
	}
	kc := &keys.Config{Key: string(pem.EncodeToMemory(block)), Algorithm: alg, Scope: k.Scope}
	return bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{id: kc}, id, k.Scope, nil), nil
}
