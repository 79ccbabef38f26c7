package llm_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/llm"
	"github.com/toolgate/toolgate/internal/openaitest"
)

func TestCutKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", 10) // 20 bytes
	for n := -1; n <= 21; n++ {
		if got := llm.Cut(s, n); !strings.HasPrefix(s, got) || len(got) > max(n, 0) || !utf8.ValidString(got) {
			t.Errorf("Cut(%d) = %q", n, got)
		}
		if got := llm.CutStart(s, n); !strings.HasSuffix(s, got) || len(got) > max(n, 0) || !utf8.ValidString(got) {
			t.Errorf("CutStart(%d) = %q", n, got)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{`{"a":1}`, true},
		{"  {\"a\":1}\n", true},
		{"```json\n{\"a\":1}\n```", true},
		{"```\n{\"a\":1}\n```", true},
		{`{"a":1} trailing`, false},
		{`{"a":1}}`, false},
		{`{"a":1}{"a":2}`, false},
		{"", false},
		{"```json\n```", false},
		{"prose", false},
	}
	for _, tt := range tests {
		var v map[string]any
		if err := llm.DecodeJSON(tt.in, &v); (err == nil) != tt.ok {
			t.Errorf("DecodeJSON(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

func TestCompleteSumsAttempts(t *testing.T) {
	srv := openaitest.New(t,
		openaitest.Status(429, ""),
		openaitest.Status(502, "bad gateway"),
		openaitest.Reply("hello").WithUsage(11, 3))
	c, err := llm.New(llm.Config{BaseURL: srv.BaseURL() + "/", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Complete(context.Background(), []llm.Message{{Role: llm.User, Content: "hi"}}, &llm.Format{Name: "x", Schema: []byte(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "hello" || res.Attempts != 3 || res.TokensIn != 11 || res.TokensOut != 3 || res.Model != "m" {
		t.Errorf("got %+v", res)
	}
	if got := srv.Requests()[0].Path; got != "/v1/chat/completions" {
		t.Errorf("path = %q", got)
	}
}
