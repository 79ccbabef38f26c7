package bundles

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// bundleServer serves one bundle with an ETag, answering 304 to a matching
// If-None-Match, the way an OPA bundle server does.
type bundleServer struct {
	mu       sync.Mutex
	body     []byte
	status   int
	requests []string // If-None-Match of each request
}

func (s *bundleServer) set(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.status = body, 0
}

func (s *bundleServer) fail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

func (s *bundleServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Header.Get("If-None-Match"))
	if s.status != 0 {
		http.Error(w, "down", s.status)
		return
	}
	sum := sha256.Sum256(s.body)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "application/gzip")
	_, _ = w.Write(s.body)
}

// recorder is the engine's side: it keeps the revisions it accepted.
type recorder struct {
	mu        sync.Mutex
	revisions []string
	reject    error
	loaded    chan string
}

func (r *recorder) update(_ context.Context, b *bundle.Bundle) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reject != nil {
		return r.reject
	}
	r.revisions = append(r.revisions, b.Manifest.Revision)
	if r.loaded != nil {
		r.loaded <- b.Manifest.Revision
	}
	return nil
}

func TestPollerKeepsTheGoodBundle(t *testing.T) {
	k := newKey(t, "ES256")
	srv := &bundleServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	rec := &recorder{}
	var logs bytes.Buffer
	p := NewPoller(ts.URL+"/bundles/tier1.tar.gz", time.Minute, &VerificationKey{PEM: k.Public}, rec.update,
		slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()

	r1 := signedBundle(t, "r1", k, "")
	steps := []struct {
		name    string
		serve   func()
		wantErr string
		want    PollerStats
	}{
		{"first fetch: 200", func() { srv.set(r1) }, "",
			PollerStats{Loaded: 1, Revision: "r1"}},
		{"unchanged: 304", func() {}, "",
			PollerStats{Loaded: 1, NotModified: 1, Revision: "r1"}},
		{"new revision", func() { srv.set(signedBundle(t, "r2", k, "")) }, "",
			PollerStats{Loaded: 2, NotModified: 1, Revision: "r2"}},
		{"unsigned bundle pushed", func() { srv.set(buildBundle(t, "r3-unsigned")) }, SignaturesFile,
			PollerStats{Loaded: 2, NotModified: 1, Refused: 1, Revision: "r2"}},
		{"tampered bundle pushed", func() {
			srv.set(edit(t, signedBundle(t, "r4", k, ""), "/data.json", func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"critical"`), []byte(`"low"`), 1)
			}))
		}, "data.json",
			PollerStats{Loaded: 2, NotModified: 1, Refused: 2, Revision: "r2"}},
		{"bundle signed by another key", func() { srv.set(signedBundle(t, "r5", newKey(t, "ES256-other"), "")) }, SignaturesFile,
			PollerStats{Loaded: 2, NotModified: 1, Refused: 3, Revision: "r2"}},
		{"server down", func() { srv.fail(http.StatusServiceUnavailable) }, "503",
			PollerStats{Loaded: 2, NotModified: 1, Refused: 3, FetchErrors: 1, Revision: "r2"}},
		{"consumer rejects it", func() { srv.set(signedBundle(t, "r6", k, "")); rec.reject = errors.New("does not compile") }, "does not compile",
			PollerStats{Loaded: 2, NotModified: 1, Refused: 4, FetchErrors: 1, Revision: "r2"}},
		{"good bundle again", func() { rec.reject = nil; srv.set(signedBundle(t, "r7", k, "")) }, "",
			PollerStats{Loaded: 3, NotModified: 1, Refused: 4, FetchErrors: 1, Revision: "r7"}},
	}
	for _, st := range steps {
		st.serve()
		err := p.Poll(ctx)
		if st.wantErr == "" && err != nil || st.wantErr != "" && (err == nil || !strings.Contains(err.Error(), st.wantErr)) {
			t.Fatalf("%s: Poll = %v, want error containing %q", st.name, err, st.wantErr)
		}
		got := p.Stats()
		if got.ETag == "" {
			t.Errorf("%s: no ETag kept", st.name)
		}
		if (got.LastError == "") != (st.wantErr == "") {
			t.Errorf("%s: LastError = %q", st.name, got.LastError)
		}
		got.ETag, got.LastError = "", ""
		if got != st.want {
			t.Errorf("%s: stats = %+v, want %+v", st.name, got, st.want)
		}
	}
	if want := []string{"r1", "r2", "r7"}; strings.Join(rec.revisions, ",") != strings.Join(want, ",") {
		t.Errorf("consumer got %v, want %v", rec.revisions, want)
	}
	if srv.requests[0] != "" || srv.requests[1] == "" {
		t.Errorf("If-None-Match sent: %q", srv.requests)
	}
	if !strings.Contains(logs.String(), "bundle refused; keeping the current bundle") {
		t.Errorf("refusal not logged:\n%s", logs.String())
	}
}

func TestPollerRun(t *testing.T) {
	k := newKey(t, "RS256")
	srv := &bundleServer{}
	srv.set(signedBundle(t, "r1", k, ""))
	ts := httptest.NewServer(srv)
	defer ts.Close()
	rec := &recorder{loaded: make(chan string, 4)}
	p := NewPoller(ts.URL, time.Millisecond, &VerificationKey{PEM: k.Public}, rec.update, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	if rev := <-rec.loaded; rev != "r1" {
		t.Fatalf("first bundle %q", rev)
	}
	srv.set(signedBundle(t, "r2", k, ""))
	if rev := <-rec.loaded; rev != "r2" {
		t.Fatalf("second bundle %q", rev)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}

func TestPollerConfigErrors(t *testing.T) {
	noop := func(context.Context, *bundle.Bundle) error { return nil }
	tests := []struct {
		name     string
		url      string
		interval time.Duration
		key      *VerificationKey
		fn       UpdateFunc
	}{
		{"file path", "/tmp/b.tar.gz", time.Second, nil, noop},
		{"zero interval", "http://127.0.0.1/b", 0, nil, noop},
		{"no callback", "http://127.0.0.1/b", time.Second, nil, nil},
		{"bad key", "http://127.0.0.1/b", time.Second, &VerificationKey{PEM: []byte("x")}, noop},
	}
	for _, tt := range tests {
		p := NewPoller(tt.url, tt.interval, tt.key, tt.fn, nil)
		if err := p.Poll(context.Background()); err == nil {
			t.Errorf("%s: Poll succeeded", tt.name)
		}
		if err := p.Run(context.Background()); err == nil {
			t.Errorf("%s: Run succeeded", tt.name)
		}
	}
}

func TestLoadFromURL(t *testing.T) {
	k := newKey(t, "ES256")
	srv := &bundleServer{}
	srv.set(signedBundle(t, "r1", k, ""))
	ts := httptest.NewServer(srv)
	defer ts.Close()
	b, err := Load(context.Background(), ts.URL+"/tier1.tar.gz", &VerificationKey{PEM: k.Public})
	if err != nil || Revision(b) != "r1" || b.Etag == "" {
		t.Fatalf("Load = %v, %v", b, err)
	}
	srv.set(buildBundle(t, "unsigned"))
	if _, err := Load(context.Background(), ts.URL+"/tier1.tar.gz", &VerificationKey{PEM: k.Public}); err == nil {
		t.Fatal("unsigned bundle over HTTP accepted with a key configured")
	}
	srv.fail(http.StatusNotFound)
	if _, err := Load(context.Background(), ts.URL+"/tier1.tar.gz", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("Load of a 404 = %v", err)
	}
}
