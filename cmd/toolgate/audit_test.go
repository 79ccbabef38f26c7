package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/state"
)

// auditFixture writes keys and a signed log of n entries, and returns the
// database path and the key directory.
func auditFixture(t *testing.T, n int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TG_TEST_PASS", "correct horse")
	if code, _, stderr := runCLI(t, "", "keys", "generate", "--out", filepath.Join(dir, "keys"), "--passphrase-env", "TG_TEST_PASS"); code != 0 {
		t.Fatalf("keys generate: %d %s", code, stderr)
	}
	if fi, err := os.Stat(filepath.Join(dir, "keys", "toolgate.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	signer, err := audit.LoadSigner(filepath.Join(dir, "keys", "toolgate.key"), "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "toolgate.db")
	st, err := state.Open(context.Background(), dbPath)
	db := st.DB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	l, err := audit.Open(ctx, db, signer, audit.Options{CheckpointEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		out := []schema.Outcome{schema.Allow, schema.Deny}[i%2]
		_, err := l.Append(ctx, audit.Record{
			Time: time.Date(2026, 3, 1, 12, 0, i, 0, time.UTC),
			Request: schema.Request{
				Agent:   schema.Agent{ID: []string{"agent_a", "agent_b"}[i%2]},
				Action:  schema.Action{Type: "bash", Arguments: map[string]any{"command": "ls"}},
				Context: schema.Context{ConversationID: "conv_1", StepNumber: i + 1},
			},
			Decision: schema.Decision{Outcome: out, Tier: 1, Policy: schema.Policy{Bundle: "default", Revision: "r1"},
				Reasons: []schema.Reason{{Code: "DANGER-001", Rule: "r", Message: "m"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return dbPath, filepath.Join(dir, "keys")
}

func TestAuditCommands(t *testing.T) {
	dbPath, keys := auditFixture(t, 6)
	pub := filepath.Join(keys, "toolgate.pub")

	code, out, stderr := runCLI(t, "", "audit", "verify", "--db", dbPath, "--pubkey", pub)
	if code != 0 || !strings.Contains(out, "ok: 6 entries") {
		t.Fatalf("verify: %d %q %q", code, out, stderr)
	}
	code, out, _ = runCLI(t, "", "audit", "query", "--db", dbPath, "--agent", "agent_b", "--decision", "deny")
	if code != 0 || strings.Count(out, "agent_b") != 3 || !strings.HasPrefix(out, "SEQ") {
		t.Fatalf("query table: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "audit", "query", "--db", dbPath, "-o", "json", "--since", "2026-03-01T12:00:04Z")
	var entries []audit.Entry
	if code != 0 || json.Unmarshal([]byte(out), &entries) != nil || len(entries) != 2 || entries[0].Seq != 5 {
		t.Fatalf("query json: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "audit", "export", "--db", dbPath, "--format", "jsonl", "--code", "DANGER-001")
	if code != 0 || strings.Count(out, "\n") != 6 || !strings.Contains(out, `"path":"toolgate/tier1/decision"`) {
		t.Fatalf("export: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "audit", "checkpoint", "--db", dbPath)
	if code != 0 || !strings.Contains(out, `"size": 6`) {
		t.Fatalf("checkpoint: %d\n%s", code, out)
	}
	cpFile := filepath.Join(t.TempDir(), "checkpoint.json")
	if err := os.WriteFile(cpFile, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}

	// Cut the tail and the checkpoints that vouched for it.
	st, err := state.Open(context.Background(), dbPath)
	db := st.DB()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM audit_entries WHERE seq > 4`, `DELETE FROM audit_checkpoints WHERE size > 4`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	code, out, _ = runCLI(t, "", "audit", "verify", "--db", dbPath, "--pubkey", pub, "--checkpoint", cpFile)
	if code != 1 || !strings.Contains(out, "FAILED at entry 5: truncated") {
		t.Fatalf("verify with the kept checkpoint: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "", "audit", "verify", "--db", dbPath, "--pubkey", pub, "--checkpoint", cpFile, "-o", "json")
	var rep audit.Report
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Kind != audit.KindTruncated || rep.FirstBad != 5 {
		t.Fatalf("verify json: %d %q", code, out)
	}
}

func TestAuditUsage(t *testing.T) {
	dbPath, keys := auditFixture(t, 1)
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"audit", "verify", "--db", dbPath}, exitUsage},
		{[]string{"audit", "verify", "--db", dbPath, "--pubkey", filepath.Join(keys, "missing.pub")}, exitUsage},
		{[]string{"audit", "verify", "--db", dbPath, "--unsigned"}, exitOK},
		{[]string{"audit", "verify", "--db", dbPath, "--pubkey", filepath.Join(keys, "toolgate.pub"), "--signatures", "anchored"}, exitOK},
		{[]string{"audit", "verify", "--db", dbPath, "--unsigned", "--signatures", "some"}, exitUsage},
		{[]string{"audit", "verify", "--db", filepath.Join(t.TempDir(), "none.db"), "--unsigned"}, exitError},
		{[]string{"audit", "query", "--db", dbPath, "--since", "yesterday"}, exitUsage},
		{[]string{"audit", "query", "--db", dbPath, "--decision", "maybe"}, exitUsage},
		{[]string{"audit", "query", "--db", dbPath, "-o", "yaml"}, exitUsage},
		{[]string{"audit", "export", "--db", dbPath, "--format", "csv"}, exitUsage},
		{[]string{"keys", "generate"}, exitUsage},
		{[]string{"keys", "generate", "--out", t.TempDir(), "--type", "rsa"}, exitUsage},
		{[]string{"keys", "generate", "--out", t.TempDir(), "--passphrase-env", "TG_UNSET_VARIABLE"}, exitUsage},
		{[]string{"keys", "generate", "--out", keys}, exitError}, // never overwrites
	}
	for _, tt := range tests {
		if code, _, stderr := runCLI(t, "", tt.args...); code != tt.code {
			t.Errorf("%v: exit %d, want %d (%s)", tt.args, code, tt.code, stderr)
		}
	}
}
