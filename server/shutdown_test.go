package server_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/toolgate/toolgate/server"
)

// serve runs e.srv.Serve on a loopback port until the returned cancel.
func serve(t *testing.T, e *env) (cancel func(), done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.base = "http://" + ln.Addr().String()
	ctx, cancelFn := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- e.srv.Serve(ctx, ln) }()
	t.Cleanup(cancelFn)
	return cancelFn, errc
}

// TestShutdownFinishesInFlight: after the signal, a verify waiting for a
// person still gets its answer, new connections are refused, and Serve
// returns nil.
func TestShutdownFinishesInFlight(t *testing.T) {
	e := newEnv(t, envOptions{noHTTP: true, opts: server.Options{ShutdownTimeout: 20 * time.Second}})
	stop, done := serve(t, e)
	got := make(chan response, 1)
	go func() { got <- e.verify(e.pendingReq("conv_sd", 1), "") }()
	list := e.waitPending(1)
	stop()
	// Serve is draining: the listener closes, the waiting request stays.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", e.base[len("http://"):], time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after the signal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve returned with a request in flight: %v", err)
	case r := <-got:
		t.Fatalf("the in-flight request was cut short: %d %s", r.status, r.body)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := e.srv.Approvals().Resolve(context.Background(), list[0]["id"].(string), true, "ann", ""); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.status != 200 || r.json(t)["decision"] != "allow" {
		t.Fatalf("in-flight verify: %d %s", r.status, r.body)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestShutdownGraceEndsAndApprovalSurvives: past the grace period a
// waiting verify gets 503 with its approval id; the approval stays pending
// across a restart, and asking again after the answer gets allow.
func TestShutdownGraceEndsAndApprovalSurvives(t *testing.T) {
	e := newEnv(t, envOptions{noHTTP: true, opts: server.Options{ShutdownTimeout: 300 * time.Millisecond}})
	stop, done := serve(t, e)
	got := make(chan response, 1)
	go func() { got <- e.verify(e.pendingReq("conv_gr", 1), "") }()
	list := e.waitPending(1)
	id := list[0]["id"].(string)
	stop()
	r := <-got
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503: %s", r.status, r.body)
	}
	if m := r.json(t); m["approval_id"] != id || m["decision"] != "deny" {
		t.Errorf("503 body: %s", r.body)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart on the same database: the approval is still pending.
	e2 := newEnv(t, envOptions{dir: e.dir})
	e2.agent, e2.token = e.agent, e.token
	after := e2.waitPending(1)
	if after[0]["id"] != id {
		t.Fatalf("pending after restart: %v", after)
	}
	if a := e2.do(http.MethodPost, "/v1/approvals/"+id, map[string]any{"approve": true, "by": "ann"}, nil); a.status != 200 {
		t.Fatalf("answer: %d %s", a.status, a.body)
	}
	v := e2.verify(e2.pendingReq("conv_gr", 1), "")
	if v.status != 200 || v.json(t)["decision"] != "allow" {
		t.Fatalf("asking again: %d %s", v.status, v.body)
	}
}
