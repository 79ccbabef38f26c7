package server_test

import (
	"context"
	"net/http"
	"testing"
)

// TestEventsApprovalLifecycle: a stream sees approval_required, the
// decision, then approval_resolved with who answered.
func TestEventsApprovalLifecycle(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/v1/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := readEvents(t, res.Body)

	r := e.verify(e.pendingReq("conv_sse", 1), "?wait=false")
	id, _ := r.json(t)["approval_id"].(string)
	if id == "" {
		t.Fatalf("no approval id: %s", r.body)
	}
	req1 := nextEvent(t, events, "approval_required", "approval_resolved")
	if req1.typ != "approval_required" || req1.data["id"] != id || req1.data["action_type"] != "file_write" {
		t.Fatalf("first approval event %s %v", req1.typ, req1.data)
	}
	if _, ok := req1.data["deadline"]; !ok {
		t.Error("approval_required without a deadline")
	}
	d := nextEvent(t, events, "decision")
	if d.data["decision"] != "pending" || d.data["approval_id"] != id || d.data["agent_id"] != e.agent {
		t.Errorf("decision event %v", d.data)
	}
	if a := e.do(http.MethodPost, "/v1/approvals/"+id, map[string]any{"approve": false, "by": "ann", "reason": "not now"}, nil); a.status != 200 {
		t.Fatalf("answer: %d %s", a.status, a.body)
	}
	res1 := nextEvent(t, events, "approval_resolved")
	if res1.data["id"] != id || res1.data["status"] != "denied" || res1.data["resolved_by"] != "ann" {
		t.Errorf("approval_resolved %v", res1.data)
	}
}
