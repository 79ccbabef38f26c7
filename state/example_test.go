package state_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/state"
)

// The pipeline's use of state: reserve the step and read the facts, let the
// policy decide, then commit on allow or release on deny. A store failure is
// a deny (STATE-001), never an allow.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "toolgate")
	defer os.RemoveAll(dir)
	s, err := state.Open(ctx, filepath.Join(dir, "toolgate.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	a, token, err := s.RegisterAgent(ctx, state.AgentSpec{Name: "ci-bot", Trust: schema.LevelAutonomous, MaxRequestsPerHour: 100})
	if err != nil {
		log.Fatal(err)
	}
	for _, step := range []int{1, 2, 3} {
		req := schema.Request{
			Agent:   schema.Agent{ID: a.ID, Token: token},
			Action:  schema.Action{Type: "calculate", Arguments: map[string]any{"query": "2+2"}},
			Context: schema.Context{ConversationID: "conv_1", StepNumber: step},
		}
		res, facts, err := s.Reserve(ctx, req, state.ReserveOptions{RequireRegistration: true})
		if errors.Is(err, state.ErrUnavailable) {
			fmt.Println("deny STATE-001")
			continue
		}
		// Stand-in for the Rego policy's LOOP-003.
		c := facts.Conversation
		n := len(c.Recent)
		if n >= 2 && c.Recent[n-1] == c.Fingerprint && c.Recent[n-2] == c.Fingerprint {
			fmt.Printf("step %d: deny LOOP-003\n", step)
			res.Release(ctx)
			continue
		}
		fmt.Printf("step %d: allow (token valid %v, %d requests this hour)\n", step, facts.Agent.TokenValid, facts.Budget.RequestsLastHour)
		if err := res.Commit(ctx, 0); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// step 1: allow (token valid true, 1 requests this hour)
	// step 2: allow (token valid true, 2 requests this hour)
	// step 3: deny LOOP-003
}
