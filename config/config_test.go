package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaults(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Conversation.MaxSteps != 50 || c.Approvals.TimeoutSeconds != 300 || c.Approvals.MaxPerHour != 10 || c.Triage != nil || c.Supervisor != nil {
		t.Errorf("defaults: %+v", c)
	}
	if c.RequireRegistration(false) || !c.RequireRegistration(true) {
		t.Error("registration defaults: off for eval, on for serve")
	}
}

func TestParseFull(t *testing.T) {
	c, err := Parse(strings.NewReader(`
policy:
  bundle: ./policies
  additional_patterns: ["org-secret-[0-9]+"]
  additional_high_risk_tools: [custom_tool]
state:
  path: ./toolgate.db
agents:
  require_registration: true
conversation:
  max_steps: 20
triage:
  base_url: http://127.0.0.1:8000/v1
  model: small
  api_key_env: TRIAGE_API_KEY
  always_probe: [shell]
supervisor:
  base_url: http://127.0.0.1:8000/v1
  model: capable
  paranoid: true
approvals:
  timeout_seconds: 60
  webhook: {url: "https://hooks.example.com/x", secret_env: HOOK_SECRET}
audit:
  signing_key: ./keys/toolgate.key
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Triage.ConfidenceThreshold != 0.5 || c.Triage.MaxProbesPerTurn != 10 || c.Triage.ProbeTimeoutMS != 5000 || c.Triage.OnTimeout != "escalate" {
		t.Errorf("triage defaults not applied: %+v", c.Triage)
	}
	if !c.Supervisor.Paranoid || c.Conversation.MaxSteps != 20 || !c.RequireRegistration(false) {
		t.Errorf("values: %+v", c)
	}
}

func TestInvalid(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"policy:\n  bundel: x\n", `unknown key "bundel"`},
		{"triage:\n  model: m\n", "triage.base_url: required"},
		{"triage:\n  base_url: ftp://x\n  model: m\n", "triage.base_url"},
		{"triage:\n  base_url: http://x\n  model: m\n  on_timeout: maybe\n", "triage.on_timeout"},
		{"triage:\n  base_url: http://x\n  model: m\n  confidence_threshold: 2\n", "confidence_threshold"},
		{"supervisor:\n  base_url: http://x\n", "supervisor.model: required"},
		{"conversation:\n  max_steps: -1\n", "max_steps"},
		{"approvals:\n  webhook: {url: 'not a url'}\n", "approvals.webhook.url"},
		{"state: [1, 2]\n", "cannot unmarshal"},
	}
	for _, tt := range tests {
		_, err := Parse(strings.NewReader(tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want %q", tt.yaml, err, tt.want)
		}
	}
}

func TestLoadResolvesRelativePaths(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	os.WriteFile(path, []byte("state:\n  path: ./db/toolgate.db\n"), 0o600)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.StatePath(); got != filepath.Join(dir, "db", "toolgate.db") {
		t.Errorf("state path = %s", got)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file: want an error")
	}
}

func TestDefaultStatePath(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if got := DefaultStatePath(); got != "/x/state/toolgate/toolgate.db" {
		t.Errorf("got %s", got)
	}
}

func TestExampleParses(t *testing.T) {
	c, err := Parse(strings.NewReader(Example))
	if err != nil {
		t.Fatal(err)
	}
	if c.Conversation.MaxSteps != 50 {
		t.Errorf("max_steps = %d", c.Conversation.MaxSteps)
	}
}
