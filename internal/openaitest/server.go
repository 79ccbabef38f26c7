package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxBody bounds a request body the server will read.
const maxBody = 4 << 20

// Step is one scripted answer, used by exactly one request, in order.
type Step struct {
	kind    string
	content string
	status  int
	body    string
	delay   time.Duration
	then    *Step
	usage   *Usage
	handler http.HandlerFunc
}

// Usage is the token accounting a reply reports.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Reply answers 200 with one assistant message holding content.
func Reply(content string) Step { return Step{kind: "reply", content: content} }

// ReplyJSON answers 200 with v, encoded as JSON, as the message content.
func ReplyJSON(v any) Step {
	b, err := json.Marshal(v)
	if err != nil {
		return Step{kind: "status", status: http.StatusInternalServerError, body: "openaitest: " + err.Error()}
	}
	return Reply(string(b))
}

// Status answers with an HTTP error status. An empty body becomes an error
// body in OpenAI's format ({"error": {"message", "type", "code"}}); any other
// body is sent verbatim.
func Status(code int, body string) Step { return Step{kind: "status", status: code, body: body} }

// Delay waits d (or until the client gives up) and then answers with then.
func Delay(d time.Duration, then Step) Step { return Step{kind: "delay", delay: d, then: &then} }

// Empty answers 200 with one assistant message whose content is empty.
func Empty() Step { return Step{kind: "reply", content: ""} }

// NoChoices answers 200 with an empty choices array.
func NoChoices() Step { return Step{kind: "nochoices"} }

// Garbage answers 200 with a body that is not JSON.
func Garbage() Step { return Step{kind: "garbage"} }

// Handler answers with h, for cases the other steps do not cover.
func Handler(h http.HandlerFunc) Step { return Step{kind: "handler", handler: h} }

// WithUsage sets the usage a reply reports (by default, the number of
// whitespace-separated words in the request's messages and in the reply).
func (s Step) WithUsage(prompt, completion int) Step {
	s.usage = &Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	if s.then != nil {
		t := s.then.WithUsage(prompt, completion)
		s.then = &t
	}
	return s
}

// Message is one chat message as the server received it. Content that was
// sent as an array of parts is joined into one string.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ResponseFormat is the request's response_format.
type ResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Strict bool            `json:"strict"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema,omitempty"`
}

// Request is what the server recorded of one request.
type Request struct {
	Path           string
	Authorization  string
	Model          string
	Messages       []Message
	ResponseFormat *ResponseFormat
	Body           []byte
}

// Last returns the content of the request's last message.
func (r Request) Last() string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Content
}

// Server is a scripted chat completions endpoint.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	steps    []Step
	fallback *Step
	requests []Request
}

// New starts a server on 127.0.0.1 with the scripted steps and closes it when
// the test ends. When the steps run out, the server answers 500 in OpenAI's
// error format unless a fallback is set.
func New(tb testing.TB, steps ...Step) *Server {
	tb.Helper()
	s := Start(steps...)
	tb.Cleanup(s.Close)
	return s
}

// Start is New for callers without a testing.TB (examples); Close the
// server when done.
func Start(steps ...Step) *Server {
	s := &Server{steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close shuts the server down, waiting for requests in flight.
func (s *Server) Close() { s.srv.Close() }

// BaseURL is the server's base_url, ending in /v1.
func (s *Server) BaseURL() string { return s.srv.URL + "/v1" }

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Push appends steps to the script.
func (s *Server) Push(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// Fallback sets the answer used once the script runs out.
func (s *Server) Fallback(step Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = &step
}

// Requests returns a copy of the chat completion requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Remaining is the number of scripted steps not yet used.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

type wireRequest struct {
	Model          string          `json:"model"`
	Messages       []wireMessage   `json:"messages"`
	ResponseFormat *ResponseFormat `json:"response_format"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func (m wireMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "Unknown request URL: "+r.Method+" "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "Use POST for "+r.URL.Path)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_body", "could not read the request body")
		return
	}
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	if wr.Model == "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "missing_required_parameter", "you must provide a model parameter")
		return
	}
	if len(wr.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "missing_required_parameter", "messages: must not be empty")
		return
	}
	rec := Request{
		Path:           r.URL.Path,
		Authorization:  r.Header.Get("Authorization"),
		Model:          wr.Model,
		ResponseFormat: wr.ResponseFormat,
		Body:           body,
	}
	for _, m := range wr.Messages {
		rec.Messages = append(rec.Messages, Message{Role: m.Role, Content: m.text()})
	}

	s.mu.Lock()
	s.requests = append(s.requests, rec)
	var step Step
	switch {
	case len(s.steps) > 0:
		step = s.steps[0]
		s.steps = s.steps[1:]
	case s.fallback != nil:
		step = *s.fallback
	default:
		step = Step{kind: "status", status: http.StatusInternalServerError, body: ""}
	}
	s.mu.Unlock()

	s.answer(w, r, rec, step)
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, rec Request, step Step) {
	switch step.kind {
	case "delay":
		t := time.NewTimer(step.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return // the client gave up; nobody reads an answer
		}
		s.answer(w, r, rec, *step.then)
	case "status":
		if step.body != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(step.status)
			io.WriteString(w, step.body)
			return
		}
		typ, code := "server_error", "server_error"
		if step.status == http.StatusTooManyRequests {
			typ, code = "requests", "rate_limit_exceeded"
		} else if step.status < 500 {
			typ, code = "invalid_request_error", "invalid_request"
		}
		writeError(w, step.status, typ, code, fmt.Sprintf("openaitest: scripted %d %s", step.status, http.StatusText(step.status)))
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "<html>502 Bad Gateway</html> this is not JSON {")
	case "handler":
		step.handler(w, r)
	case "nochoices":
		writeCompletion(w, rec, nil, s.usage(rec, "", step.usage))
	default: // reply
		writeCompletion(w, rec, &step.content, s.usage(rec, step.content, step.usage))
	}
}

func (s *Server) usage(rec Request, content string, u *Usage) Usage {
	if u != nil {
		return *u
	}
	in := 0
	for _, m := range rec.Messages {
		in += len(strings.Fields(m.Content))
	}
	out := len(strings.Fields(content))
	return Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out}
}

func writeCompletion(w http.ResponseWriter, rec Request, content *string, u Usage) {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	}
	choices := []choice{}
	if content != nil {
		choices = append(choices, choice{Message: message{Role: "assistant", Content: *content}, FinishReason: "stop"})
	}
	resp := struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   Usage    `json:"usage"`
	}{"chatcmpl-openaitest", "chat.completion", time.Now().Unix(), rec.Model, choices, u}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nil, "code": code,
	}})
}
