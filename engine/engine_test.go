package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/schema"
)

func newTestEngine(t testing.TB, opts ...Option) *Engine {
	t.Helper()
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

func TestEvaluateSmoke(t *testing.T) {
	e := newTestEngine(t)
	req := mustRequest(t, `{"agent":{"id":"a","trust_level":"trusted"},"action":{"type":"bash","arguments":{"command":"ls -la"}},"context":{"conversation_id":"c","step_number":1}}`)
	d, err := e.Evaluate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", d)
	if d.Outcome != schema.Allow {
		t.Fatalf("got %s", d.Outcome)
	}
	_ = strings.TrimSpace
}
