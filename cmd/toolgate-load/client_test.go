package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientAgainstNetHTTP posts to a net/http server whose handler answers
// in each way the client must read, twice per case, and checks what the
// server received, what the client read and how many connections it took.
func TestClientAgainstNetHTTP(t *testing.T) {
	big := strings.Repeat("0123456789", 1000) // 10 KB: written in chunks
	for _, tc := range []struct {
		name    string
		handler func(w http.ResponseWriter)
		status  int
		body    string
		conns   int64 // connections opened for the two posts
	}{
		{"content length", func(w http.ResponseWriter) { io.WriteString(w, `{"decision":"allow"}`) }, 200, `{"decision":"allow"}`, 1},
		{"chunked", func(w http.ResponseWriter) {
			io.WriteString(w, big[:5000])
			w.(http.Flusher).Flush()
			io.WriteString(w, big[5000:])
		}, 200, big, 1},
		{"error status", func(w http.ResponseWriter) { http.Error(w, "slow down", http.StatusTooManyRequests) }, 429, "slow down\n", 1},
		{"no content", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }, 204, "", 1},
		{"connection close", func(w http.ResponseWriter) {
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		}, 200, "bye", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ := io.ReadAll(r.Body)
				if r.Method != http.MethodPost || r.URL.Path != "/v1/verify" || r.Header.Get("Authorization") != "Bearer tok" ||
					r.Header.Get("Content-Type") != "application/json" || string(got) != `{"n":1}` {
					t.Errorf("server received %s %s %v %q", r.Method, r.URL.Path, r.Header, got)
				}
				tc.handler(w)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			c := newClient(srv.Listener.Addr().String(), "/v1/verify", []string{"Authorization: Bearer tok", "Content-Type: application/json"}, 5*time.Second)
			defer c.close()
			for i := range 2 {
				status, body, err := c.post([]byte(`{"n":1}`))
				if err != nil || status != tc.status || string(body) != tc.body {
					t.Fatalf("post %d: %d %.60q %v, want %d %.60q", i, status, body, err, tc.status, tc.body)
				}
			}
			if n := conns.Load(); n != tc.conns {
				t.Errorf("%d connections, want %d", n, tc.conns)
			}
		})
	}
}

// TestClientMalformed: an answer the client cannot read is an error, and the
// next post dials again.
func TestClientMalformed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	answers := []string{
		"garbage\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	}
	go func() {
		for _, a := range answers {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(conn)
			if _, err := http.ReadRequest(r); err == nil {
				io.WriteString(conn, a)
			}
			conn.Close()
		}
	}()
	c := newClient(ln.Addr().String(), "/", nil, 5*time.Second)
	defer c.close()
	for i, a := range answers[:3] {
		if status, body, err := c.post(nil); err == nil {
			t.Errorf("answer %q: %d %q, no error", a, status, body)
		} else if c.conn != nil {
			t.Errorf("answer %d: connection kept after %v", i, err)
		}
	}
	if status, body, err := c.post(nil); err != nil || status != 200 || string(body) != "ok" {
		t.Errorf("after the errors: %d %q %v", status, body, err)
	}
}

// FuzzReadResponse: no answer makes the reader panic or return a body over
// its bound.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=y\r\nok\r\n0\r\nTrailer: 1\r\n\r\n",
		"HTTP/1.0 204 No Content\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffff\r\n",
		"HTTP/1.1 099 X\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &client{r: bufio.NewReaderSize(bytes.NewReader(data), 4096)}
		if _, _, err := c.readResponse(); err == nil && len(c.body) > maxBody {
			t.Errorf("body of %d bytes", len(c.body))
		}
	})
}
