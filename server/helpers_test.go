package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/server"
	"github.com/toolgate/toolgate/state"
)

// env is a server on a real SQLite file with the signed audit log on, and
// one registered agent.
type env struct {
	t      *testing.T
	srv    *server.Server
	http   *httptest.Server
	base   string // the server's URL
	client http.Client
	dir    string
	dbPath string
	agent  string
	token  string
}

type envOptions struct {
	yaml string // toolgate.yaml; default: approvals.timeout_seconds 30
	opts server.Options
	spec state.AgentSpec
	dir  string // reuse this directory's database and key (a restart)
	// noHTTP: no httptest server (the test calls Serve itself).
	noHTTP bool
}

func newEnv(t *testing.T, eo envOptions) *env {
	t.Helper()
	dir := eo.dir
	if dir == "" {
		dir = t.TempDir()
	}
	if eo.yaml == "" {
		eo.yaml = "approvals:\n  timeout_seconds: 30\n  max_per_hour: 100\n"
	}
	cfg, err := config.Parse(strings.NewReader(eo.yaml))
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "keys", "toolgate.key")
	if _, err := os.Stat(key); err != nil {
		if key, _, err = audit.GenerateKey(filepath.Join(dir, "keys"), "ecdsa-p256", ""); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "toolgate.db")
	if eo.opts.Logger == nil {
		eo.opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := server.New(context.Background(), cfg, eo.opts, toolgate.WithDB(db), toolgate.WithAuditKey(key))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if eo.spec.Name == "" {
		eo.spec = state.AgentSpec{Name: "test-bot", Trust: schema.LevelSupervised}
	}
	a, tok, err := srv.Verifier().Store().RegisterAgent(context.Background(), eo.spec)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv, dir: dir, dbPath: db, agent: a.ID, token: tok}
	if !eo.noHTTP {
		e.http = httptest.NewServer(srv.Handler())
		t.Cleanup(e.http.Close)
		e.base = e.http.URL
	}
	return e
}

// request is a request body for the env's agent.
func (e *env) request(conv string, step int, tool string, args map[string]any) map[string]any {
	return map[string]any{
		"agent":   map[string]any{"id": e.agent},
		"action":  map[string]any{"type": tool, "arguments": args},
		"context": map[string]any{"conversation_id": conv, "step_number": step},
	}
}

// allowReq is a Tier 1 allow (supervised agent, low-risk tool).
func (e *env) allowReq(conv string, step int) map[string]any {
	return e.request(conv, step, "calculate", map[string]any{"query": "2+2"})
}

// pendingReq needs a person (supervised agent, medium-risk tool).
func (e *env) pendingReq(conv string, step int) map[string]any {
	return e.request(conv, step, "file_write", map[string]any{"path": "notes.txt", "content": "hello"})
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d: body is not a JSON object: %v\n%s", r.status, err, r.body)
	}
	return m
}

// errorCode is the body's error.code ("" without one).
func (r response) errorCode(t *testing.T) (code, field string) {
	m := r.json(t)
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return "", ""
	}
	c, _ := e["code"].(string)
	f, _ := e["field"].(string)
	return c, f
}

func (e *env) do(method, path string, body any, header map[string]string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (e *env) auth() map[string]string {
	return map[string]string{"Authorization": "Bearer " + e.token}
}

func (e *env) verify(body any, query string) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/v1/verify"+query, body, e.auth())
}

// waitPending polls until n approvals are pending.
func (e *env) waitPending(n int) []map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r := e.do(http.MethodGet, "/v1/approvals", nil, nil)
		list, _ := r.json(e.t)["approvals"].([]any)
		if len(list) >= n {
			out := make([]map[string]any, len(list))
			for i, a := range list {
				out[i] = a.(map[string]any)
			}
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("fewer than %d approvals pending after 10 s", n)
	return nil
}

// sseEvent is one event read from /v1/events.
type sseEvent struct {
	typ  string
	data map[string]any
}

// readEvents sends the stream's events to a channel until the body closes.
func readEvents(t *testing.T, body io.Reader) <-chan sseEvent {
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.typ != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
					ev.typ = fmt.Sprintf("unparseable(%v)", err)
				}
			}
		}
	}()
	return ch
}

// nextEvent returns the next event of one of the types, skipping others.
func nextEvent(t *testing.T, ch <-chan sseEvent, types ...string) sseEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event stream ended before %v", types)
			}
			for _, ty := range types {
				if ev.typ == ty {
					return ev
				}
			}
		case <-timeout:
			t.Fatalf("no %v event within 10 s", types)
		}
	}
}
