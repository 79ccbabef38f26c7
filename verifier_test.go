package toolgate_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/schema"
)

func newVerifier(t *testing.T, opts ...toolgate.Option) *toolgate.Verifier {
	t.Helper()
	opts = append([]toolgate.Option{toolgate.WithDB(filepath.Join(t.TempDir(), "toolgate.db"))}, opts...)
	v, err := toolgate.New(nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func call(step int, tool, query string) toolgate.Request {
	trusted := schema.LevelTrusted
	return toolgate.Request{
		Agent:   toolgate.Agent{ID: "agent_walk", TrustLevel: &trusted},
		Action:  toolgate.Action{Type: tool, Arguments: map[string]any{"query": query}},
		Context: toolgate.Context{ConversationID: "conv_walk", StepNumber: step},
	}
}

// TestWalkThrough is DESIGN.md's walk-through, through the whole pipeline
// with a real SQLite file.
func TestWalkThrough(t *testing.T) {
	v := newVerifier(t)
	ctx := context.Background()
	steps := []struct {
		req  toolgate.Request
		want schema.Outcome
		code string
	}{
		{call(1, "calculate", "2+2"), schema.Allow, ""},
		{call(2, "calculate", "2+2"), schema.Allow, ""},
		{call(3, "calculate", "2+2"), schema.Deny, "LOOP-003"},
		{call(3, "verify_logic", "x > 1"), schema.Allow, ""},
		{call(1, "calculate", "2+2"), schema.Deny, "LOOP-002"},
	}
	for i, s := range steps {
		got, err := v.Verify(ctx, s.req)
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		if got.Outcome != s.want || (s.code != "" && !got.HasCode(s.code)) {
			t.Fatalf("call %d (step %d %s): got %s %v, want %s %s", i+1, s.req.Context.StepNumber, s.req.Action.Type, got.Outcome, got.Codes(), s.want, s.code)
		}
	}
}
