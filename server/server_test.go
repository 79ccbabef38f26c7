package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/server"
	"github.com/toolgate/toolgate/state"
)

func TestVerifyStatuses(t *testing.T) {
	e := newEnv(t, envOptions{opts: server.Options{MaxBodyBytes: 4096}})
	big := e.request("conv_big", 1, "calculate", map[string]any{"query": strings.Repeat("x", 5000)})
	tokenInBody := e.allowReq("conv_tok", 1)
	tokenInBody["agent"].(map[string]any)["token"] = e.token
	tests := []struct {
		name     string
		body     any
		query    string
		header   map[string]string
		status   int
		errCode  string
		field    string
		decision string
		code     string // a reason code the verdict must carry
	}{
		{name: "allow", body: e.allowReq("conv_a", 1), status: 200, decision: "allow", code: "MATRIX-005"},
		{name: "deny by policy is 200", body: e.request("conv_d", 1, "no_such_tool", map[string]any{}), status: 200, decision: "deny", code: "ACTION-001"},
		{name: "pending without waiting", body: e.pendingReq("conv_p", 1), query: "?wait=false", status: 200, decision: "pending", code: "MATRIX-006"},
		{name: "wrong token", body: e.allowReq("conv_w", 1), header: map[string]string{"Authorization": "Bearer tgt_wrong"},
			status: 401, errCode: "unauthenticated", field: "agent.token", decision: "deny", code: "AGENT-003"},
		{name: "no token", body: e.allowReq("conv_n", 1), header: map[string]string{"Authorization": ""},
			status: 401, errCode: "unauthenticated", field: "agent.token", decision: "deny", code: "AGENT-003"},
		{name: "not a bearer token", body: e.allowReq("conv_b", 1), header: map[string]string{"Authorization": "Basic dXNlcjpwYXNz"},
			status: 401, errCode: "unauthenticated"},
		{name: "unregistered agent", body: map[string]any{"agent": map[string]any{"id": "agent_nobody"},
			"action": map[string]any{"type": "calculate", "arguments": map[string]any{}}, "context": map[string]any{"conversation_id": "c", "step_number": 1}},
			status: 401, errCode: "unauthenticated", field: "agent.id", decision: "deny", code: "AGENT-002"},
		{name: "invalid request names the field", body: e.allowReq("conv_i", 0), status: 400, errCode: "invalid_request", field: "context.step_number"},
		{name: "not JSON", body: "{not json", status: 400, errCode: "invalid_request"},
		{name: "unknown field", body: `{"agent":{"id":"a"},"action":{"type":"calculate","arguments":{}},"context":{"conversation_id":"c","step_number":1},"extra":1}`,
			status: 400, errCode: "invalid_request", field: "extra"},
		{name: "token in the body", body: tokenInBody, status: 400, errCode: "invalid_request", field: "agent.token"},
		{name: "bad wait", body: e.allowReq("conv_q", 1), query: "?wait=maybe", status: 400, errCode: "invalid_request", field: "wait"},
		{name: "over the body limit", body: big, status: 413, errCode: "request_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := e.auth()
			for k, v := range tc.header {
				h[k] = v
			}
			r := e.do(http.MethodPost, "/v1/verify"+tc.query, tc.body, h)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			code, field := r.errorCode(t)
			if code != tc.errCode || field != tc.field {
				t.Errorf("error code %q field %q, want %q %q: %s", code, field, tc.errCode, tc.field, r.body)
			}
			if tc.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if tc.decision == "" {
				return
			}
			var v struct {
				Decision   string          `json:"decision"`
				Reasons    []schema.Reason `json:"reasons"`
				ApprovalID string          `json:"approval_id"`
				AuditID    int64           `json:"audit_id"`
			}
			if err := json.Unmarshal(r.body, &v); err != nil {
				t.Fatal(err)
			}
			if v.Decision != tc.decision {
				t.Errorf("decision %q, want %q: %s", v.Decision, tc.decision, r.body)
			}
			found := false
			for _, rs := range v.Reasons {
				found = found || rs.Code == tc.code
			}
			if !found {
				t.Errorf("no reason %s: %s", tc.code, r.body)
			}
			if v.AuditID == 0 {
				t.Errorf("no audit id: %s", r.body)
			}
			if tc.decision == "pending" && v.ApprovalID == "" {
				t.Errorf("pending without approval_id: %s", r.body)
			}
		})
	}
}

func TestVerifyRevokedAgent(t *testing.T) {
	e := newEnv(t, envOptions{})
	if err := e.srv.Verifier().Store().RevokeAgent(context.Background(), e.agent); err != nil {
		t.Fatal(err)
	}
	r := e.verify(e.allowReq("conv_r", 1), "")
	if r.status != http.StatusForbidden {
		t.Fatalf("status %d, want 403: %s", r.status, r.body)
	}
	if code, _ := r.errorCode(t); code != "forbidden" {
		t.Errorf("error code %q", code)
	}
	if !strings.Contains(string(r.body), "AGENT-001") {
		t.Errorf("no AGENT-001: %s", r.body)
	}
}

func TestVerifyRateLimited(t *testing.T) {
	e := newEnv(t, envOptions{spec: state.AgentSpec{Name: "limited", Trust: schema.LevelSupervised, MaxRequestsPerHour: 2}})
	for step := 1; step <= 2; step++ {
		if r := e.verify(e.request("conv_rl", step, "calculate", map[string]any{"query": strings.Repeat("1", step)}), ""); r.status != 200 {
			t.Fatalf("request %d: status %d: %s", step, r.status, r.body)
		}
	}
	r := e.verify(e.allowReq("conv_rl2", 1), "")
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", r.status, r.body)
	}
	m := r.json(t)
	if m["decision"] != "deny" || m["budget_exceeded"] != true || !strings.Contains(string(r.body), "BUDGET-002") {
		t.Errorf("429 without the verdict: %s", r.body)
	}
	if r.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	b := e.do(http.MethodGet, "/v1/agents/"+e.agent+"/budget", nil, nil).json(t)
	if b["requests_last_hour"].(float64) < 2 || b["max_requests_per_hour"].(float64) != 2 {
		t.Errorf("budget %v", b)
	}
}

func TestRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})
	tests := []struct {
		method, path string
		status       int
		errCode      string
		contains     string
	}{
		{"GET", "/healthz", 200, "", `"ok"`},
		{"GET", "/readyz", 200, "", `"ready"`},
		{"GET", "/v1/agents/" + e.agent + "/budget", 200, "", `"requests_last_hour"`},
		{"GET", "/v1/agents/agent_nobody/budget", 404, "not_found", ""},
		{"GET", "/v1/approvals", 200, "", `"approvals":[]`},
		{"GET", "/v1/approvals?status=all", 200, "", `"approvals"`},
		{"GET", "/v1/approvals?status=maybe", 400, "invalid_request", ""},
		{"GET", "/v1/approvals/apr_AAAAAAAAAAAAAAAAAAAAAA", 404, "not_found", ""},
		{"GET", "/v1/approvals/nope", 400, "invalid_request", ""},
		{"GET", "/v1/verify", 405, "method_not_allowed", ""},
		{"DELETE", "/v1/approvals", 405, "method_not_allowed", ""},
		{"POST", "/healthz", 405, "method_not_allowed", ""},
		{"GET", "/v2/nothing", 404, "not_found", ""},
		{"GET", "/static/", 404, "not_found", ""},
		{"GET", "/", 200, "", "toolgate"},
		{"GET", "/static/app.js", 200, "", "EventSource"},
		{"GET", "/static/style.css", 200, "", ".card"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := e.do(tc.method, tc.path, nil, nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.errCode != "" {
				if code, _ := r.errorCode(t); code != tc.errCode {
					t.Errorf("error code %q, want %q", code, tc.errCode)
				}
			}
			if !strings.Contains(string(r.body), tc.contains) {
				t.Errorf("body lacks %q: %.300s", tc.contains, r.body)
			}
			if tc.status == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

func TestPageHeaders(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.do("GET", "/", nil, nil)
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	if strings.Contains(string(r.body), "http://") || strings.Contains(string(r.body), "https://") {
		t.Error("the page loads something from elsewhere")
	}
}

func TestAnswerApproval(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.verify(e.pendingReq("conv_ans", 1), "?wait=false")
	id, _ := r.json(t)["approval_id"].(string)
	if id == "" {
		t.Fatalf("no approval id: %s", r.body)
	}
	path := "/v1/approvals/" + id
	tests := []struct {
		name    string
		body    any
		header  map[string]string
		status  int
		errCode string
		field   string
	}{
		{"not JSON content type", `{"approve":true,"by":"ann"}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type", ""},
		{"cross-origin", map[string]any{"approve": true, "by": "ann"}, map[string]string{"Origin": "https://evil.example"}, 403, "forbidden", ""},
		{"cross-site fetch", map[string]any{"approve": true, "by": "ann"}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "forbidden", ""},
		{"approve missing", map[string]any{"by": "ann"}, nil, 400, "invalid_request", "approve"},
		{"by missing", map[string]any{"approve": true}, nil, 400, "invalid_request", "by"},
		{"unknown field", map[string]any{"approve": true, "by": "ann", "when": "now"}, nil, 400, "invalid_request", ""},
		{"reason too long", map[string]any{"approve": true, "by": "ann", "reason": strings.Repeat("r", 5000)}, nil, 400, "invalid_request", "reason"},
		{"first answer wins", map[string]any{"approve": true, "by": "ann", "reason": "looks fine"}, nil, 200, "", ""},
		{"later answer refused", map[string]any{"approve": false, "by": "bob"}, nil, 409, "already_resolved", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(http.MethodPost, path, tc.body, tc.header)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			code, field := r.errorCode(t)
			if code != tc.errCode || field != tc.field {
				t.Errorf("error %q field %q, want %q %q: %s", code, field, tc.errCode, tc.field, r.body)
			}
			if tc.status == 409 {
				a := r.json(t)["approval"].(map[string]any)
				if a["resolved_by"] != "ann" || a["status"] != "approved" {
					t.Errorf("409 does not say who answered first: %s", r.body)
				}
			}
		})
	}
	for _, tc := range []struct {
		path   string
		status int
	}{{"/v1/approvals/apr_AAAAAAAAAAAAAAAAAAAAAA", 404}, {"/v1/approvals/bad-id", 400}} {
		if r := e.do(http.MethodPost, tc.path, map[string]any{"approve": true, "by": "ann"}, nil); r.status != tc.status {
			t.Errorf("POST %s: status %d, want %d: %s", tc.path, r.status, tc.status, r.body)
		}
	}
	// The agent asks again for the same step and gets the answer.
	v := e.verify(e.pendingReq("conv_ans", 1), "?wait=false").json(t)
	if v["decision"] != "allow" || v["tier"].(float64) != 3 {
		t.Errorf("after approval: %v", v)
	}
}

// TestVerifyWaitsForAPerson: the agent's POST stays open until a person
// answers over the API; then it gets allow.
func TestVerifyWaitsForAPerson(t *testing.T) {
	e := newEnv(t, envOptions{})
	done := make(chan response, 1)
	go func() { done <- e.verify(e.pendingReq("conv_wait", 1), "") }()
	list := e.waitPending(1)
	select {
	case r := <-done:
		t.Fatalf("verify returned before an answer: %s", r.body)
	default:
	}
	r := e.do(http.MethodPost, "/v1/approvals/"+list[0]["id"].(string), map[string]any{"approve": true, "by": "ann"}, nil)
	if r.status != 200 {
		t.Fatalf("answer: %d %s", r.status, r.body)
	}
	v := <-done
	m := v.json(t)
	if v.status != 200 || m["decision"] != "allow" {
		t.Fatalf("verify after approval: %d %s", v.status, v.body)
	}
	if !strings.Contains(string(v.body), "APPROVAL-004") {
		t.Errorf("no APPROVAL-004: %s", v.body)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.verify(e.allowReq("conv_m", 1), "")
	e.verify(e.pendingReq("conv_m2", 1), "?wait=false")
	e.verify(e.allowReq("conv_m3", 0), "")
	r := e.do(http.MethodGet, "/metrics", nil, nil)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	body := string(r.body)
	for _, want := range []string{
		`toolgate_decisions_total{decision="allow",tier="1",code="MATRIX-005"} 1`,
		`toolgate_decisions_total{decision="pending",tier="1",code="MATRIX-006"} 1`,
		`toolgate_decision_duration_seconds_bucket{tier="1",le="+Inf"} 2`,
		`toolgate_decision_duration_seconds_count{tier="1"} 2`,
		"toolgate_approvals_pending 1",
		`toolgate_http_requests_total{route="/v1/verify",code="400"} 1`,
		"toolgate_verify_invalid_total 1",
		"toolgate_verify_in_flight 0",
		"toolgate_ready 1",
		"# TYPE toolgate_decision_duration_seconds histogram",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Every sample line is "name{labels} value" or "name value".
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Fields(line); len(f) != 2 && !strings.Contains(line, "} ") {
			t.Errorf("malformed sample %q", line)
		}
	}
}
