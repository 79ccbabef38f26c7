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
	agent := [][2]*ast.Term{ast.Item(keyTerm("id"), ast.StringTerm(req.Agent.ID))}
	if req.Agent.TrustLevel != nil {
		agent = append(agent, ast.Item(keyTerm("trust_level"), ast.StringTerm(req.Agent.TrustLevel.String())))
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
		ast.Item(keyTerm("type"), ast.StringTerm(req.Action.Type)),
		ast.Item(keyTerm("arguments"), ast.NewTerm(args)),
	}
	if req.Action.CostUSD != nil {
		action = append(action, ast.Item(keyTerm("cost_usd"), ast.FloatNumberTerm(*req.Action.CostUSD)))
	}
	c := &req.Context
	blocks := make([]*ast.Term, len(c.Blocks))
	for i, b := range c.Blocks {
		blocks[i] = ast.ObjectTerm(
			ast.Item(keyTerm("trust"), ast.StringTerm(string(b.Trust))),
			ast.Item(keyTerm("source"), ast.StringTerm(b.Source)),
			ast.Item(keyTerm("content"), ast.StringTerm(b.Content)),
		)
	}
	ctx := [][2]*ast.Term{
		ast.Item(keyTerm("conversation_id"), ast.StringTerm(c.ConversationID)),
		ast.Item(keyTerm("step_number"), ast.IntNumberTerm(c.StepNumber)),
		ast.Item(keyTerm("blocks"), ast.ArrayTerm(blocks...)),
	}
	if c.UserIntent != "" {
		ctx = append(ctx, ast.Item(keyTerm("user_intent"), ast.StringTerm(c.UserIntent)))
	}
	if c.PreActionStateHash != "" {
		ctx = append(ctx,
			ast.Item(keyTerm("pre_action_state_hash"), ast.StringTerm(c.PreActionStateHash)),
			ast.Item(keyTerm("state_source"), ast.StringTerm(c.StateSource)))
	}
	items := [][2]*ast.Term{
		ast.Item(keyTerm("agent"), ast.ObjectTerm(agent...)),
		ast.Item(keyTerm("action"), ast.ObjectTerm(action...)),
		ast.Item(keyTerm("context"), ast.ObjectTerm(ctx...)),
	}
	f, err := factsValue(facts)
	if err != nil {
		return nil, err
	}
	items = append(items, ast.Item(keyTerm("facts"), ast.NewTerm(f)))
	return ast.NewObject(items...), nil
}

// noFacts is the input.facts of an evaluation without state.
var noFacts = ast.NewObject(ast.Item(keyTerm("not_applied"),
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

// keys are prebuilt terms for the object keys (and fixed values) the engine
// and its builtins use on every evaluation: terms are immutable once built,
// so one can serve every input and result, and nothing is allocated for them.
var keys = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, k := range []string{
		"action", "agent", "arguments", "block", "blocks", "category", "class", "code", "command_categories",
		"content", "context", "control_arguments", "conversation_id", "cost_usd", "danger", "danger_hits",
		"decision", "decoded", "decoded_hits", "encoded", "encodings", "excerpt", "facts", "id",
		"injection_hits", "key", "kind", "message", "name", "not_applied", "outbound_categories",
		"path_key_parts", "path_scopes", "pattern", "pattern_hits", "patterns", "payload_keys",
		"pre_action_state_hash", "scope", "source", "state_source", "step_number", "target", "text",
		"texts", "trust", "trust_level", "trusted", "type", "untrusted", "user_intent", "value", "where",
	} {
		m[k] = ast.StringTerm(k)
	}
	return m
}()

// keyTerm is the string term for k, prebuilt when k is one of keys.
func keyTerm(k string) *ast.Term {
	if t, ok := keys[k]; ok {
		return t
	}
	return ast.StringTerm(k)
}
