package schema

import (
	"errors"
	"strings"
	"testing"
)

const validRequest = `{
  "agent": {"id": "agent_abc", "trust_level": "supervised"},
  "action": {"type": "bash", "arguments": {"command": "ls", "n": 3}},
  "context": {
    "conversation_id": "conv_1", "step_number": 3, "user_intent": "list files",
    "blocks": [{"trust": "trusted", "source": "user", "content": "list files"},
               {"trust": "untrusted", "source": "tool:web_fetch", "content": "page"}],
    "pre_action_state_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "state_source": "git_tree"
  }
}`

func TestParseRequestValid(t *testing.T) {
	r, err := ParseRequest([]byte(validRequest))
	if err != nil {
		t.Fatal(err)
	}
	if r.Agent.TrustLevel == nil || *r.Agent.TrustLevel != LevelSupervised {
		t.Errorf("trust level = %v", r.Agent.TrustLevel)
	}
	if r.Context.StepNumber != 3 || len(r.Context.Blocks) != 2 || !r.HasUntrusted() {
		t.Errorf("context = %+v", r.Context)
	}
	if r.Action.Arguments["command"] != "ls" {
		t.Errorf("arguments = %v", r.Action.Arguments)
	}
}

func TestTrustLevelNumbers(t *testing.T) {
	for n, want := range []TrustLevel{LevelUntrusted, LevelSupervised, LevelAutonomous, LevelTrusted} {
		js := strings.Replace(validRequest, `"supervised"`, string(rune('0'+n)), 1)
		r, err := ParseRequest([]byte(js))
		if err != nil {
			t.Fatalf("level %d: %v", n, err)
		}
		if *r.Agent.TrustLevel != want {
			t.Errorf("level %d = %v", n, *r.Agent.TrustLevel)
		}
	}
}

// TestInvalidRequests: every invalid request of DESIGN.md names its field.
func TestInvalidRequests(t *testing.T) {
	tests := []struct {
		name, from, to, field string
	}{
		{"missing conversation", `"conversation_id": "conv_1",`, ``, "context.conversation_id"},
		{"step zero", `"step_number": 3`, `"step_number": 0`, "context.step_number"},
		{"step negative", `"step_number": 3`, `"step_number": -2`, "context.step_number"},
		{"step not a number", `"step_number": 3`, `"step_number": "3"`, "context.step_number"},
		{"hash without source", `,
    "state_source": "git_tree"`, ``, "context.state_source"},
		{"source without hash", `"pre_action_state_hash": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",`, ``, "context.pre_action_state_hash"},
		{"hash uppercase", `0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef`, `0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef`, "context.pre_action_state_hash"},
		{"hash short", `0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef`, `0123456789abcdef`, "context.pre_action_state_hash"},
		{"unknown trust level", `"trust_level": "supervised"`, `"trust_level": "root"`, "agent.trust_level"},
		{"trust level out of range", `"trust_level": "supervised"`, `"trust_level": 7`, "agent.trust_level"},
		{"unknown block trust", `{"trust": "untrusted"`, `{"trust": "semi"`, "context.blocks[1].trust"},
		{"arguments array", `{"command": "ls", "n": 3}`, `["ls"]`, "action.arguments"},
		{"arguments string", `{"command": "ls", "n": 3}`, `"ls"`, "action.arguments"},
		{"missing agent id", `"id": "agent_abc", `, ``, "agent.id"},
		{"missing action type", `"type": "bash", `, ``, "action.type"},
		{"unknown field", `"user_intent"`, `"user_intnet"`, "context.user_intnet"},
		{"unknown block field", `"source": "user"`, `"sorce": "user"`, "context.blocks[0].sorce"},
		{"unknown action field", `"type": "bash",`, `"type": "bash", "tool": "x",`, "action.tool"},
		{"unknown top-level field", `"agent": {`, `"agnet": {}, "agent": {`, "agnet"},
		{"negative cost", `"type": "bash",`, `"type": "bash", "cost_usd": -1,`, "action.cost_usd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js := strings.Replace(validRequest, tt.from, tt.to, 1)
			if js == validRequest {
				t.Fatalf("replacement %q not found", tt.from)
			}
			_, err := ParseRequest([]byte(js))
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RequestError", err)
			}
			if re.Field != tt.field {
				t.Errorf("field = %q, want %q (%v)", re.Field, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("message %q does not name %q", err, tt.field)
			}
		})
	}
}

func TestMalformedInput(t *testing.T) {
	for _, in := range []string{``, `{`, `[]`, `null x`, `{"agent":1}`, validRequest + `{}`, "\x00"} {
		_, err := ParseRequest([]byte(in))
		var re *RequestError
		if !errors.As(err, &re) {
			t.Errorf("%q: err = %v, want *RequestError", in, err)
		}
	}
}

func TestTooLarge(t *testing.T) {
	big := strings.Repeat(" ", MaxRequestBytes+1)
	if _, err := ParseRequest([]byte(big)); err == nil {
		t.Fatal("want an error for an oversized request")
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(validRequest))
	f.Add([]byte(`{"agent":{"id":"a","trust_level":3},"action":{"type":"x","arguments":{}},"context":{"conversation_id":"c","step_number":1}}`))
	f.Add([]byte(`{"agent":{"id":"a","trust_level":"9"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRequest(data)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error is not a *RequestError: %v", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded request does not validate: %v", err)
		}
	})
}
