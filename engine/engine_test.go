package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/toolgate/toolgate/schema"
)

func newTestEngine(t testing.TB, opts ...Option) *Engine {
	t.Helper()
	opts = append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	e, err := New(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustRequest(t testing.TB, js string) *schema.Request {
	t.Helper()
	r, err := schema.ParseRequest([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return &r
}

func request(trust, tool, args string) string {
	return fmt.Sprintf(`{"agent":{"id":"a","trust_level":%q},"action":{"type":%q,"arguments":%s},"context":{"conversation_id":"c","step_number":1}}`, trust, tool, args)
}

// policyBundle builds a bundle from Rego source in memory.
func policyBundle(t testing.TB, files map[string]string) *bundle.Bundle {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	b, err := ReadBundleFS(fsys, false)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEvaluateCancelled: a context that has ended stops the evaluation
// with an error, never a decision; one that ends later does not touch
// the next evaluation.
func TestEvaluateCancelled(t *testing.T) {
	e := newTestEngine(t)
	req := mustRequest(t, request("trusted", "read_file", `{"path":"README.md"}`))
	ctx, cancel := context.WithCancel(context.Background())
	if d, err := e.Evaluate(ctx, req, nil); err != nil || d.Outcome != schema.Allow {
		t.Fatalf("live context: %s %v", d.Outcome, err)
	}
	cancel()
	if d, err := e.Evaluate(ctx, req, nil); err == nil {
		t.Fatalf("cancelled context: decided %s, want an error", d.Outcome)
	}
	if d, err := e.Evaluate(context.Background(), req, nil); err != nil || d.Outcome != schema.Allow {
		t.Fatalf("after a cancelled one: %s %v", d.Outcome, err)
	}
}

func TestEvaluateDefaultPolicy(t *testing.T) {
	e := newTestEngine(t)
	tests := []struct {
		name, req string
		want      schema.Outcome
		code      string
	}{
		{"trusted bash", request("trusted", "bash", `{"command":"ls -la"}`), schema.Allow, "MATRIX-015"},
		{"supervised bash", request("supervised", "bash", `{"command":"ls"}`), schema.Deny, "MATRIX-007"},
		{"unknown tool", request("trusted", "summon_demon", `{}`), schema.Deny, "ACTION-001"},
		{"dangerous tool", request("trusted", "shutdown_server", `{"host":"db1"}`), schema.Pending, "TOOL-002"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := e.Evaluate(context.Background(), mustRequest(t, tt.req), nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != tt.want || !d.HasCode(tt.code) {
				t.Errorf("got %s %v, want %s with %s", d.Outcome, d.Codes(), tt.want, tt.code)
			}
			if d.Tier != 1 || d.Policy.Bundle != DefaultBundleName {
				t.Errorf("tier %d policy %+v", d.Tier, d.Policy)
			}
			if strings.Join(d.NotApplied, ",") != "agent,conversation,budget" {
				t.Errorf("not_applied = %v", d.NotApplied)
			}
		})
	}
}

func TestFacts(t *testing.T) {
	e := newTestEngine(t)
	req := mustRequest(t, request("trusted", "calculate", `{"query":"2+2"}`))
	facts := &schema.Facts{Conversation: &schema.ConversationFacts{StepsApproved: 2, LastStep: 0, Fingerprint: "f", Recent: []string{"f", "f"}}}
	d, err := e.Evaluate(context.Background(), req, facts)
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != schema.Deny || !d.HasCode("LOOP-003") {
		t.Errorf("got %s %v", d.Outcome, d.Codes())
	}
	if len(d.NotApplied) != 0 {
		t.Errorf("not_applied = %v with facts given", d.NotApplied)
	}
}

// TestFactsWithoutRecent: a library caller's conversation facts with a nil
// Recent (no approved step yet) decide like an empty window, not as a
// policy error (ENGINE-001).
func TestFactsWithoutRecent(t *testing.T) {
	e := newTestEngine(t)
	req := mustRequest(t, request("trusted", "calculate", `{"query":"2+2"}`))
	d, err := e.Evaluate(context.Background(), req, &schema.Facts{Conversation: &schema.ConversationFacts{Fingerprint: "f"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != schema.Allow {
		t.Errorf("got %s %v, want allow", d.Outcome, d.Codes())
	}
}

// TestFailClosed: whatever goes wrong in the policy, the answer is deny.
func TestFailClosed(t *testing.T) {
	tests := []struct {
		name, src, code string
		wantErr         bool
	}{
		{"no decision", "package toolgate.tier1\nx := 1\n", CodeNoDecision, false},
		{"undefined decision", "package toolgate.tier1\ndecision := {\"decision\": \"allow\"} if false\n", CodeNoDecision, false},
		{"malformed outcome", "package toolgate.tier1\ndecision := {\"decision\": \"maybe\"}\n", CodeBadDecision, false},
		{"not an object", "package toolgate.tier1\ndecision := \"allow\"\n", CodeBadDecision, false},
		{"builtin error", "package toolgate.tier1\ndecision := {\"decision\": \"allow\", \"n\": to_number(\"x\")}\n", CodeNoDecision, true},
		{"conflict", "package toolgate.tier1\ndecision := {\"decision\": \"allow\"}\ndecision := {\"decision\": \"deny\"} if input.agent.id\n", CodeNoDecision, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEngine(t, WithBundle(policyBundle(t, map[string]string{"p.rego": tt.src}), "test"))
			d, err := e.Evaluate(context.Background(), mustRequest(t, request("trusted", "x", `{}`)), nil)
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if d.Outcome != schema.Deny || !d.HasCode(tt.code) {
				t.Errorf("got %s %v, want deny %s", d.Outcome, d.Codes(), tt.code)
			}
		})
	}
}

func TestForbiddenBuiltinRefused(t *testing.T) {
	src := "package toolgate.tier1\ndecision := {\"decision\": \"allow\", \"r\": http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1:1\"})}\n"
	_, err := New(context.Background(), WithBundle(policyBundle(t, map[string]string{"p.rego": src}), "test"))
	if err == nil || !strings.Contains(err.Error(), "http.send") {
		t.Fatalf("err = %v, want a compile error naming http.send", err)
	}
}

func TestWithDataMerges(t *testing.T) {
	ext := map[string]any{"toolgate": map[string]any{"registry": map[string]any{"tools": map[string]any{
		"open_door": map[string]any{"risk": "high", "category": "physical", "approval": "safe"},
	}}}}
	e := newTestEngine(t, WithData(ext))
	d, err := e.Evaluate(context.Background(), mustRequest(t, request("trusted", "open_door", `{}`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != schema.Allow || d.Risk != "high" {
		t.Errorf("got %s risk %s %v", d.Outcome, d.Risk, d.Codes())
	}
	// The default registry is still there.
	d, _ = e.Evaluate(context.Background(), mustRequest(t, request("trusted", "file_read", `{"path":"a"}`)), nil)
	if d.Outcome != schema.Allow {
		t.Errorf("file_read: %s %v", d.Outcome, d.Codes())
	}
}

// TestReloadWhileEvaluating: decisions never fail during swaps, and each
// revision decides with its own outcome. After each swap the test waits
// for a decision on the new revision, so a busy machine cannot starve a
// revision of evaluations.
func TestReloadWhileEvaluating(t *testing.T) {
	outcomes := map[string]schema.Outcome{"r0": schema.Allow} // revision → its outcome, written before its bundle loads
	mk := func(rev string, outcome schema.Outcome) *bundle.Bundle {
		b := policyBundle(t, map[string]string{"p.rego": fmt.Sprintf("package toolgate.tier1\ndecision := {\"decision\": %q, \"reasons\": []}\n", outcome)})
		b.Manifest.Revision = rev
		return b
	}
	e := newTestEngine(t, WithBundle(mk("r0", schema.Allow), "test"))
	req := mustRequest(t, request("trusted", "x", `{}`))
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{} // revision → decisions on it
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := e.Evaluate(ctx, req, nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want := outcomes[d.Policy.Revision]
				seen[d.Policy.Revision]++
				mu.Unlock()
				if d.Outcome != want {
					t.Errorf("revision %q decided %s, want %s", d.Policy.Revision, d.Outcome, want)
					return
				}
			}
		}()
	}
	decided := func(rev string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[rev]
	}
	for i := 1; i <= 20; i++ {
		rev, out := fmt.Sprintf("r%d", i), schema.Allow
		if i%2 == 1 {
			out = schema.Deny
		}
		mu.Lock()
		outcomes[rev] = out
		mu.Unlock()
		if err := e.Reload(ctx, mk(rev, out), "test"); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for decided(rev) == 0 && !t.Failed() {
			if time.Now().After(deadline) {
				t.Fatalf("no decision on revision %s after the reload", rev)
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
}

func TestReloadBadBundleKeepsCurrent(t *testing.T) {
	e := newTestEngine(t)
	bad := policyBundle(t, map[string]string{"p.rego": "package toolgate.tier1\ndecision := undefined_function(1)\n"})
	if err := e.Reload(context.Background(), bad, "bad"); err == nil {
		t.Fatal("want an error")
	}
	if e.Policy().Bundle != DefaultBundleName {
		t.Errorf("policy = %+v", e.Policy())
	}
}

func TestExplain(t *testing.T) {
	e := newTestEngine(t)
	var sb strings.Builder
	d, err := e.Explain(context.Background(), mustRequest(t, request("trusted", "file_read", `{"path":"a"}`)), nil, &sb)
	if err != nil || d.Outcome != schema.Allow {
		t.Fatalf("%v %v", d, err)
	}
	if !strings.Contains(sb.String(), "data.toolgate.tier1.decision") {
		t.Errorf("trace does not mention the query:\n%.500s", sb.String())
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	e := newTestEngine(t)
	reqs := []*schema.Request{
		mustRequest(t, request("trusted", "bash", `{"command":"ls"}`)),
		mustRequest(t, request("supervised", "bash", `{"command":"ls"}`)),
	}
	want := []schema.Outcome{schema.Allow, schema.Deny}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				k := (g + i) % 2
				d, err := e.Evaluate(context.Background(), reqs[k], nil)
				if err != nil || d.Outcome != want[k] {
					t.Errorf("req %d: %s %v", k, d.Outcome, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestReasonOrderAndBudgetFlag: reasons come strongest first by the
// policy's precedence, then by code; a BUDGET reason sets budget_exceeded.
func TestReasonOrderAndBudgetFlag(t *testing.T) {
	e := newTestEngine(t)
	req := mustRequest(t, request("supervised", "drop_table", `{"table":"t"}`))
	facts := &schema.Facts{Budget: &schema.BudgetFacts{RequestsLastHour: 11, MaxRequestsPerHour: 10}}
	d, err := e.Evaluate(context.Background(), req, facts)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(d.Codes(), ",")
	if got != "BUDGET-002,MATRIX-008,TOOL-002" || !d.BudgetExceeded {
		t.Fatalf("codes %s budget_exceeded %v", got, d.BudgetExceeded)
	}
	d, _ = e.Evaluate(context.Background(), mustRequest(t, request("trusted", "calculate", `{}`)), nil)
	if d.BudgetExceeded {
		t.Fatal("budget_exceeded without a budget reason")
	}
}

// TestFactsValueMatchesJSON: the facts' direct AST conversion is the value
// the JSON encoding of the struct would give, field for field.
func TestFactsValueMatchesJSON(t *testing.T) {
	lvl := schema.LevelAutonomous
	cases := map[string]*schema.Facts{
		"empty":   {},
		"minimal": {Agent: &schema.AgentFacts{}, Conversation: &schema.ConversationFacts{}, Budget: &schema.BudgetFacts{}},
		"full": {
			Agent: &schema.AgentFacts{Registered: true, Revoked: true, TrustLevel: &lvl, AllowedTools: []string{"bash", "read_file"},
				BlockedTools: []string{"send_email"}, TokenRequired: true, TokenValid: true},
			Conversation: &schema.ConversationFacts{StepsApproved: 7, LastStep: 9, Fingerprint: "fp", Recent: []string{"a", "fp"}, Reserved: true},
			Budget:       &schema.BudgetFacts{RequestsLastHour: 12, MaxRequestsPerHour: 100, CostTodayUSD: 0.1 + 0.2, MaxDailyCostUSD: 1e21},
			NotApplied:   []string{"budget"},
		},
		"empty recent": {Conversation: &schema.ConversationFacts{Recent: []string{}}},
		"tiny cost":    {Budget: &schema.BudgetFacts{CostTodayUSD: 5e-324}},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := factsValue(f)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ast.ValueFromReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if got.Compare(want) != 0 {
				t.Errorf("factsValue\n got %v\nwant %v", got, want)
			}
		})
	}
	if _, err := factsValue(&schema.Facts{Budget: &schema.BudgetFacts{CostTodayUSD: math.NaN()}}); err == nil {
		t.Error("a NaN cost converted without an error")
	}
}
