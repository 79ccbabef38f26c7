package triage

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/schema"
)

func TestYesNo(t *testing.T) {
	tests := map[string]string{
		"YES": "YES", "yes": "YES", " Yes.\n": "YES", `"NO"`: "NO", "**No**": "NO", "no!": "NO",
		"": "", "YES NO": "", "Yes, because": "", "nope": "", "y": "",
	}
	for in, want := range tests {
		if got := yesNo(in); got != want {
			t.Errorf("yesNo(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{`{"suspicious":true,"confidence":0.5,"reason":"x"}`, "```json\n{}\n```", "YES", "", "{", `{"confidence":1e400}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseAnswer(s)
		if ok && !(a.Confidence >= 0 && a.Confidence <= 1) {
			t.Fatalf("accepted confidence %v", a.Confidence)
		}
		_ = yesNo(s)
	})
}

func BenchmarkPrompt(b *testing.B) {
	req := schema.Request{Action: schema.Action{Type: "bash", Arguments: map[string]any{"command": "ls"}}}
	for i := 0; i < 20; i++ {
		req.Context.Blocks = append(req.Context.Blocks, schema.Block{Trust: schema.Untrusted, Content: strings.Repeat("page text ", 200)})
	}
	b.ReportAllocs()
	for b.Loop() {
		prompt(req, schema.Decision{})
	}
}
