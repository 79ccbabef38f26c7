package audit

import (
	"bytes"
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// BenchmarkAppend measures durable appends (hash, sign, BEGIN IMMEDIATE,
// insert, commit) one at a time, for each key type and synchronous mode.
func BenchmarkAppend(b *testing.B) {
	for _, keyType := range []string{KeyECDSAP256, KeyEd25519} {
		for _, sync := range []string{"NORMAL", "FULL"} {
			b.Run(keyType+"/sync="+sync, func(b *testing.B) {
				ctx := context.Background()
				db := openDB(b, filepath.Join(b.TempDir(), "toolgate.db"), "_pragma=synchronous("+sync+")")
				signer, _ := newKey(b, keyType)
				l, err := Open(ctx, db, signer, Options{})
				if err != nil {
					b.Fatal(err)
				}
				recs := make([]Record, 64)
				for i := range recs {
					recs[i] = record(i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if _, err := l.Append(ctx, recs[i%len(recs)]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}

// BenchmarkVerify measures a verification of a 5,000-entry log
// (checkpoints every 100): every signature, or anchored on checkpoints.
func BenchmarkVerify(b *testing.B) {
	const n = 5000
	for _, keyType := range []string{KeyECDSAP256, KeyEd25519} {
		for _, anchored := range []bool{false, true} {
			name := keyType + "/signatures=all"
			if anchored {
				name = keyType + "/signatures=anchored"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				db := openDB(b, filepath.Join(b.TempDir(), "toolgate.db"), "_pragma=synchronous(OFF)")
				signer, v := newKey(b, keyType)
				l := fill(b, db, signer, Options{}, n)
				if err := l.Close(ctx); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					rep, err := VerifyWith(ctx, db, v, VerifyOptions{Anchored: anchored})
					if err != nil || !rep.OK || rep.Entries != n {
						b.Fatalf("%+v %v", rep, err)
					}
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}

// BenchmarkAppendParallel is BenchmarkAppend (ECDSA P-256, synchronous=NORMAL)
// from 8 goroutines at once: concurrent appends share transactions (group
// commit), each entry still hashed, linked and signed on its own.
func BenchmarkAppendParallel(b *testing.B) {
	ctx := context.Background()
	db := openDB(b, filepath.Join(b.TempDir(), "toolgate.db"), "_pragma=synchronous(NORMAL)")
	signer, _ := newKey(b, KeyECDSAP256)
	l, err := Open(ctx, db, signer, Options{})
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]Record, 64)
	for i := range recs {
		recs[i] = record(i)
	}
	var n atomic.Int64
	b.SetParallelism(4) // 8 goroutines on 2 cores
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Append(ctx, recs[n.Add(1)%int64(len(recs))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkSign measures one entry's signature (of its 32-byte digest) with
// each key type: the part of an append that does not depend on SQLite.
func BenchmarkSign(b *testing.B) {
	digest := entryDigest(&row{seq: 1, prevHash: GenesisHash})
	for _, keyType := range []string{KeyECDSAP256, KeyEd25519} {
		b.Run(keyType, func(b *testing.B) {
			signer, _ := newKey(b, keyType)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := signer.SignMessage(bytes.NewReader(digest)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
