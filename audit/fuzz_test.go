package audit

import (
	"strings"
	"testing"
)

// FuzzDecodeEntry feeds arbitrary stored column values to the decoder: it
// must return an entry or an error, never panic. kinds picks, bit by bit,
// other Go types for some columns (as a tampered database could hold).
func FuzzDecodeEntry(f *testing.F) {
	f.Add(int64(1), "2026-03-01T12:00:00.000000000Z", "agent_1", "allow",
		`[{"code":"PATTERN-005","rule":"r","message":"m"}]`, `[{"tier":2,"result":"approved"}]`,
		`{"agent":{"id":"a"}}`, int64(3), int64(1), []byte("sig"), uint8(0))
	f.Fuzz(func(t *testing.T, seq int64, tm, agent, decision, reasons, probes, req string, step, tier int64, sig []byte, kinds uint8) {
		cols := []any{seq, tm, agent, "conv", step, "bash", "sha256:00", "{}", decision, reasons, tier,
			"default", "rev", probes, "", req, GenesisHash, "hash", sig}
		if kinds&1 != 0 {
			cols[0] = []byte(tm)
		}
		if kinds&2 != 0 {
			cols[1] = nil
		}
		if kinds&4 != 0 {
			cols[4] = float64(step)
		}
		if kinds&8 != 0 {
			cols[9] = []byte(reasons)
		}
		if kinds&16 != 0 {
			cols[18] = tm
		}
		if kinds&32 != 0 {
			cols[18] = seq
		}
		if kinds&64 != 0 {
			cols = cols[:len(cols)-int(step&7)]
		}
		e, err := DecodeEntry(cols)
		if err == nil && (e.Seq != seq || !e.Decision.Valid()) {
			t.Fatalf("decoded %+v from %v", e, cols)
		}
		if r, err := fromColumns(cols); err == nil {
			_ = entryDigest(&r)
		}
		_, _ = ReadCheckpoint(strings.NewReader(req))
	})
}
