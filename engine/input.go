package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/schema"
)

// InputValue builds the policy's input from a request and its facts directly
// as an AST value: no JSON round trip on the hot path.
func InputValue(req *schema.Request, facts *schema.Facts) (ast.Value, error) {
	agent := [][2]*ast.Term{ast.Item(ast.InternedTerm("id"), ast.StringTerm(req.Agent.ID))}
	if req.Agent.TrustLevel != nil {
		agent = append(agent, ast.Item(ast.InternedTerm("trust_level"), ast.StringTerm(req.Agent.TrustLevel.String())))
	}
	args := ast.NewObject()
	if req.Action.Arguments != nil {
		v, err := ast.InterfaceToValue(req.Action.Arguments)
		if err != nil {
			return nil, fmt.Errorf("action.arguments: %w", err)
		}
		var ok bool
		if args, ok = v.(ast.Object); !ok {
			return nil, fmt.Errorf("action.arguments: must be an object")
		}
	}
	action := [][2]*ast.Term{
		ast.Item(ast.InternedTerm("type"), ast.StringTerm(req.Action.Type)),
		ast.Item(ast.InternedTerm("arguments"), ast.NewTerm(args)),
	}
	if req.Action.CostUSD != nil {
		action = append(action, ast.Item(ast.InternedTerm("cost_usd"), ast.FloatNumberTerm(*req.Action.CostUSD)))
	}
	c := &req.Context
	blocks := make([]*ast.Term, len(c.Blocks))
	for i, b := range c.Blocks {
		blocks[i] = ast.ObjectTerm(
			ast.Item(ast.InternedTerm("trust"), ast.StringTerm(string(b.Trust))),
			ast.Item(ast.InternedTerm("source"), ast.StringTerm(b.Source)),
			ast.Item(ast.InternedTerm("content"), ast.StringTerm(b.Content)),
		)
	}
	ctx := [][2]*ast.Term{
		ast.Item(ast.InternedTerm("conversation_id"), ast.StringTerm(c.ConversationID)),
		ast.Item(ast.InternedTerm("step_number"), ast.IntNumberTerm(c.StepNumber)),
		ast.Item(ast.InternedTerm("blocks"), ast.ArrayTerm(blocks...)),
	}
	if c.UserIntent != "" {
		ctx = append(ctx, ast.Item(ast.InternedTerm("user_intent"), ast.StringTerm(c.UserIntent)))
	}
	if c.PreActionStateHash != "" {
		ctx = append(ctx,
			ast.Item(ast.InternedTerm("pre_action_state_hash"), ast.StringTerm(c.PreActionStateHash)),
			ast.Item(ast.InternedTerm("state_source"), ast.StringTerm(c.StateSource)))
	}
	items := [][2]*ast.Term{
		ast.Item(ast.InternedTerm("agent"), ast.ObjectTerm(agent...)),
		ast.Item(ast.InternedTerm("action"), ast.ObjectTerm(action...)),
		ast.Item(ast.InternedTerm("context"), ast.ObjectTerm(ctx...)),
	}
	f, err := factsValue(facts)
	if err != nil {
		return nil, err
	}
	items = append(items, ast.Item(ast.InternedTerm("facts"), ast.NewTerm(f)))
	return ast.NewObject(items...), nil
}

// noFacts is the input.facts of an evaluation without state.
var noFacts = ast.NewObject(ast.Item(ast.InternedTerm("not_applied"),
	ast.ArrayTerm(ast.StringTerm("agent"), ast.StringTerm("conversation"), ast.StringTerm("budget"))))

// factsValue converts facts; nil facts are {"not_applied": [...]}.
func factsValue(f *schema.Facts) (ast.Value, error) {
	if f == nil {
		return noFacts, nil
	}
	// Facts are small; the JSON round trip keeps one definition of their
	// shape (the struct tags).
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	v, err := ast.ValueFromReader(bytesReader(b))
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	return v, nil
}

func slicesSort(s []string) { slices.Sort(s) }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
