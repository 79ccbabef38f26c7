package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/schema"
)

// Dialect is an agent CLI's hook protocol.
type Dialect string

// The agent CLIs whose hooks toolgate answers.
const (
	ClaudeCode Dialect = "claude-code"
	Gemini     Dialect = "gemini"
	Cursor     Dialect = "cursor"
	Codex      Dialect = "codex"
)

// Dialects lists the supported dialects, for usage messages.
var Dialects = []Dialect{ClaudeCode, Gemini, Cursor, Codex}

// ParseDialect accepts a dialect's name.
func ParseDialect(s string) (Dialect, error) {
	for _, d := range Dialects {
		if string(d) == s {
			return d, nil
		}
	}
	return "", fmt.Errorf("unknown agent %q (want claude-code, gemini, cursor or codex)", s)
}

// MaxHookInputBytes bounds one hook payload.
const MaxHookInputBytes = schema.MaxRequestBytes

// ExitBlock is the exit code every supported CLI reads as "block this
// call, stderr says why". The hooks use it whenever they cannot decide.
const ExitBlock = 2

// Hook answers an agent CLI's pre-tool hook (decide) and post-tool hook
// (record the result as untrusted context for the session's later calls).
type Hook struct {
	Verifier *toolgate.Verifier
	Sessions *Sessions
	Dialect  Dialect
	// AgentID names the agent in requests; TrustLevel and Token are
	// passed on as given (nil trust: the registered agent's level, else
	// untrusted).
	AgentID    string
	TrustLevel *schema.TrustLevel
	Token      string
	Logger     *slog.Logger
}

// Answer is what the hook prints and how it exits.
type Answer struct {
	Stdout []byte
	Stderr string
	Exit   int
	// Verdict is the decision, when one was made.
	Verdict *toolgate.Verdict
}

// hookInput is the union of the fields the CLIs send that toolgate reads.
// Unknown fields are ignored: the CLIs add fields over time.
type hookInput struct {
	SessionID      string          `json:"session_id"`
	ConversationID string          `json:"conversation_id"` // Cursor
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolResponse   json.RawMessage `json:"tool_response"`
	// Cursor's events.
	Command    string          `json:"command"`
	FilePath   string          `json:"file_path"`
	Output     string          `json:"output"`
	ResultJSON json.RawMessage `json:"result_json"`
	// Gemini CLI's MCP calls.
	MCPContext *struct {
		ServerName string `json:"server_name"`
		ToolName   string `json:"tool_name"`
	} `json:"mcp_context"`
}

// event is a hook payload mapped to what toolgate does with it.
type event struct {
	pre        bool // decide; else record a result
	name       string
	session    string
	tool       string // action type
	args       map[string]any
	transcript string
	result     string
	noAsk      bool // the CLI has no "ask" for this event
}

// Handle reads one hook payload and answers it. It never returns an allow
// it did not get from the verifier: a payload it cannot parse, a state
// failure or a verifier error is a block (exit ExitBlock) with the reason
// on stderr.
func (h *Hook) Handle(ctx context.Context, r io.Reader) Answer {
	data, err := io.ReadAll(io.LimitReader(r, MaxHookInputBytes+1))
	if err != nil {
		return h.Fail(fmt.Errorf("read hook input: %w", err))
	}
	if len(data) > MaxHookInputBytes {
		return h.Fail(fmt.Errorf("hook input larger than %d bytes", MaxHookInputBytes))
	}
	ev, err := h.parse(data)
	if err != nil {
		return h.Fail(err)
	}
	if !ev.pre {
		if err := h.Sessions.Record(ctx, h.AgentID, ev.session, "tool:"+ev.tool, ev.result); err != nil {
			// The tool already ran: nothing to block. Later calls miss
			// this context, so say so loudly.
			return Answer{Stdout: []byte("{}\n"), Stderr: "toolgate: " + err.Error() + "\n", Exit: 1}
		}
		return Answer{Stdout: []byte("{}\n")}
	}
	v, err := h.decide(ctx, ev)
	if err != nil {
		return h.Fail(err)
	}
	a := h.render(ev, v)
	a.Verdict = &v
	return a
}

func (h *Hook) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

func (h *Hook) parse(data []byte) (event, error) {
	var in hookInput
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		return event{}, fmt.Errorf("hook input is not a JSON object: %w", err)
	}
	ev := event{name: in.HookEventName, session: in.SessionID, tool: in.ToolName, transcript: in.TranscriptPath}
	if ev.session == "" {
		ev.session = in.ConversationID
	}
	if ev.session == "" {
		return ev, errors.New("hook input: no session_id (or conversation_id)")
	}
	switch h.Dialect {
	case ClaudeCode, Codex:
		switch in.HookEventName {
		case "PreToolUse":
			ev.pre = true
		case "PostToolUse":
			ev.result = flattenRaw(in.ToolResponse, MaxResultBytes)
		default:
			return ev, fmt.Errorf("unsupported hook event %q (want PreToolUse or PostToolUse)", in.HookEventName)
		}
	case Gemini:
		ev.transcript = "" // Gemini CLI's transcript format is not read
		if in.MCPContext != nil && in.MCPContext.ServerName != "" && !strings.HasPrefix(ev.tool, "mcp__") {
			ev.tool = mcpName(in.MCPContext.ServerName, firstNonEmpty(in.MCPContext.ToolName, ev.tool))
		}
		switch in.HookEventName {
		case "BeforeTool":
			ev.pre = true
		case "AfterTool":
			ev.result = flattenRaw(in.ToolResponse, MaxResultBytes)
		default:
			return ev, fmt.Errorf("unsupported hook event %q (want BeforeTool or AfterTool)", in.HookEventName)
		}
	case Cursor:
		ev.transcript = ""
		switch in.HookEventName {
		case "beforeShellExecution":
			ev.pre, ev.tool = true, "run_terminal_cmd"
			ev.args = map[string]any{"command": in.Command, "cwd": in.Cwd}
		case "beforeMCPExecution":
			ev.pre, ev.tool = true, mcpName("cursor", in.ToolName)
			ev.args = cursorArgs(in.ToolInput)
		case "beforeReadFile":
			ev.pre, ev.tool, ev.noAsk = true, "read_file", true
			ev.args = map[string]any{"file_path": in.FilePath}
		case "afterShellExecution":
			ev.tool, ev.result = "run_terminal_cmd", truncate(in.Output, MaxResultBytes)
		case "afterMCPExecution":
			ev.tool, ev.result = mcpName("cursor", in.ToolName), cursorResult(in.ResultJSON)
		default:
			return ev, fmt.Errorf("unsupported hook event %q", in.HookEventName)
		}
	default:
		return ev, fmt.Errorf("unknown dialect %q", h.Dialect)
	}
	if ev.tool == "" || ev.tool == "mcp__cursor__" {
		return ev, errors.New("hook input: no tool_name")
	}
	if ev.pre && ev.args == nil {
		args, err := objectArgs(in.ToolInput)
		if err != nil {
			return ev, err
		}
		ev.args = args
	}
	return ev, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// objectArgs decodes tool_input: an object, or nothing.
func objectArgs(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil || args == nil {
		return nil, errors.New("hook input: tool_input must be a JSON object")
	}
	return args, nil
}

// cursorArgs decodes Cursor's MCP tool_input, sent as an object or as a
// string holding one; anything else is kept as text.
func cursorArgs(raw json.RawMessage) map[string]any {
	if args, err := objectArgs(raw); err == nil {
		return args
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if args, err := objectArgs(json.RawMessage(s)); err == nil {
			return args
		}
		return map[string]any{"input": s}
	}
	return map[string]any{"input": string(raw)}
}

func cursorResult(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return flattenRaw([]byte(s), MaxResultBytes)
	}
	return flattenRaw(raw, MaxResultBytes)
}

// mcpName is the action type of an MCP tool: mcp__<server>__<tool>.
func mcpName(server, tool string) string {
	if strings.HasPrefix(tool, "mcp__") {
		return tool
	}
	return "mcp__" + sanitizeServer(server) + "__" + tool
}

// sanitizeServer keeps letters, digits, '-' and '_' (no "__", which would
// split the action type differently).
func sanitizeServer(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "server"
	}
	return b.String()
}

func (h *Hook) decide(ctx context.Context, ev event) (toolgate.Verdict, error) {
	step, err := h.Sessions.NextStep(ctx, h.AgentID, ev.session)
	if err != nil {
		return toolgate.Verdict{}, err
	}
	recorded, err := h.Sessions.Recent(ctx, h.AgentID, ev.session)
	if err != nil {
		return toolgate.Verdict{}, err
	}
	var transcript []schema.Block
	var intent string
	if ev.transcript != "" {
		transcript, intent = readTranscript(ev.transcript)
	}
	req := schema.Request{
		Agent:  schema.Agent{ID: h.AgentID, TrustLevel: h.TrustLevel, Token: h.Token},
		Action: schema.Action{Type: ev.tool, Arguments: ev.args},
		Context: schema.Context{
			ConversationID: ev.session,
			StepNumber:     step,
			UserIntent:     intent,
			// The transcript lags; recorded results are the newest.
			Blocks: assemble(transcript, recorded),
		},
	}
	v, err := h.Verifier.Verify(ctx, req)
	if err != nil {
		return v, fmt.Errorf("verify: %w", err)
	}
	h.logger().Debug("hook decided", "agent", h.AgentID, "session", ev.session, "step", step, "tool", ev.tool, "decision", v.Outcome, "codes", v.Codes())
	return v, nil
}

// Explain is a one-line reason for a verdict, for the agent and the user:
// the reasons that asked for the final outcome, the supervisor's guidance
// and the approval id.
func Explain(v toolgate.Verdict) string {
	var parts []string
	for _, r := range v.Reasons {
		if r.Outcome == v.Outcome {
			parts = append(parts, r.Code+": "+r.Message)
		}
	}
	if len(parts) == 0 {
		for _, r := range v.Reasons {
			parts = append(parts, r.Code+": "+r.Message)
		}
	}
	if len(parts) > 6 {
		parts = append(parts[:6], fmt.Sprintf("and %d more", len(parts)-6))
	}
	s := "toolgate: " + string(v.Outcome)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, "; ") + ")"
	}
	if v.Guidance != "" {
		s += "; guidance: " + v.Guidance
	}
	if v.ApprovalID != "" {
		s += "; approval " + v.ApprovalID + " is waiting for a person (toolgate approvals)"
	}
	return s
}

func (h *Hook) render(ev event, v toolgate.Verdict) Answer {
	reason := Explain(v)
	out := v.Outcome
	switch h.Dialect {
	case ClaudeCode:
		return Answer{Stdout: claudeOutput(claudeDecision(out), reason)}
	case Codex:
		// Codex honours only allow and deny: what needs a person is denied.
		if out == schema.Allow {
			return Answer{Stdout: claudeOutput("allow", reason)}
		}
		return Answer{Stdout: claudeOutput("deny", reason), Stderr: reason + "\n", Exit: ExitBlock}
	case Gemini:
		// The "ask" of Gemini CLI's hooks is not confirmed: deny.
		if out == schema.Allow {
			return Answer{Stdout: mustJSON(map[string]any{"decision": "allow", "reason": reason})}
		}
		return Answer{Stdout: mustJSON(map[string]any{"decision": "deny", "reason": reason})}
	case Cursor:
		d := claudeDecision(out)
		if d == "ask" && ev.noAsk {
			d = "deny"
		}
		return Answer{Stdout: mustJSON(map[string]any{"permission": d, "user_message": reason, "agent_message": reason})}
	}
	return h.Fail(fmt.Errorf("unknown dialect %q", h.Dialect))
}

// claudeDecision maps an outcome to allow, deny or ask (a person decides).
func claudeDecision(o schema.Outcome) string {
	switch o {
	case schema.Allow:
		return "allow"
	case schema.Escalate, schema.Pending:
		return "ask"
	}
	return "deny"
}

func claudeOutput(decision, reason string) []byte {
	return mustJSON(map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName":            "PreToolUse",
		"permissionDecision":       decision,
		"permissionDecisionReason": reason,
	}})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps of strings are marshalled here.
		return []byte(`{}`)
	}
	return append(b, '\n')
}

// Fail blocks: the dialect's deny on stdout (for CLIs that read it) and the
// reason on stderr with ExitBlock, which every supported CLI treats as a
// block whatever it makes of stdout.
func (h *Hook) Fail(err error) Answer {
	reason := "toolgate could not decide, denying: " + err.Error()
	h.logger().Debug("hook failed: denying", "err", err, "agent", h.AgentID)
	var out []byte
	switch h.Dialect {
	case Gemini:
		out = mustJSON(map[string]any{"decision": "deny", "reason": reason})
	case Cursor:
		out = mustJSON(map[string]any{"permission": "deny", "user_message": reason, "agent_message": reason})
	default:
		out = claudeOutput("deny", reason)
	}
	return Answer{Stdout: out, Stderr: reason + "\n", Exit: ExitBlock}
}
