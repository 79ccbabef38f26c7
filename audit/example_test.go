package audit_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/schema"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "toolgate-audit")
	defer os.RemoveAll(dir)

	keyPath, pubPath, _ := audit.GenerateKey(filepath.Join(dir, "keys"), audit.KeyEd25519, "")
	signer, _ := audit.LoadSigner(keyPath, "")
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "toolgate.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	defer db.Close()

	log, _ := audit.Open(ctx, db, signer, audit.Options{})
	final := schema.Decision{Outcome: schema.Allow, Tier: 1, Policy: schema.Policy{Bundle: "default"}}
	req := schema.Request{
		Agent:   schema.Agent{ID: "agent_abc"},
		Action:  schema.Action{Type: "calculate", Arguments: map[string]any{"query": "2+2"}},
		Context: schema.Context{ConversationID: "conv_1", StepNumber: 1},
	}
	entry, err := log.Append(ctx, audit.Record{Request: req, Decision: final})
	if err != nil {
		final = audit.DenyUnrecorded(final, err) // AUDIT-001: never run an unrecorded action
	}
	_ = log.Close(ctx) // signs a final checkpoint

	v, _ := audit.LoadVerifier(pubPath)
	rep, _ := audit.Verify(ctx, db, v)
	fmt.Println(entry.Seq, final.Outcome, entry.ArgsPreview)
	fmt.Println(rep.OK, rep.Entries, rep.Checkpoints)
	// Output:
	// 1 allow {"query":"2+2"}
	// true 1 1
}
