package server

import (
	"encoding/json"
	"net/http"
)

// Error codes in the JSON error body. Stable: clients switch on them.
const (
	ErrCodeInvalidRequest   = "invalid_request"
	ErrCodeUnauthenticated  = "unauthenticated"
	ErrCodeForbidden        = "forbidden"
	ErrCodeNotFound         = "not_found"
	ErrCodeMethodNotAllowed = "method_not_allowed"
	ErrCodeTooLarge         = "request_too_large"
	ErrCodeUnsupportedMedia = "unsupported_media_type"
	ErrCodeRateLimited      = "rate_limited"
	ErrCodeAlreadyResolved  = "already_resolved"
	ErrCodeExpired          = "expired"
	ErrCodeUnavailable      = "unavailable"
	ErrCodeInternal         = "internal"
)

// APIError is the body of every error answer: {"error": {...}}.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

type errorBody struct {
	Error APIError `json:"error"`
}

// writeJSON writes v with status. Encoding errors cannot happen for the
// types this package writes; a failed write means the client left.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"response not encodable"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg, field string) {
	writeJSON(w, status, errorBody{APIError{Code: code, Message: msg, Field: field}})
}

// withError returns the JSON object obj with "error" added as its first
// member: a verdict that is also an error (401, 403, 429) stays readable as
// a verdict.
func withError(obj []byte, e APIError) []byte {
	eb, _ := json.Marshal(e)
	out := make([]byte, 0, len(obj)+len(eb)+12)
	out = append(out, `{"error":`...)
	out = append(out, eb...)
	if len(obj) > 2 {
		out = append(out, ',')
		out = append(out, obj[1:]...)
	} else {
		out = append(out, '}')
	}
	return out
}
