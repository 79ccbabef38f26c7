package conformance

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// thousandCases is a suite of n independent single-request cases.
func thousandCases(tb testing.TB, n int) *Suite {
	tb.Helper()
	var b strings.Builder
	b.WriteString("name: bench\ndefaults:\n  agent: {id: ci, trust_level: supervised}\n  context: {conversation_id: c, step_number: 1}\ncases:\n")
	tools := []struct{ tool, decision string }{{"calculate", "allow"}, {"write_file", "pending"}, {"bash", "deny"}, {"nope", "deny"}}
	for i := range n {
		t := tools[i%len(tools)]
		fmt.Fprintf(&b, "  - name: case %d\n    request: {action: {type: %s, arguments: {query: \"q%d\", path: \"/tmp/x%d\"}}}\n    decision: %s\n", i, t.tool, i, i, t.decision)
	}
	s, err := Parse(filepath.Join(tb.TempDir(), "bench.yaml"), []byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkRun1000 runs 1,000 independent cases: shared stateless Verifier
// (mode=shared) and one fresh SQLite file per case (mode=fresh-db).
func BenchmarkRun1000(b *testing.B) {
	s := thousandCases(b, 1000)
	for _, fresh := range []bool{false, true} {
		name := "mode=shared"
		if fresh {
			name = "mode=fresh-db"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r, err := Run(context.Background(), []*Suite{s}, Options{FreshDB: fresh, TempDir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				if !r.OK() {
					b.Fatalf("%d failed, %d errors", r.Failed, r.Errors)
				}
			}
		})
	}
}
