package triage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/llm"
	"github.com/toolgate/toolgate/schema"
)

// Reason codes for outcomes that did not clear. Stable: never renumbered.
const (
	CodeSuspicious    = "TRIAGE-001" // judged influenced by untrusted content
	CodeUnclear       = "TRIAGE-002" // no readable answer, even after the YES/NO retry
	CodeTimeout       = "TRIAGE-003" // the probe timed out
	CodeOverLimit     = "TRIAGE-004" // probe limit per turn reached
	CodeEndpointError = "TRIAGE-005" // endpoint error, or the caller gave up
	CodeLowConfidence = "TRIAGE-006" // not suspicious, but below the confidence threshold
)

// Results: what happened to the probe.
const (
	ResultClear      = "clear"
	ResultSuspicious = "suspicious"
	ResultUnclear    = "unclear"
	ResultTimeout    = "timeout"
	ResultOverLimit  = "over_limit"
	ResultError      = "error"
)

// Defaults for zero Config fields.
const (
	DefaultConfidenceThreshold = 0.5
	DefaultMaxProbesPerTurn    = 10
	DefaultProbeTimeout        = 5 * time.Second
)

// maxTurns bounds the per-turn probe counter; the oldest turn is forgotten
// first.
const maxTurns = 4096

// Config configures a Client. Zero values take the defaults above; OnTimeout
// defaults to escalate.
type Config struct {
	BaseURL, Model, APIKey string
	ConfidenceThreshold    float64
	MaxProbesPerTurn       int
	ProbeTimeout           time.Duration
	OnTimeout              schema.Outcome // escalate | deny | allow
	AlwaysProbe            []string       // categories the pipeline probes even when Tier 1 allowed
	HTTPClient             *http.Client
	Logger                 *slog.Logger
}

// Outcome is Tier 2's answer about one tool call.
type Outcome struct {
	Result     string         `json:"result"` // clear | suspicious | unclear | timeout | over_limit | error
	Next       schema.Outcome `json:"next"`   // allow (proceed) | escalate | deny
	Suspicious bool           `json:"suspicious"`
	Confidence float64        `json:"confidence"`
	Reason     string         `json:"reason,omitempty"`
	Model      string         `json:"model,omitempty"`
	TokensIn   int            `json:"tokens_in"`
	TokensOut  int            `json:"tokens_out"`
	Latency    time.Duration  `json:"latency_ns"`
	Attempts   int            `json:"attempts"`
	Code       string         `json:"code,omitempty"` // TRIAGE-00x when it did not clear
}

// Client probes one model. It is safe for concurrent use.
type Client struct {
	llm       *llm.Client
	threshold float64
	timeout   time.Duration
	onTimeout schema.Outcome
	always    map[string]bool
	log       *slog.Logger
	turns     *turnCounter
}

// New checks cfg and builds a client. It does not contact the endpoint.
func New(cfg Config) (*Client, error) {
	lc, err := llm.New(llm.Config{BaseURL: cfg.BaseURL, Model: cfg.Model, APIKey: cfg.APIKey, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("triage: %w", err)
	}
	c := &Client{llm: lc, threshold: cfg.ConfidenceThreshold, timeout: cfg.ProbeTimeout, onTimeout: cfg.OnTimeout, always: map[string]bool{}, log: cfg.Logger}
	if c.threshold < 0 || c.threshold > 1 {
		return nil, fmt.Errorf("triage: confidence threshold %v is not between 0 and 1", c.threshold)
	}
	if c.threshold == 0 {
		c.threshold = DefaultConfidenceThreshold
	}
	if cfg.MaxProbesPerTurn < 0 || cfg.ProbeTimeout < 0 {
		return nil, errors.New("triage: max probes per turn and probe timeout must not be negative")
	}
	limit := cfg.MaxProbesPerTurn
	if limit == 0 {
		limit = DefaultMaxProbesPerTurn
	}
	c.turns = newTurnCounter(limit, maxTurns)
	if c.timeout == 0 {
		c.timeout = DefaultProbeTimeout
	}
	switch c.onTimeout {
	case "":
		c.onTimeout = schema.Escalate
	case schema.Escalate, schema.Deny, schema.Allow:
	default:
		return nil, fmt.Errorf("triage: on_timeout %q is not escalate, deny or allow", c.onTimeout)
	}
	for _, cat := range cfg.AlwaysProbe {
		c.always[strings.ToLower(strings.TrimSpace(cat))] = true
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c, nil
}

// FromConfig builds a client from the triage section of toolgate.yaml,
// reading the API key from the environment variable it names. A named
// variable that is unset or empty is an error.
func FromConfig(t *config.Triage) (*Client, error) {
	if t == nil {
		return nil, errors.New("triage: no triage section in the configuration")
	}
	key := config.Secret(t.APIKeyEnv)
	if t.APIKeyEnv != "" && key == "" {
		return nil, fmt.Errorf("triage.api_key_env: environment variable %s is unset or empty", t.APIKeyEnv)
	}
	return New(Config{
		BaseURL:             t.BaseURL,
		Model:               t.Model,
		APIKey:              key,
		ConfidenceThreshold: t.ConfidenceThreshold,
		MaxProbesPerTurn:    t.MaxProbesPerTurn,
		ProbeTimeout:        time.Duration(t.ProbeTimeoutMS) * time.Millisecond,
		OnTimeout:           schema.Outcome(t.OnTimeout),
		AlwaysProbe:         t.AlwaysProbe,
	})
}

// AlwaysProbe reports whether calls of this tool category are probed even
// when Tier 1 allowed them (triage.always_probe). Case-insensitive.
func (c *Client) AlwaysProbe(category string) bool {
	return c.always[strings.ToLower(strings.TrimSpace(category))]
}

// Model is the configured model name.
func (c *Client) Model() string { return c.llm.Model() }

// Triage probes the model about req, which Tier 1 decided as d. The error is
// only for programming errors; every model failure is an Outcome whose Next
// is not allow (save a probe timeout under on_timeout: allow).
func (c *Client) Triage(ctx context.Context, req schema.Request, d schema.Decision) (Outcome, error) {
	start := time.Now()
	out := Outcome{Model: c.llm.Model()}
	finish := func() (Outcome, error) {
		out.Latency = time.Since(start)
		c.log.Debug("triage", "conversation", req.Context.ConversationID, "step", req.Context.StepNumber,
			"result", out.Result, "next", out.Next, "code", out.Code, "attempts", out.Attempts,
			"tokens_in", out.TokensIn, "tokens_out", out.TokensOut, "latency", out.Latency)
		return out, nil
	}
	if err := ctx.Err(); err != nil {
		c.fail(&out, ctx, err)
		return finish()
	}
	if !c.turns.take(req.Context.ConversationID, req.Context.StepNumber) {
		out.Result, out.Next, out.Code = ResultOverLimit, schema.Escalate, CodeOverLimit
		out.Reason = fmt.Sprintf("probe limit of %d per turn reached; not asking the model", c.turns.limit)
		return finish()
	}

	pctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	msgs := prompt(req, d)
	res, err := c.llm.Complete(pctx, msgs, &llm.Format{Name: "triage", Schema: answerSchema})
	out.account(res)
	if err != nil {
		c.fail(&out, ctx, err)
		return finish()
	}
	if a, ok := parseAnswer(res.Content); ok {
		c.judge(&out, a.Suspicious, a.Confidence, a.Reason)
		return finish()
	}

	// One retry with the simplest question the model can answer. An empty
	// first answer is shown as such: go-openai omits empty content, and some
	// servers refuse an assistant message without it.
	first := res.Content
	if strings.TrimSpace(first) == "" {
		first = "(empty answer)"
	}
	retry := append(msgs[:len(msgs):len(msgs)],
		llm.Message{Role: llm.Assistant, Content: first},
		llm.Message{Role: llm.User, Content: yesNoQuestion})
	res2, err := c.llm.Complete(pctx, retry, nil)
	out.account(res2)
	if err != nil {
		c.fail(&out, ctx, err)
		return finish()
	}
	switch yesNo(res2.Content) {
	case "YES":
		c.judge(&out, true, 1, "answered YES after a retry: the call appears influenced by untrusted content")
	case "NO":
		c.judge(&out, false, 1, "answered NO after a retry")
	default:
		out.Result, out.Next, out.Code = ResultUnclear, schema.Escalate, CodeUnclear
		out.Reason = "no readable answer after the YES/NO retry: " + llm.Quote(res2.Content)
	}
	return finish()
}

func (o *Outcome) account(r llm.Result) {
	o.TokensIn += r.TokensIn
	o.TokensOut += r.TokensOut
	o.Attempts += r.Attempts
	if r.Model != "" {
		o.Model = r.Model
	}
}

// judge turns a readable answer into the outcome.
func (c *Client) judge(out *Outcome, suspicious bool, confidence float64, reason string) {
	out.Suspicious, out.Confidence, out.Reason = suspicious, confidence, reason
	switch {
	case suspicious:
		out.Result, out.Next, out.Code = ResultSuspicious, schema.Escalate, CodeSuspicious
	case confidence >= c.threshold:
		out.Result, out.Next, out.Code = ResultClear, schema.Allow, ""
	default:
		out.Result, out.Next, out.Code = ResultUnclear, schema.Escalate, CodeLowConfidence
		out.Reason = fmt.Sprintf("confidence %.2f below the threshold %.2f: %s", confidence, c.threshold, reason)
	}
}

// fail turns an error from the endpoint into the outcome. The caller's own
// cancellation or deadline is an error (escalate), never on_timeout.
func (c *Client) fail(out *Outcome, parent context.Context, err error) {
	switch {
	case parent.Err() != nil:
		out.Result, out.Next, out.Code = ResultError, schema.Escalate, CodeEndpointError
		out.Reason = "the caller gave up: " + parent.Err().Error()
	case isTimeout(err):
		out.Result, out.Next, out.Code = ResultTimeout, c.onTimeout, CodeTimeout
		out.Reason = fmt.Sprintf("no answer within %v; on_timeout: %s", c.timeout, c.onTimeout)
		if c.onTimeout == schema.Allow {
			c.log.Warn("triage timed out and on_timeout is allow: proceeding without a judgement", "model", out.Model)
		}
	default:
		out.Result, out.Next, out.Code = ResultError, schema.Escalate, CodeEndpointError
		out.Reason = "endpoint error: " + err.Error()
		c.log.Warn("triage endpoint error", "model", out.Model, "err", err)
	}
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// turnCounter counts probes per turn (conversation and step), remembering at
// most max turns.
type turnCounter struct {
	mu    sync.Mutex
	limit int
	max   int
	n     map[turnKey]int
	order []turnKey // insertion order, for eviction
}

type turnKey struct {
	conv string
	step int
}

func newTurnCounter(limit, max int) *turnCounter {
	return &turnCounter{limit: limit, max: max, n: make(map[turnKey]int)}
}

// take counts one probe and reports whether it is within the limit.
func (t *turnCounter) take(conv string, step int) bool {
	k := turnKey{conv, step}
	t.mu.Lock()
	defer t.mu.Unlock()
	n, seen := t.n[k]
	if !seen {
		if len(t.order) >= t.max {
			delete(t.n, t.order[0])
			t.order = t.order[1:]
		}
		t.order = append(t.order, k)
	}
	if n >= t.limit {
		return false
	}
	t.n[k] = n + 1
	return true
}
