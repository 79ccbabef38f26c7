package toolgate_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate"
)

// ExampleNew builds a Verifier with the embedded default policy and a state
// database of its own, and decides one call.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "toolgate-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	v, err := toolgate.New(nil, toolgate.WithDB(filepath.Join(dir, "toolgate.db")), toolgate.NoWait())
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	supervised := toolgate.TrustLevel(1)
	verdict, err := v.Verify(context.Background(), toolgate.Request{
		Agent:   toolgate.Agent{ID: "agent_docs", TrustLevel: &supervised},
		Action:  toolgate.Action{Type: "calculate", Arguments: map[string]any{"query": "2+2"}},
		Context: toolgate.Context{ConversationID: "conv_docs", StepNumber: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(verdict.Outcome, verdict.Codes())
	// Output: allow [MATRIX-005]
}

// ExampleVerifier_Verify shows a denial and its reasons: an agent without
// state (WithoutState) asking for a tool the registry does not know.
func ExampleVerifier_Verify() {
	v, err := toolgate.New(nil, toolgate.WithoutState())
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	trusted := toolgate.TrustLevel(3)
	verdict, err := v.Verify(context.Background(), toolgate.Request{
		Agent:   toolgate.Agent{ID: "agent_docs", TrustLevel: &trusted},
		Action:  toolgate.Action{Type: "launch_rocket", Arguments: map[string]any{"target": "moon"}},
		Context: toolgate.Context{ConversationID: "conv_docs", StepNumber: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(verdict.Outcome, verdict.Tier)
	for _, r := range verdict.Reasons {
		if r.Outcome == toolgate.Deny {
			fmt.Printf("%s: %s\n", r.Code, r.Message)
		}
	}
	// Output:
	// deny 1
	// ACTION-001: unknown action type or tool "launch_rocket": denied by default
}
