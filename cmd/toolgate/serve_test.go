package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/bundles"
	"github.com/toolgate/toolgate/config"
)

// TestServeBundleFromURL: a bundle at an http(s) URL is loaded at start and
// reloaded when the server publishes a new revision; a broken one is
// refused and the current one kept.
func TestServeBundleFromURL(t *testing.T) {
	build := func(rev string) []byte {
		var b bytes.Buffer
		if err := bundles.Build(context.Background(), "../../policies", &b, bundles.BuildOptions{Revision: rev, Roots: []string{"toolgate"}}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	var (
		mu   sync.Mutex
		body = build("r1")
		etag = `"r1"`
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Write(body)
	}))
	defer hs.Close()

	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	f := serveFlags{policy: policyFlags{bundle: hs.URL + "/bundle.tar.gz"}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, poller, err := f.engine(context.Background(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if poller == nil {
		t.Fatal("no poller for a URL bundle")
	}
	if rev := eng.Policy().Revision; rev != "r1" {
		t.Fatalf("revision %q, want r1", rev)
	}
	steps := []struct {
		body    []byte
		etag    string
		wantErr bool
		rev     string
	}{
		{nil, `"r1"`, false, "r1"},                    // 304: kept
		{build("r2"), `"r2"`, false, "r2"},            // reloaded
		{[]byte("not a bundle"), `"bad"`, true, "r2"}, // refused: kept
	}
	for i, s := range steps {
		mu.Lock()
		if s.body != nil {
			body = s.body
		}
		etag = s.etag
		mu.Unlock()
		err := poller.Poll(context.Background())
		if (err != nil) != s.wantErr {
			t.Errorf("step %d: poll error %v, want error %v", i, err, s.wantErr)
		}
		if rev := eng.Policy().Revision; rev != s.rev {
			t.Errorf("step %d: revision %q, want %q", i, rev, s.rev)
		}
	}
}
