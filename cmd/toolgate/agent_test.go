package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAgentCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "state", "toolgate.db")
	code, out, stderr := runCLI(t, "", "agent", "register", "--name", "ci-bot", "--trust", "supervised",
		"--allow-tool", "read_file", "--allow-tool", "bash", "--block-tool", "web_fetch",
		"--max-daily-cost-usd", "2.5", "--max-requests-per-hour", "100", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("register: exit %d: %s", code, stderr)
	}
	var reg struct {
		AgentID string `json:"agent_id"`
		Token   string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &reg); err != nil || reg.AgentID == "" || reg.Token == "" {
		t.Fatalf("register output %q: %v", out, err)
	}
	code, out, _ = runCLI(t, "", "agent", "register", "--name", "second", "--trust", "3", "--db", db)
	if code != 0 || !strings.Contains(out, "agent_id: agent_") || !strings.Contains(out, "token:    tgt_") {
		t.Fatalf("text register: %d %q", code, out)
	}

	tests := []struct {
		name string
		args []string
		code int
		want []string // substrings of stdout (exit 0) or stderr
	}{
		{"list", []string{"agent", "list"}, 0, []string{reg.AgentID, "ci-bot", "supervised", "active", "second", "trusted"}},
		{"show", []string{"agent", "show", reg.AgentID}, 0, []string{"read_file, bash", "web_fetch", "$2.5", "100", "active"}},
		{"show json", []string{"agent", "show", reg.AgentID, "-o", "json"}, 0, []string{`"trust_level": "supervised"`, `"max_requests_per_hour": 100`}},
		{"budget", []string{"agent", "budget", reg.AgentID}, 0, []string{"0 of 100", "$0.0000 of $2.5"}},
		{"budget json", []string{"agent", "budget", reg.AgentID, "--output", "json"}, 0, []string{`"requests_last_hour": 0`, `"max_daily_cost_usd": 2.5`}},
		{"revoke", []string{"agent", "revoke", reg.AgentID}, 0, []string{"revoked " + reg.AgentID}},
		{"revoked shows", []string{"agent", "show", reg.AgentID}, 0, []string{"revoked"}},
		{"list json", []string{"agent", "list", "-o", "json"}, 0, []string{`"revoked_at"`, `"name": "second"`}},
		{"show unknown", []string{"agent", "show", "agent_nope"}, 1, []string{`no agent "agent_nope"`}},
		{"revoke unknown", []string{"agent", "revoke", "agent_nope"}, 1, []string{`no agent "agent_nope"`}},
		{"budget unknown", []string{"agent", "budget", "agent_nope"}, 1, []string{`no agent`}},
		{"bad trust", []string{"agent", "register", "--name", "x", "--trust", "root"}, 2, []string{"--trust", "root"}},
		{"missing name", []string{"agent", "register", "--trust", "1"}, 2, []string{"name"}},
		{"negative cost", []string{"agent", "register", "--name", "x", "--trust", "1", "--max-daily-cost-usd", "-1"}, 2, []string{"cost"}},
		{"bad output", []string{"agent", "list", "--output", "yaml"}, 2, []string{"--output"}},
		{"show needs an id", []string{"agent", "show"}, 2, []string{"arg"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, "", append(tt.args, "--db", db)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tt.code, out, stderr)
			}
			text := out
			if code != 0 {
				text = stderr
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("output %q lacks %q", text, w)
				}
			}
		})
	}
}

func TestAgentCommandsDatabaseLocation(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "xdg"))
	// The default: $XDG_STATE_HOME/toolgate/toolgate.db. (--db's default is
	// read when the command is built, after Setenv.)
	if code, _, stderr := runCLI(t, "", "agent", "list"); code != 0 {
		t.Fatalf("list: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "xdg", "toolgate", "toolgate.db")); err != nil {
		t.Errorf("default database not created: %v", err)
	}
	// state.path from --config, relative to the config file.
	cfg := filepath.Join(dir, "conf", "toolgate.yaml")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	os.WriteFile(cfg, []byte("state:\n  path: ./data/tg.db\n"), 0o600)
	if code, _, stderr := runCLI(t, "", "agent", "list", "--config", cfg); code != 0 {
		t.Fatalf("list --config: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "conf", "data", "tg.db")); err != nil {
		t.Errorf("state.path not used: %v", err)
	}
	// A corrupt database is a clear error, exit 1.
	bad := filepath.Join(dir, "bad.db")
	os.WriteFile(bad, bytes.Repeat([]byte("garbage!"), 200), 0o600)
	code, _, stderr := runCLI(t, "", "agent", "list", "--db", bad)
	if code != 1 || !strings.Contains(stderr, "not a SQLite database") || !strings.Contains(stderr, bad) {
		t.Errorf("corrupt database: exit %d %q", code, stderr)
	}
}
