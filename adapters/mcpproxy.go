package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/supervisor"
)

// CodeNoSchema is the MCP proxy's deny of a tool the server listed without
// an input schema, or never listed: toolgate cannot tell what it does.
const CodeNoSchema = "MCP-001"

// CodeNoServerName is the MCP proxy's deny of calls when the server's name
// is unknown: no --name, and no serverInfo seen (clients speaking the
// stateless protocol send server/discover, which carries none). Per-agent
// tool lists name tools mcp__<server>__<tool>, so guessing would fail open.
const CodeNoServerName = "MCP-002"

// On --on-escalate.
const (
	EscalateDeny = "deny"
	EscalateAsk  = "ask"
)

// Asker queues a call for a person and waits for the answer.
// supervisor.Queue implements it.
type Asker interface {
	Request(ctx context.Context, req schema.Request, reasons []schema.Reason) (supervisor.Approval, error)
	Wait(ctx context.Context, id string) (supervisor.Approval, error)
}

// Proxy is an MCP server that forwards every message between an MCP client
// and a real MCP server, and decides each tools/call before the server sees
// it. Denied calls are answered with a tool result marked isError whose text
// is the reason; results of allowed calls go back unchanged and are recorded
// as untrusted context for the session's later calls.
type Proxy struct {
	Verifier *toolgate.Verifier
	Sessions *Sessions
	// Server names the server in action types (mcp__<Server>__<tool>);
	// empty: the server's own serverInfo.name.
	Server string
	// AgentID, TrustLevel and Token identify the agent; Conversation is
	// the session's conversation id.
	AgentID      string
	TrustLevel   *schema.TrustLevel
	Token        string
	Conversation string
	// OnEscalate is EscalateDeny (default) or EscalateAsk: the Verifier
	// then waits for a person on pending (build it without NoWait), and
	// Asker is asked about what stays escalated.
	OnEscalate string
	Asker      Asker
	// HideUnknown hides from tools/list the tools the registry does not
	// know. Tools blocked for the agent are always hidden.
	HideUnknown bool
	Logger      *slog.Logger
}

type pendingKind int

const (
	pendingInit pendingKind = iota + 1
	pendingList
	pendingCall
)

type pendingReq struct {
	kind pendingKind
	tool string // action type, for calls
}

// session is one proxied connection.
type session struct {
	p      *Proxy
	client mcp.Connection
	server mcp.Connection
	log    *slog.Logger

	mu      sync.Mutex
	name    string
	pending map[string]pendingReq
	schemas map[string]bool // tool name → has an input schema
	calls   sync.WaitGroup
}

func idKey(id jsonrpc.ID) string { return fmt.Sprintf("%T:%v", id.Raw(), id.Raw()) }

// Run proxies between client (the agent's side) and server (the real MCP
// server) until either side closes or ctx ends.
func (p *Proxy) Run(ctx context.Context, client, server mcp.Transport) error {
	if p.Verifier == nil || p.Sessions == nil {
		return errors.New("mcp proxy: needs a verifier with state")
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	sc, err := server.Connect(ctx)
	if err != nil {
		return fmt.Errorf("mcp proxy: start server: %w", err)
	}
	cc, err := client.Connect(ctx)
	if err != nil {
		sc.Close()
		return fmt.Errorf("mcp proxy: client: %w", err)
	}
	s := &session{p: p, client: cc, server: sc, log: log, name: sanitizeServer(p.Server),
		pending: map[string]pendingReq{}, schemas: map[string]bool{}}
	if p.Server == "" {
		s.name = ""
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- s.fromClient(ctx) }()
	go func() { errc <- s.fromServer(ctx) }()
	err = <-errc
	cancel()
	cc.Close()
	sc.Close()
	<-errc
	s.calls.Wait()
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// serverName is the server's name in action types, "" while unknown.
func (s *session) serverName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.name
}

func (s *session) fromClient(ctx context.Context) error {
	for {
		msg, err := s.client.Read(ctx)
		if err != nil {
			return err
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
			s.log.Debug("mcp proxy: client request", "method", req.Method)
			switch req.Method {
			case "tools/call":
				s.calls.Add(1)
				go func() {
					defer s.calls.Done()
					s.call(ctx, req)
				}()
				continue
			case "initialize":
				s.expect(req.ID, pendingReq{kind: pendingInit})
			case "tools/list":
				s.expect(req.ID, pendingReq{kind: pendingList})
			}
		}
		if err := s.server.Write(ctx, msg); err != nil {
			return fmt.Errorf("write to server: %w", err)
		}
	}
}

func (s *session) expect(id jsonrpc.ID, p pendingReq) {
	s.mu.Lock()
	s.pending[idKey(id)] = p
	s.mu.Unlock()
}

func (s *session) fromServer(ctx context.Context) error {
	for {
		msg, err := s.server.Read(ctx)
		if err != nil {
			return err
		}
		if resp, ok := msg.(*jsonrpc.Response); ok {
			s.mu.Lock()
			p, found := s.pending[idKey(resp.ID)]
			delete(s.pending, idKey(resp.ID))
			s.mu.Unlock()
			if found && resp.Error == nil {
				switch p.kind {
				case pendingInit:
					s.initialized(resp.Result)
				case pendingList:
					resp.Result = s.filterList(ctx, resp.Result)
				case pendingCall:
					s.record(ctx, p.tool, resp.Result)
				}
			}
		}
		if err := s.client.Write(ctx, msg); err != nil {
			return fmt.Errorf("write to client: %w", err)
		}
	}
}

func (s *session) initialized(result json.RawMessage) {
	var r struct {
		ServerInfo struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
	}
	if json.Unmarshal(result, &r) != nil {
		return
	}
	s.mu.Lock()
	if s.name == "" && r.ServerInfo.Name != "" {
		s.name = sanitizeServer(r.ServerInfo.Name)
	}
	s.mu.Unlock()
}

// filterList notes which tools have an input schema and drops the tools the
// agent may never call. The result is forwarded unchanged when nothing is
// hidden.
func (s *session) filterList(ctx context.Context, result json.RawMessage) json.RawMessage {
	var r map[string]json.RawMessage
	if json.Unmarshal(result, &r) != nil {
		return result
	}
	var tools []json.RawMessage
	if json.Unmarshal(r["tools"], &tools) != nil {
		return result
	}
	kept := tools[:0:0]
	for _, raw := range tools {
		var t struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if json.Unmarshal(raw, &t) != nil {
			continue // not a tool: nobody can call it
		}
		sch := bytes.TrimSpace(t.InputSchema)
		s.mu.Lock()
		s.schemas[t.Name] = len(sch) > 0 && string(sch) != "null"
		s.mu.Unlock()
		if s.hidden(ctx, t.Name) {
			s.log.Info("mcp proxy: hiding tool", "tool", t.Name)
			continue
		}
		kept = append(kept, raw)
	}
	if len(kept) == len(tools) {
		return result
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return result
	}
	r["tools"] = b
	out, err := json.Marshal(r)
	if err != nil {
		return result
	}
	return out
}

// hidden asks the policy (without state) whether the agent may ever call
// the tool: blocked (TOOL-001), or unknown (ACTION-001) with HideUnknown.
func (s *session) hidden(ctx context.Context, tool string) bool {
	req := schema.Request{
		Agent:   schema.Agent{ID: s.p.AgentID, TrustLevel: s.p.TrustLevel},
		Action:  schema.Action{Type: mcpName(orDefault(s.serverName(), "unknown"), tool), Arguments: map[string]any{}},
		Context: schema.Context{ConversationID: "tools/list", StepNumber: 1},
	}
	d, err := s.p.Verifier.Engine().Evaluate(ctx, &req, nil)
	if err != nil {
		return false // the call itself will be decided (and denied)
	}
	return d.HasCode("TOOL-001") || (s.p.HideUnknown && d.HasCode("ACTION-001"))
}

func (s *session) record(ctx context.Context, tool string, result json.RawMessage) {
	var r struct {
		Content           json.RawMessage `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if json.Unmarshal(result, &r) != nil {
		return
	}
	text := flattenRaw(r.Content, MaxResultBytes)
	if len(r.Content) == 0 {
		text = flattenRaw(r.StructuredContent, MaxResultBytes)
	}
	if err := s.p.Sessions.Record(ctx, s.p.AgentID, s.p.Conversation, "tool:"+tool, text); err != nil {
		s.log.Error("mcp proxy: tool result not recorded: later calls miss it", "err", err, "tool", tool)
	}
}

// call decides a tools/call and forwards it or answers it with the reason.
func (s *session) call(ctx context.Context, req *jsonrpc.Request) {
	var params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(req.Params, &params); err != nil || params.Name == "" {
		s.deny(ctx, req.ID, "toolgate: deny (tools/call without a tool name)")
		return
	}
	server := s.serverName()
	if server == "" {
		s.deny(ctx, req.ID, fmt.Sprintf("toolgate: deny (%s: the MCP server's name is unknown: start the proxy with --name)", CodeNoServerName))
		return
	}
	tool := mcpName(server, params.Name)
	args, err := objectArgs(params.Arguments)
	if err != nil {
		s.deny(ctx, req.ID, "toolgate: deny (the arguments of "+params.Name+" are not a JSON object)")
		return
	}
	s.mu.Lock()
	hasSchema := s.schemas[params.Name]
	s.mu.Unlock()
	if !hasSchema {
		s.log.Warn("mcp proxy: tool without an input schema: denying", "tool", tool)
		s.deny(ctx, req.ID, fmt.Sprintf("toolgate: deny (%s: tool %q has no input schema in the server's tools/list: it is treated as unknown)", CodeNoSchema, params.Name))
		return
	}
	allowed, reason := s.decide(ctx, tool, args)
	if !allowed {
		s.deny(ctx, req.ID, reason)
		return
	}
	s.expect(req.ID, pendingReq{kind: pendingCall, tool: tool})
	if err := s.server.Write(ctx, req); err != nil {
		s.log.Error("mcp proxy: forward call", "err", err)
	}
}

func (s *session) decide(ctx context.Context, tool string, args map[string]any) (bool, string) {
	p := s.p
	step, err := p.Sessions.NextStep(ctx, p.AgentID, p.Conversation)
	if err != nil {
		return false, "toolgate could not decide, denying: " + err.Error()
	}
	blocks, err := p.Sessions.Recent(ctx, p.AgentID, p.Conversation)
	if err != nil {
		return false, "toolgate could not decide, denying: " + err.Error()
	}
	req := schema.Request{
		Agent:   schema.Agent{ID: p.AgentID, TrustLevel: p.TrustLevel, Token: p.Token},
		Action:  schema.Action{Type: tool, Arguments: args},
		Context: schema.Context{ConversationID: p.Conversation, StepNumber: step, Blocks: assemble(blocks)},
	}
	v, err := p.Verifier.Verify(ctx, req)
	if err != nil {
		return false, "toolgate could not decide, denying: " + err.Error()
	}
	s.log.Debug("mcp proxy decided", "tool", tool, "step", step, "decision", v.Outcome, "codes", v.Codes())
	switch {
	case v.Outcome == schema.Allow:
		return true, ""
	case v.Outcome == schema.Escalate && p.OnEscalate == EscalateAsk && p.Asker != nil:
		return s.ask(ctx, req, v)
	}
	return false, Explain(v)
}

// ask queues an escalated call for a person and waits for the answer.
func (s *session) ask(ctx context.Context, req schema.Request, v toolgate.Verdict) (bool, string) {
	a, err := s.p.Asker.Request(ctx, req, v.Reasons)
	if err != nil {
		return false, Explain(v) + "; approval request failed: " + err.Error()
	}
	s.log.Info("mcp proxy: waiting for a person", "approval", a.ID, "tool", req.Action.Type)
	a, err = s.p.Asker.Wait(ctx, a.ID)
	out, reason := a.Outcome()
	if err != nil || out != schema.Allow {
		return false, "toolgate: deny (" + reason.Code + ": " + reason.Message + ")"
	}
	return true, ""
}

func (s *session) deny(ctx context.Context, id jsonrpc.ID, reason string) {
	b, err := json.Marshal(map[string]any{
		"content": []any{map[string]any{"type": "text", "text": reason}},
		"isError": true,
	})
	if err != nil {
		return
	}
	if err := s.client.Write(ctx, &jsonrpc.Response{ID: id, Result: b}); err != nil {
		s.log.Error("mcp proxy: answer denied call", "err", err)
	}
}
