package adapters_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/adapters"
	"github.com/toolgate/toolgate/schema"
)

// BenchmarkHookHandle is one Claude Code PreToolUse decided in process:
// parse, next step, recorded results, transcript, Verify (Tier 1 with
// state: reserve and commit), answer.
func BenchmarkHookHandle(b *testing.B) {
	v := newVerifierB(b)
	s, err := adapters.OpenSessions(context.Background(), v.Store())
	if err != nil {
		b.Fatal(err)
	}
	trusted := schema.LevelTrusted
	h := &adapters.Hook{Verifier: v, Sessions: s, Dialect: adapters.ClaudeCode, AgentID: "bench", TrustLevel: &trusted}
	in := payloadB(b, "claude_pre_bash.json")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// A session per call: the same command three times in a row
		// would be LOOP-003.
		p := bytes.Replace(in, []byte("3b9d2f6e-8a41-4c1e-9f0a-5d7c2e1b4a90"), fmt.Appendf(nil, "bench-%d", i), 1)
		a := h.Handle(context.Background(), bytes.NewReader(p))
		if a.Exit != 0 || a.Verdict == nil || a.Verdict.Outcome != schema.Allow {
			b.Fatalf("exit %d: %s %s", a.Exit, a.Stdout, a.Stderr)
		}
	}
}
