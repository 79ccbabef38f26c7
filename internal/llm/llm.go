package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// MaxResponseBytes bounds the body read from the endpoint; a longer answer is
// cut and then fails to decode.
const MaxResponseBytes = 1 << 20

// Retry policy for 429 and 5xx answers: at most MaxRetries more attempts,
// waiting Backoff, then twice as long each time, and never past the
// context's deadline.
const (
	MaxRetries = 3
	Backoff    = 20 * time.Millisecond
)

// Roles of chat messages.
const (
	System    = openai.ChatMessageRoleSystem
	User      = openai.ChatMessageRoleUser
	Assistant = openai.ChatMessageRoleAssistant
)

// Message is one chat message.
type Message struct {
	Role    string
	Content string
}

// Format asks for structured output: a JSON schema the answer must follow
// (response_format json_schema, strict).
type Format struct {
	Name   string
	Schema json.RawMessage
}

// Config says which endpoint and model to use.
type Config struct {
	BaseURL    string // up to and including /v1
	Model      string
	APIKey     string
	HTTPClient *http.Client // nil: a client without its own timeout (the context bounds each call)
}

// Client calls one model on one endpoint. It is safe for concurrent use.
type Client struct {
	api   *openai.Client
	model string
}

// New checks the configuration and builds a client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm: base_url %q is not an http(s) URL", cfg.BaseURL)
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("llm: model is required")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	oc.HTTPClient = limitDoer{hc}
	return &Client{api: openai.NewClientWithConfig(oc), model: cfg.Model}, nil
}

// Model is the configured model name.
func (c *Client) Model() string { return c.model }

// Result is one completion, with the cost of every attempt that led to it.
type Result struct {
	Content   string
	Model     string // as the endpoint reported it, or the configured name
	TokensIn  int    // prompt tokens, summed over attempts
	TokensOut int    // completion tokens, summed over attempts
	Attempts  int    // HTTP requests made
}

// Add folds another result's cost into r (for callers that make a follow-up
// call).
func (r *Result) Add(o Result) {
	r.TokensIn += o.TokensIn
	r.TokensOut += o.TokensOut
	r.Attempts += o.Attempts
	if o.Model != "" {
		r.Model = o.Model
	}
}

// ErrNoChoices is returned when the endpoint answered without a message.
var ErrNoChoices = errors.New("llm: the answer has no choices")

// Complete sends the messages and returns the first choice's content. 429 and
// 5xx answers are retried with backoff while the context's deadline leaves
// time; the Result carries the cost of all attempts even when err is not nil.
func (c *Client) Complete(ctx context.Context, msgs []Message, format *Format) (Result, error) {
	req := openai.ChatCompletionRequest{Model: c.model, Messages: make([]openai.ChatCompletionMessage, len(msgs))}
	for i, m := range msgs {
		req.Messages[i] = openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
	}
	if format != nil {
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name:   format.Name,
				Schema: format.Schema,
				Strict: true,
			},
		}
	}
	res := Result{Model: c.model}
	wait := Backoff
	for {
		res.Attempts++
		resp, err := c.api.CreateChatCompletion(ctx, req)
		if err == nil {
			res.TokensIn += resp.Usage.PromptTokens
			res.TokensOut += resp.Usage.CompletionTokens
			if resp.Model != "" {
				res.Model = resp.Model
			}
			if len(resp.Choices) == 0 {
				return res, ErrNoChoices
			}
			res.Content = resp.Choices[0].Message.Content
			return res, nil
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("llm: %w", ctx.Err())
		}
		if !Retryable(err) || res.Attempts > MaxRetries || !sleep(ctx, wait) {
			return res, fmt.Errorf("llm: chat completion (attempt %d): %w", res.Attempts, err)
		}
		wait *= 2
	}
}

// sleep waits d unless the context ends first or its deadline is closer than
// d; it reports whether the wait completed.
func sleep(ctx context.Context, d time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// StatusCode is the HTTP status of a failed call, or 0 when the call did not
// get an HTTP answer.
func StatusCode(err error) int {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.HTTPStatusCode
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.HTTPStatusCode
	}
	return 0
}

// Retryable reports whether err is a 429 or 5xx answer.
func Retryable(err error) bool {
	s := StatusCode(err)
	return s == http.StatusTooManyRequests || s >= 500
}

// limitDoer bounds the response bodies go-openai reads.
type limitDoer struct{ c *http.Client }

func (d limitDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body = limitedBody{io.LimitReader(resp.Body, MaxResponseBytes), resp.Body}
	return resp, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
}

// DecodeJSON decodes a model's answer into v. It accepts the JSON object
// alone or inside a Markdown code fence, and rejects anything after it.
func DecodeJSON(content string, v any) error {
	s := strings.TrimSpace(content)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		if body, ok := strings.CutSuffix(strings.TrimSpace(rest), "```"); ok {
			s = strings.TrimSpace(body)
		}
	}
	if s == "" {
		return errors.New("llm: empty answer")
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("llm: answer is not the expected JSON: %w", err)
	}
	if strings.TrimSpace(s[dec.InputOffset():]) != "" {
		return errors.New("llm: trailing data after the JSON answer")
	}
	return nil
}

// Quote shows a model's answer in a reason: trimmed, at most 200 bytes,
// JSON-quoted so control characters cannot forge log lines.
func Quote(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "(empty)"
	}
	if len(s) > 200 {
		s = Cut(s, 200) + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// Cut keeps at most n bytes of s from its start, on a rune boundary.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// CutStart keeps at most n bytes of s from its end, on a rune boundary.
func CutStart(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
