package server

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// The approvals page: plain HTML, JS and CSS, no build step, nothing
// fetched from anywhere else.
//
//go:embed web
var webFS embed.FS

// staticFS is the web folder itself (fs.Sub fails only on a malformed
// name, and "web" is not one).
var staticFS, _ = fs.Sub(webFS, "web")

var staticHandler = http.StripPrefix("/static/", http.FileServerFS(staticFS))

// pageCSP allows nothing but this server: no inline script, no CDN.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.ServeFileFS(w, r, staticFS, "index.html")
}

func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("Cache-Control", "no-cache")
	if strings.HasSuffix(r.URL.Path, "/") {
		writeError(w, http.StatusNotFound, ErrCodeNotFound, "no such file: "+r.URL.Path, "")
		return
	}
	staticHandler.ServeHTTP(w, r)
}
