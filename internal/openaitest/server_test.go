package openaitest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/openaitest"
)

func TestProtocol(t *testing.T) {
	srv := openaitest.New(t, openaitest.Reply("hi there").WithUsage(5, 2), openaitest.Status(429, ""))
	post := func(path, body string) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := srv.Client().Post(strings.TrimSuffix(srv.BaseURL(), "/v1")+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s: body is not JSON: %v", path, err)
		}
		return resp, v
	}
	const ok = `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hello"}]}]}`
	resp, v := post("/v1/chat/completions", ok)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if u := v["usage"].(map[string]any); u["prompt_tokens"] != 5.0 || u["completion_tokens"] != 2.0 {
		t.Errorf("usage = %v", u)
	}
	msg := v["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "hi there" || msg["role"] != "assistant" {
		t.Errorf("message = %v", msg)
	}
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/v1/chat/completions", ok, 429},
		{"/v1/chat/completions", "{", 400},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400},
		{"/v1/embeddings", ok, 404},
		{"/v1/chat/completions", ok, 500}, // script exhausted
	} {
		resp, v := post(tc.path, tc.body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.path, tc.body, resp.StatusCode, tc.status)
		}
		if e, _ := v["error"].(map[string]any); e == nil || e["message"] == "" || e["type"] == "" {
			t.Errorf("%s: error body %v is not in OpenAI's format", tc.path, v)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Last() != "hello" || reqs[0].Model != "m" {
		t.Errorf("recorded %+v", reqs)
	}
}
