package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

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

// factsValue converts facts; nil facts are {"not_applied": [...]}. It
// builds the AST directly, key for key as encoding/json would write the
// struct (same names, same omitempty): the state facts are converted on every
// decision, and a JSON round trip cost more than the policy's first rules.
// TestFactsValueMatchesJSON holds the two in step.
func factsValue(f *schema.Facts) (ast.Value, error) {
	if f == nil {
		return noFacts, nil
	}
	var items [][2]*ast.Term
	if a := f.Agent; a != nil {
		agent := [][2]*ast.Term{ast.Item(keyTerm("registered"), ast.BooleanTerm(a.Registered))}
		if a.Revoked {
			agent = append(agent, ast.Item(keyTerm("revoked"), ast.BooleanTerm(true)))
		}
		if a.TrustLevel != nil {
			agent = append(agent, ast.Item(keyTerm("trust_level"), ast.StringTerm(a.TrustLevel.String())))
		}
		if len(a.AllowedTools) > 0 {
			agent = append(agent, ast.Item(keyTerm("allowed_tools"), stringsTerm(a.AllowedTools)))
		}
		if len(a.BlockedTools) > 0 {
			agent = append(agent, ast.Item(keyTerm("blocked_tools"), stringsTerm(a.BlockedTools)))
		}
		if a.TokenRequired {
			agent = append(agent, ast.Item(keyTerm("token_required"), ast.BooleanTerm(true)))
		}
		if a.TokenValid {
			agent = append(agent, ast.Item(keyTerm("token_valid"), ast.BooleanTerm(true)))
		}
		items = append(items, ast.Item(keyTerm("agent"), ast.ObjectTerm(agent...)))
	}
	if c := f.Conversation; c != nil {
		conv := [][2]*ast.Term{
			ast.Item(keyTerm("steps_approved"), ast.IntNumberTerm(c.StepsApproved)),
			ast.Item(keyTerm("last_step"), ast.IntNumberTerm(c.LastStep)),
			ast.Item(keyTerm("fingerprint"), ast.StringTerm(c.Fingerprint)),
			ast.Item(keyTerm("recent"), nullableStrings(c.Recent)),
		}
		if c.Reserved {
			conv = append(conv, ast.Item(keyTerm("reserved"), ast.BooleanTerm(true)))
		}
		items = append(items, ast.Item(keyTerm("conversation"), ast.ObjectTerm(conv...)))
	}
	if b := f.Budget; b != nil {
		budget := [][2]*ast.Term{ast.Item(keyTerm("requests_last_hour"), ast.IntNumberTerm(b.RequestsLastHour))}
		if b.MaxRequestsPerHour != 0 {
			budget = append(budget, ast.Item(keyTerm("max_requests_per_hour"), ast.IntNumberTerm(b.MaxRequestsPerHour)))
		}
		cost, err := floatTerm(b.CostTodayUSD)
		if err != nil {
			return nil, fmt.Errorf("facts: budget.cost_today_usd: %w", err)
		}
		budget = append(budget, ast.Item(keyTerm("cost_today_usd"), cost))
		if b.MaxDailyCostUSD != 0 {
			max, err := floatTerm(b.MaxDailyCostUSD)
			if err != nil {
				return nil, fmt.Errorf("facts: budget.max_daily_cost_usd: %w", err)
			}
			budget = append(budget, ast.Item(keyTerm("max_daily_cost_usd"), max))
		}
		items = append(items, ast.Item(keyTerm("budget"), ast.ObjectTerm(budget...)))
	}
	if len(f.NotApplied) > 0 {
		items = append(items, ast.Item(keyTerm("not_applied"), stringsTerm(f.NotApplied)))
	}
	return ast.NewObject(items...), nil
}

func stringsTerm(ss []string) *ast.Term {
	ts := make([]*ast.Term, len(ss))
	for i, s := range ss {
		ts[i] = ast.StringTerm(s)
	}
	return ast.ArrayTerm(ts...)
}

// nullableStrings is a slice as encoding/json writes one without omitempty:
// null when nil.
func nullableStrings(ss []string) *ast.Term {
	if ss == nil {
		return ast.NullTerm()
	}
	return stringsTerm(ss)
}

// floatTerm is f as a number; NaN and infinities, which JSON cannot carry,
// are an error as they were for encoding/json.
func floatTerm(f float64) (*ast.Term, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%v is not a number JSON can carry", f)
	}
	return ast.NumberTerm(json.Number(strconv.FormatFloat(f, 'g', -1, 64))), nil
}

func slicesSort(s []string) { slices.Sort(s) }

// keys are prebuilt terms for the object keys (and fixed values) the engine
// and its builtins use on every evaluation: terms are immutable once built,
// so one can serve every input and result, and nothing is allocated for them.
var keys = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, k := range []string{
		"action", "agent", "allowed_tools", "arguments", "blocked_tools", "budget", "conversation", "cost_today_usd", "fingerprint", "last_step", "max_daily_cost_usd", "max_requests_per_hour", "recent", "registered", "requests_last_hour", "reserved", "revoked", "steps_approved", "token_required", "token_valid", "block", "blocks", "category", "class", "code", "command_categories",
		"content", "context", "control_arguments", "conversation_id", "cost_usd", "danger", "danger_hits",
		"decision", "decoded", "decoded_hits", "deobfuscated_hits", "direct_codes", "direct_hits", "encoded", "encodings", "excerpt", "facts", "id",
		"injection_hits", "key", "kind", "message", "name", "not_applied", "outbound_categories",
		"path_key_parts", "path_scopes", "pattern", "pattern_hits", "patterns", "payload_keys",
		"pre_action_state_hash", "requested_actions", "scope", "spoofed_arguments", "verb", "action_verbs", "source", "state_source", "step_number", "target", "text",
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
