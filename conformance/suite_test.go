package conformance

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	const head = "name: s\ndefaults:\n  agent: {id: a, trust_level: trusted}\n  context: {conversation_id: c, step_number: 1}\n"
	tests := []struct {
		name  string
		yaml  string
		line  int
		field string
		want  string // in the problem
	}{
		{"unknown top-level key", "name: s\nbundel: x\ncases: []\n", 2, "bundel", "unknown key"},
		{"unknown case key", head + "cases:\n  - name: a\n    request: {action: {type: calculate}}\n    decison: allow\n", 8, "decison", "unknown key"},
		{"unknown step key", head + "cases:\n  - name: a\n    steps:\n      - request: {}\n        decision: allow\n        codez: [X]\n", 10, "codez", "unknown key"},
		{"unknown agent fixture key", "name: s\nfixtures:\n  agents:\n    - name: a\n      trusted: 3\ncases:\n  - {name: x, request: {}, decision: allow}\n", 5, "trusted", "unknown key"},
		{"bad decision", head + "cases:\n  - name: a\n    request: {}\n    decision: maybe\n", 8, "decision", "not \"maybe\""},
		{"bad trust in fixture", "name: s\nfixtures:\n  agents:\n    - name: a\n      trust: root\ncases:\n  - {name: x, request: {}, decision: allow}\n", 5, "trust", "root"},
		{"unknown request key", head + "cases:\n  - name: a\n    request:\n      action: {type: calculate, argumnts: {}}\n    decision: allow\n", 8, "request.action.argumnts", "unknown key in the request"},
		{"undefined agent ref", head + "cases:\n  - name: a\n    request: {agent: {ref: ghost}}\n    decision: allow\n", 6, "agent.ref", "ghost"},
		{"duplicate case", head + "cases:\n  - {name: a, request: {}, decision: allow}\n  - {name: a, request: {}, decision: allow}\n", 7, "name", "already defined at line 6"},
		{"no expectation", head + "cases:\n  - {name: a, request: {}}\n", 6, "decision", "needs an expectation"},
		{"error and decision", head + "cases:\n  - {name: a, request: {}, decision: allow, error: agent.id}\n", 6, "error", "no decision"},
		{"no request", head + "cases:\n  - {name: a, decision: allow}\n", 6, "request", "required"},
		{"no cases", "name: s\n", 1, "cases", "at least one case"},
		{"request not a mapping", head + "cases:\n  - {name: a, request: [1], decision: allow}\n", 6, "cases[0].request", "must be a mapping"},
		{"expectation beside steps", head + "cases:\n  - name: a\n    decision: allow\n    steps:\n      - {request: {}, decision: allow}\n", 6, "steps", "each step"},
		{"in-flight step with expectation", head + "cases:\n  - name: a\n    steps:\n      - {request: {}, in_flight: true, decision: allow}\n", 8, "in_flight", "no expectation"},
		{"yaml syntax", "name: [\n", 1, "", "did not find"},
		{"wrong type", "name: s\ncases: {a: 1}\n", 2, "", "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("suites/x.yaml", []byte(tt.yaml))
			var se *SuiteError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *SuiteError", err)
			}
			if se.File != "suites/x.yaml" || se.Line != tt.line || se.Field != tt.field || !strings.Contains(se.Problem, tt.want) {
				t.Fatalf("got file %q line %d field %q problem %q\nwant line %d field %q problem containing %q", se.File, se.Line, se.Field, se.Problem, tt.line, tt.field, tt.want)
			}
			if !strings.HasPrefix(se.Error(), "suites/x.yaml") {
				t.Fatalf("message %q does not start with the file", se.Error())
			}
		})
	}
}

func TestParseMergesDefaults(t *testing.T) {
	s, err := Parse("x.yaml", []byte(`
name: s
bundle: ../b
data: [d.json]
defaults:
  agent: {id: a, trust_level: trusted}
  action: {type: calculate, arguments: {query: "1", n: 2.50}}
  context: {conversation_id: c, step_number: 1}
cases:
  - name: one
    request: {action: {arguments: {query: "2"}}, context: {step_number: 3}}
    decision: allow
  - name: steps
    request: {context: {conversation_id: d}}
    steps:
      - {request: {context: {step_number: 2}}, decision: allow}
      - {request: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Bundle != "../b" || len(s.Data) != 1 || s.Data[0] != "d.json" {
		t.Fatalf("paths not resolved against the suite: %q %q", s.Bundle, s.Data)
	}
	req, err := buildRequest(s.Cases[0].Steps[0].Request, nil)
	if err != nil {
		t.Fatal(err)
	}
	if req.Action.Type != "calculate" || req.Action.Arguments["query"] != "2" || req.Context.StepNumber != 3 || req.Context.ConversationID != "c" {
		t.Fatalf("merge: %+v", req)
	}
	if n := req.Action.Arguments["n"]; n == nil || n.(interface{ String() string }).String() != "2.50" {
		t.Fatalf("numbers must stay as written: %v", n)
	}
	c := s.Cases[1]
	if !c.multi || len(c.Steps) != 2 || c.Steps[1].Name != "step 2" || !c.Steps[1].Expect.empty() {
		t.Fatalf("steps: %+v", c.Steps)
	}
	req, _ = buildRequest(c.Steps[0].Request, nil)
	if req.Context.ConversationID != "d" || req.Context.StepNumber != 2 {
		t.Fatalf("step merge: %+v", req.Context)
	}
	if s.stateless(&s.Cases[0]) != true || s.stateless(&s.Cases[1]) != false {
		t.Fatal("a single request without fixtures is stateless; steps are not")
	}
}

func TestLoadPaths(t *testing.T) {
	s, err := LoadPaths([]string{"testdata/pass", "testdata/fail/mixed.yaml"})
	if err != nil || len(s) != 2 || s[0].Name != "mixed" || s[1].Name != "basic" {
		t.Fatalf("got %v, %v", s, err)
	}
	if _, err := LoadPaths([]string{"testdata/golden-missing"}); err == nil {
		t.Fatal("a missing path must fail")
	}
	_, err = LoadPaths([]string{"testdata/pass", "testdata/pass/basic.yaml"})
	if err == nil || !strings.Contains(err.Error(), "also defined") {
		t.Fatalf("duplicate suite names must fail: %v", err)
	}
}
