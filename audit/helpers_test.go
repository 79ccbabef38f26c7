package audit

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
	_ "modernc.org/sqlite"

	"github.com/toolgate/toolgate/schema"
)

// dsn is how state/ will open the database (WAL, busy timeout).
func dsn(path string, extra ...string) string {
	s := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)"
	for _, e := range extra {
		s += "&" + e
	}
	return s
}

func openDB(t testing.TB, path string, extra ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, extra...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func tempDB(t testing.TB) (*sql.DB, string) {
	path := filepath.Join(t.TempDir(), "toolgate.db")
	return openDB(t, path), path
}

// newKey generates a key pair of keyType in a temporary directory.
func newKey(t testing.TB, keyType string) (signature.SignerVerifier, signature.Verifier) {
	t.Helper()
	dir := t.TempDir()
	keyPath, pubPath, err := GenerateKey(dir, keyType, "")
	if err != nil {
		t.Fatal(err)
	}
	sv, err := LoadSigner(keyPath, "")
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadVerifier(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	return sv, v
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// record makes the i-th sample decision: alternating agents, tools and
// outcomes, with a probe on every third.
func record(i int) Record {
	lvl := schema.LevelSupervised
	tools := []string{"bash", "read_file", "web_fetch"}
	outcomes := []schema.Outcome{schema.Allow, schema.Deny, schema.Allow, schema.Pending}
	r := Record{
		Time: t0.Add(time.Duration(i) * time.Second),
		Request: schema.Request{
			Agent:  schema.Agent{ID: fmt.Sprintf("agent_%d", i%3), TrustLevel: &lvl, Token: "secret-token"},
			Action: schema.Action{Type: tools[i%3], Arguments: map[string]any{"command": fmt.Sprintf("echo %d <&>", i), "n": i}},
			Context: schema.Context{
				ConversationID: fmt.Sprintf("conv_%d", i%2),
				StepNumber:     i + 1,
				Blocks:         []schema.Block{{Trust: schema.Untrusted, Source: "tool:web_fetch", Content: "page text"}},
			},
		},
		Decision: schema.Decision{
			Outcome: outcomes[i%4],
			Tier:    1 + i%3,
			Reasons: []schema.Reason{{Code: fmt.Sprintf("PATTERN-%03d", i%5), Rule: "suspicious_pattern", Message: "pipe to shell"}},
			Policy:  schema.Policy{Bundle: "default", Revision: "rev-1"},
		},
	}
	if i%3 == 0 {
		r.Probes = []Probe{{Tier: 2, Provider: "openai-compatible", Model: "small", TokensIn: 812, TokensOut: 40,
			CostUSD: 0.00031, Confidence: 0.92, Reasoning: "no untrusted influence", Result: "approved", LatencyMS: 120, ExecutionAllowed: true}}
	}
	return r
}

// fill appends n sample records and returns the log (not closed).
func fill(t testing.TB, db *sql.DB, signer signature.Signer, opts Options, n int) *Log {
	t.Helper()
	ctx := context.Background()
	l, err := Open(ctx, db, signer, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append(ctx, record(i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	return l
}

func mustVerify(t *testing.T, db *sql.DB, v signature.Verifier, ext ...Checkpoint) Report {
	t.Helper()
	rep, err := Verify(context.Background(), db, v, ext...)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return rep
}
