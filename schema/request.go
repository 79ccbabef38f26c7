package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// MaxRequestBytes bounds one encoded request. Larger requests are refused.
const MaxRequestBytes = 8 << 20

// Request is one tool call an agent wants to make, with the context it saw.
type Request struct {
	Agent   Agent   `json:"agent"`
	Action  Action  `json:"action"`
	Context Context `json:"context"`
}

// Agent identifies the caller. TrustLevel may be omitted for a registered
// agent (the registry's level applies); an unregistered agent without one is
// treated as untrusted.
type Agent struct {
	ID         string      `json:"id"`
	TrustLevel *TrustLevel `json:"trust_level,omitempty"`
	// Token authenticates a registered agent when registration is required.
	Token string `json:"token,omitempty"`
}

// Action is the tool call: the tool or action name and its JSON arguments.
type Action struct {
	Type      string         `json:"type"`
	Arguments map[string]any `json:"arguments"`
	// CostUSD is what the call will cost, if the agent knows; it counts
	// against the agent's daily budget.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// Context is what the agent saw before it made the call.
type Context struct {
	ConversationID     string  `json:"conversation_id"`
	StepNumber         int     `json:"step_number"`
	UserIntent         string  `json:"user_intent,omitempty"`
	Blocks             []Block `json:"blocks,omitempty"`
	PreActionStateHash string  `json:"pre_action_state_hash,omitempty"`
	StateSource        string  `json:"state_source,omitempty"`
}

// Block is one piece of recent context, newest last.
type Block struct {
	Trust   Trust  `json:"trust"`
	Source  string `json:"source,omitempty"`
	Content string `json:"content"`
}

// Trust says whether a block of context came from a trusted party (the user,
// the system prompt) or from somewhere an attacker could write (tool output,
// web pages, files, e-mail).
type Trust string

// The two trust values of a context block.
const (
	Trusted   Trust = "trusted"
	Untrusted Trust = "untrusted"
)

// TrustLevel is an agent's autonomy: untrusted (0) .. trusted (3).
type TrustLevel int

// The four trust levels, in increasing autonomy.
const (
	LevelUntrusted TrustLevel = iota
	LevelSupervised
	LevelAutonomous
	LevelTrusted
)

var trustNames = [...]string{"untrusted", "supervised", "autonomous", "trusted"}

// String returns the level's name.
func (t TrustLevel) String() string {
	if t < 0 || int(t) >= len(trustNames) {
		return "invalid"
	}
	return trustNames[t]
}

// ParseTrustLevel accepts a level's name or its number 0..3.
func ParseTrustLevel(s string) (TrustLevel, error) {
	for i, n := range trustNames {
		if strings.EqualFold(s, n) {
			return TrustLevel(i), nil
		}
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < len(trustNames) {
		return TrustLevel(n), nil
	}
	return 0, fmt.Errorf("unknown trust level %q (want untrusted, supervised, autonomous, trusted or 0..3)", s)
}

// MarshalJSON writes the level's name.
func (t TrustLevel) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON accepts a name or a number.
func (t *TrustLevel) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	} else {
		s = string(b)
	}
	v, err := ParseTrustLevel(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// RequestError says which field of a request is invalid and why. The CLI maps
// it to exit code 2 and the server to HTTP 400.
type RequestError struct {
	Field   string // JSON path of the field, e.g. "context.step_number"
	Problem string
}

func (e *RequestError) Error() string {
	if e.Field == "" {
		return "invalid request: " + e.Problem
	}
	return "invalid request: " + e.Field + ": " + e.Problem
}

// DecodeRequest reads one JSON request, rejects unknown fields and trailing
// data, and validates it. Every failure is a *RequestError naming the field.
func DecodeRequest(r io.Reader) (Request, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxRequestBytes+1))
	if err != nil {
		return Request{}, fmt.Errorf("read request: %w", err)
	}
	return ParseRequest(data)
}

// ParseRequest is DecodeRequest over bytes.
func ParseRequest(data []byte) (Request, error) {
	if len(data) > MaxRequestBytes {
		return Request{}, &RequestError{Problem: fmt.Sprintf("request larger than %d bytes", MaxRequestBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var req Request
	if err := dec.Decode(&req); err != nil {
		err = jsonError(err)
		var re *RequestError
		if errors.As(err, &re) && re.Problem == "unknown field" {
			re.Field = unknownFieldPath(data, re.Field)
		}
		return Request{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Request{}, &RequestError{Problem: "unexpected data after the request object"}
	}
	if err := req.Validate(); err != nil {
		return Request{}, err
	}
	return req, nil
}

// jsonError turns encoding/json's errors into RequestErrors naming the field.
func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "action.arguments" || strings.HasSuffix(field, ".arguments") {
			return &RequestError{Field: field, Problem: "must be a JSON object"}
		}
		return &RequestError{Field: field, Problem: fmt.Sprintf("must be %s, not %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)}
	case errors.As(err, &syntaxErr):
		return &RequestError{Problem: fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err)}
	case errors.Is(err, io.EOF):
		return &RequestError{Problem: "empty input: want a JSON request object"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &RequestError{Problem: "truncated JSON"}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &RequestError{Field: strings.Trim(f, `"`), Problem: "unknown field"}
	}
	if strings.Contains(msg, "trust level") {
		field := "agent.trust_level"
		return &RequestError{Field: field, Problem: strings.TrimPrefix(msg, "json: ")}
	}
	return &RequestError{Problem: msg}
}

// knownFields are the request's fields per object, for naming where an
// unknown one sits.
var knownFields = map[string][]string{
	"":        {"agent", "action", "context"},
	"agent":   {"id", "trust_level", "token"},
	"action":  {"type", "arguments", "cost_usd"},
	"context": {"conversation_id", "step_number", "user_intent", "blocks", "pre_action_state_hash", "state_source"},
	"block":   {"trust", "source", "content"},
}

// unknownFieldPath finds the unknown field name in the request and returns
// its path (context.blocks[1].sorce); name alone when it cannot.
func unknownFieldPath(data []byte, name string) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return name
	}
	unknown := func(obj map[string]json.RawMessage, kind string) bool {
		_, present := obj[name]
		return present && !slices.Contains(knownFields[kind], name)
	}
	if unknown(top, "") {
		return name
	}
	for _, sec := range []string{"agent", "action", "context"} {
		var obj map[string]json.RawMessage
		if json.Unmarshal(top[sec], &obj) != nil {
			continue
		}
		if unknown(obj, sec) {
			return sec + "." + name
		}
		if sec == "context" {
			var blocks []map[string]json.RawMessage
			if json.Unmarshal(obj["blocks"], &blocks) == nil {
				for i, b := range blocks {
					if unknown(b, "block") {
						return fmt.Sprintf("context.blocks[%d].%s", i, name)
					}
				}
			}
		}
	}
	return name
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "int", "int64", "float64":
		return "a number"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	case "bool":
		return "a boolean"
	}
	return k
}

// Validate checks the request's fields; the error names the first bad one.
func (r *Request) Validate() error {
	bad := func(field, problem string) error { return &RequestError{Field: field, Problem: problem} }
	if strings.TrimSpace(r.Agent.ID) == "" {
		return bad("agent.id", "required")
	}
	if r.Agent.TrustLevel != nil && (*r.Agent.TrustLevel < LevelUntrusted || *r.Agent.TrustLevel > LevelTrusted) {
		return bad("agent.trust_level", "must be untrusted, supervised, autonomous, trusted or 0..3")
	}
	if strings.TrimSpace(r.Action.Type) == "" {
		return bad("action.type", "required")
	}
	if r.Action.CostUSD != nil && *r.Action.CostUSD < 0 {
		return bad("action.cost_usd", "must not be negative")
	}
	c := &r.Context
	if strings.TrimSpace(c.ConversationID) == "" {
		return bad("context.conversation_id", "required")
	}
	if c.StepNumber < 1 {
		return bad("context.step_number", "must be at least 1")
	}
	if (c.PreActionStateHash == "") != (c.StateSource == "") {
		if c.PreActionStateHash == "" {
			return bad("context.pre_action_state_hash", "required when context.state_source is given")
		}
		return bad("context.state_source", "required when context.pre_action_state_hash is given")
	}
	if h := c.PreActionStateHash; h != "" && !isLowerHex64(h) {
		return bad("context.pre_action_state_hash", "must be 64 lowercase hex characters")
	}
	for i, b := range c.Blocks {
		if b.Trust != Trusted && b.Trust != Untrusted {
			return bad(fmt.Sprintf("context.blocks[%d].trust", i), fmt.Sprintf("must be %q or %q, not %q", Trusted, Untrusted, b.Trust))
		}
	}
	return nil
}

func isLowerHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// HasUntrusted reports whether any context block is untrusted.
func (r *Request) HasUntrusted() bool {
	for _, b := range r.Context.Blocks {
		if b.Trust == Untrusted {
			return true
		}
	}
	return false
}
