package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/schema"
)

// MaxHTTPBodyBytes bounds the body of an interceptor or AuthZEN request.
const MaxHTTPBodyBytes = schema.MaxRequestBytes

// Defaults of the interceptor's query parameters.
const (
	DefaultInterceptorAgent        = "docker-mcp-gateway"
	DefaultInterceptorServer       = "docker"
	DefaultInterceptorConversation = "docker-mcp-gateway"
)

// decider is what the HTTP adapters share: a verifier and, when it has
// state, the sessions that number steps and keep tool results.
type decider struct {
	v        *toolgate.Verifier
	sessions lazySessions
}

// step hands out the conversation's next step, or 1 without state.
func (d *decider) step(ctx context.Context, agentID, convo string) (int, error) {
	s, err := d.sessions.get(ctx, d.v.Store())
	if errors.Is(err, errNoState) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	return s.NextStep(ctx, agentID, convo)
}

func (d *decider) recent(ctx context.Context, agentID, convo string) ([]schema.Block, error) {
	s, err := d.sessions.get(ctx, d.v.Store())
	if errors.Is(err, errNoState) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s.Recent(ctx, agentID, convo)
}

func (d *decider) record(ctx context.Context, agentID, convo, source, text string) error {
	s, err := d.sessions.get(ctx, d.v.Store())
	if errors.Is(err, errNoState) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.Record(ctx, agentID, convo, source, text)
}

// NewInterceptorHandler answers Docker's MCP gateway HTTP interceptor
// (docker mcp gateway run --interceptor before:http:URL, and optionally
// after:http:URL with the same URL). The gateway POSTs
// {"method": "tools/call", "params": {"name", "arguments"}} before a call:
// an empty answer lets the call through, a CallToolResult replaces it. So
// an allow is an empty 200 and anything else (deny, escalate, pending, a
// body that cannot be parsed, a failure) is a CallToolResult with isError
// and the reason. After a call the gateway POSTs the CallToolResult: it is
// recorded as untrusted context for the conversation's later calls and the
// answer is empty (the result goes on unchanged).
//
// Query parameters: agent (default docker-mcp-gateway), trust, server
// (default docker; action types are mcp__<server>__<tool>) and
// conversation (default docker-mcp-gateway). A registered agent's token
// goes in the X-Toolgate-Token header.
func NewInterceptorHandler(v *toolgate.Verifier) http.Handler {
	d := &decider{v: v}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		agent := orDefault(q.Get("agent"), DefaultInterceptorAgent)
		server := sanitizeServer(orDefault(q.Get("server"), DefaultInterceptorServer))
		convo := orDefault(q.Get("conversation"), DefaultInterceptorConversation)
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxHTTPBodyBytes+1))
		if err != nil || len(body) > MaxHTTPBodyBytes {
			writeToolError(w, "toolgate: deny (interceptor body unreadable or too large)")
			return
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
			Content           json.RawMessage `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		}
		if err := json.Unmarshal(body, &msg); err != nil {
			writeToolError(w, "toolgate: deny (interceptor body is not JSON: "+err.Error()+")")
			return
		}
		if msg.Method == "" && (msg.Content != nil || msg.StructuredContent != nil) {
			// after:http: a tool result to keep as untrusted context.
			text := flattenRaw(msg.Content, MaxResultBytes)
			if msg.Content == nil {
				text = flattenRaw(msg.StructuredContent, MaxResultBytes)
			}
			if err := d.record(ctx, agent, convo, "tool:mcp__"+server, text); err != nil {
				slog.Error("interceptor: tool result not recorded: later calls miss it", "err", err)
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		if msg.Method != "tools/call" || msg.Params.Name == "" {
			writeToolError(w, "toolgate: deny (not a tools/call with a tool name)")
			return
		}
		args, err := objectArgs(msg.Params.Arguments)
		if err != nil {
			writeToolError(w, "toolgate: deny (the arguments are not a JSON object)")
			return
		}
		var trust *schema.TrustLevel
		if t := q.Get("trust"); t != "" {
			lvl, err := schema.ParseTrustLevel(t)
			if err != nil {
				writeToolError(w, "toolgate: deny (trust: "+err.Error()+")")
				return
			}
			trust = &lvl
		}
		step, err := d.step(ctx, agent, convo)
		if err != nil {
			writeToolError(w, "toolgate could not decide, denying: "+err.Error())
			return
		}
		blocks, err := d.recent(ctx, agent, convo)
		if err != nil {
			writeToolError(w, "toolgate could not decide, denying: "+err.Error())
			return
		}
		req := schema.Request{
			Agent:   schema.Agent{ID: agent, TrustLevel: trust, Token: r.Header.Get("X-Toolgate-Token")},
			Action:  schema.Action{Type: mcpName(server, msg.Params.Name), Arguments: args},
			Context: schema.Context{ConversationID: convo, StepNumber: step, Blocks: assemble(blocks)},
		}
		verdict, err := v.Verify(ctx, req)
		if err != nil {
			writeToolError(w, "toolgate could not decide, denying: "+err.Error())
			return
		}
		if verdict.Outcome == schema.Allow {
			w.WriteHeader(http.StatusOK) // empty: the gateway runs the call
			return
		}
		writeToolError(w, Explain(verdict))
	})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// writeToolError answers with an MCP CallToolResult that replaces the call.
func writeToolError(w http.ResponseWriter, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(mustJSON(map[string]any{
		"content": []any{map[string]any{"type": "text", "text": reason}},
		"isError": true,
	}))
}

// authzenRequest is an OpenID AuthZEN access evaluation request.
type authzenRequest struct {
	Subject struct {
		Type       string `json:"type"`
		ID         string `json:"id"`
		Properties struct {
			TrustLevel *schema.TrustLevel `json:"trust_level"`
			Token      string             `json:"token"`
		} `json:"properties"`
	} `json:"subject"`
	Action struct {
		Name       string `json:"name"`
		Properties struct {
			Arguments json.RawMessage `json:"arguments"`
			CostUSD   *float64        `json:"cost_usd"`
		} `json:"properties"`
	} `json:"action"`
	Resource struct {
		Type       string `json:"type"`
		ID         string `json:"id"`
		Properties struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"properties"`
	} `json:"resource"`
	Context *schema.Context `json:"context"`
}

// AuthZENResponse is the evaluation's answer: decision is true only for
// allow; context carries toolgate's outcome and reasons.
type AuthZENResponse struct {
	Decision bool           `json:"decision"`
	Context  map[string]any `json:"context,omitempty"`
}

// NewAuthZENHandler answers OpenID AuthZEN access evaluations (mount it at
// POST /access/v1/evaluation). The subject is the agent (id, properties
// trust_level and token); the tool is resource.id when resource.type is
// "tool", else action.name; the arguments are action.properties.arguments
// (else resource.properties.arguments); context is toolgate's request
// context (conversation_id, step_number, blocks, user_intent...). Without
// step_number the conversation's next step is used (1 without state).
// decision is true only for allow; an invalid request is a 400 naming the
// field; a failure is decision false.
func NewAuthZENHandler(v *toolgate.Verifier) http.Handler {
	d := &decider{v: v}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if id := r.Header.Get("X-Request-ID"); id != "" {
			w.Header().Set("X-Request-ID", id)
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxHTTPBodyBytes+1))
		if err != nil || len(body) > MaxHTTPBodyBytes {
			writeAuthZENError(w, &schema.RequestError{Problem: "body unreadable or too large"})
			return
		}
		var in authzenRequest
		if err := json.Unmarshal(body, &in); err != nil {
			writeAuthZENError(w, &schema.RequestError{Problem: "not a JSON evaluation request: " + err.Error()})
			return
		}
		tool := in.Action.Name
		if in.Resource.Type == "tool" && in.Resource.ID != "" {
			tool = in.Resource.ID
		}
		rawArgs := in.Action.Properties.Arguments
		if len(rawArgs) == 0 {
			rawArgs = in.Resource.Properties.Arguments
		}
		args, err := objectArgs(rawArgs)
		if err != nil {
			writeAuthZENError(w, &schema.RequestError{Field: "action.properties.arguments", Problem: "must be a JSON object"})
			return
		}
		var c schema.Context
		if in.Context != nil {
			c = *in.Context
		}
		if c.ConversationID == "" {
			writeAuthZENError(w, &schema.RequestError{Field: "context.conversation_id", Problem: "required"})
			return
		}
		if c.StepNumber == 0 {
			if c.StepNumber, err = d.step(ctx, in.Subject.ID, c.ConversationID); err != nil {
				writeAuthZEN(w, AuthZENResponse{Decision: false, Context: map[string]any{"outcome": "deny",
					"reason_admin": map[string]string{"en": "toolgate could not decide, denying: " + err.Error()}}})
				return
			}
		}
		req := schema.Request{
			Agent:   schema.Agent{ID: in.Subject.ID, TrustLevel: in.Subject.Properties.TrustLevel, Token: in.Subject.Properties.Token},
			Action:  schema.Action{Type: tool, Arguments: args, CostUSD: in.Action.Properties.CostUSD},
			Context: c,
		}
		verdict, err := v.Verify(ctx, req)
		var re *schema.RequestError
		if errors.As(err, &re) {
			writeAuthZENError(w, re)
			return
		}
		if err != nil {
			writeAuthZEN(w, AuthZENResponse{Decision: false, Context: map[string]any{"outcome": "deny",
				"reason_admin": map[string]string{"en": "toolgate could not decide, denying: " + err.Error()}}})
			return
		}
		ctxOut := map[string]any{
			"outcome":      verdict.Outcome,
			"tier":         verdict.Tier,
			"risk":         verdict.Risk,
			"reasons":      verdict.Reasons,
			"reason_admin": map[string]string{"en": Explain(verdict)},
		}
		if verdict.ApprovalID != "" {
			ctxOut["approval_id"] = verdict.ApprovalID
		}
		if verdict.AuditID != 0 {
			ctxOut["audit_id"] = verdict.AuditID
		}
		writeAuthZEN(w, AuthZENResponse{Decision: verdict.Outcome == schema.Allow, Context: ctxOut})
	})
}

func writeAuthZEN(w http.ResponseWriter, resp AuthZENResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(mustJSON(resp))
}

func writeAuthZENError(w http.ResponseWriter, re *schema.RequestError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(mustJSON(map[string]any{"error": re.Error(), "field": re.Field}))
}
