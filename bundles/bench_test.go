package bundles

import (
	"bytes"
	"context"
	"io"
	"testing"
)

func BenchmarkBuild(b *testing.B) {
	for b.Loop() {
		_ = buildBundle(b, "r1")
	}
}

func BenchmarkSign(b *testing.B) {
	for _, alg := range []string{"ES256", "RS256"} {
		b.Run(alg, func(b *testing.B) {
			k := newKey(b, alg)
			in := buildBundle(b, "r1")
			for b.Loop() {
				if err := Sign(context.Background(), bytes.NewReader(in), io.Discard, SigningKey{PEM: k.Private}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, alg := range []string{"ES256", "RS256"} {
		b.Run(alg, func(b *testing.B) {
			k := newKey(b, alg)
			path := writeFile(b, "b.tar.gz", signedBundle(b, "r1", k, ""))
			key := VerificationKey{PEM: k.Public}
			for b.Loop() {
				if _, err := Verify(context.Background(), path, key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
