package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/supervisor"
)

// Reason codes that change the HTTP status of a deny.
const (
	codeRevoked      = "AGENT-001"
	codeUnregistered = "AGENT-002"
	codeBadToken     = "AGENT-003"
	codeHourlyBudget = "BUDGET-002"
)

// Bounds of an answer to an approval.
const (
	maxAnswerBytes = 16 << 10
	maxByLen       = 200
	maxReasonLen   = 4096
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, methods map[string]http.HandlerFunc) {
		allow := make([]string, 0, len(methods))
		for m := range methods {
			allow = append(allow, m)
		}
		if _, ok := methods[http.MethodGet]; ok {
			allow = append(allow, http.MethodHead)
		}
		mux.Handle(pattern, s.observe(pattern, func(w http.ResponseWriter, r *http.Request) {
			m := r.Method
			if m == http.MethodHead {
				m = http.MethodGet
			}
			h, ok := methods[m]
			if !ok {
				w.Header().Set("Allow", strings.Join(allow, ", "))
				writeError(w, http.StatusMethodNotAllowed, ErrCodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path, "")
				return
			}
			h(w, r)
		}))
	}
	get := func(h http.HandlerFunc) map[string]http.HandlerFunc {
		return map[string]http.HandlerFunc{http.MethodGet: h}
	}
	handle("/v1/verify", map[string]http.HandlerFunc{http.MethodPost: s.serveVerify})
	handle("/v1/approvals", get(s.serveApprovals))
	handle("/v1/approvals/{id}", map[string]http.HandlerFunc{http.MethodGet: s.serveApproval, http.MethodPost: s.serveAnswer})
	handle("/v1/events", get(s.serveEvents))
	handle("/v1/agents/{id}/budget", get(s.serveBudget))
	handle("/healthz", get(s.serveHealth))
	handle("/readyz", get(s.serveReady))
	handle("/metrics", get(s.serveMetrics))
	handle("/static/", get(s.serveStatic))
	handle("/{$}", get(s.servePage))
	mux.Handle("/", s.observe("other", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, ErrCodeNotFound, "no such endpoint: "+r.URL.Path, "")
	}))
	return mux
}

// statusWriter remembers the status for the metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and the deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) observe(route string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		sw.Header().Set("X-Content-Type-Options", "nosniff")
		h(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.metrics.request(route, sw.status)
	})
}

// bearer returns the token of an "Authorization: Bearer" header: "" and ok
// when there is no header, ok false when there is another kind.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", true
	}
	scheme, tok, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// jsonBody reports whether the request says its body is JSON. Browsers
// cannot send that type to another site without asking first (CORS
// preflight, which this server never grants).
func jsonBody(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// readBody reads at most limit bytes; over it, it answers 413 itself.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, ErrCodeTooLarge, fmt.Sprintf("the body is larger than %d bytes", limit), "")
			return nil, false
		}
		writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest, "reading the body: "+err.Error(), "")
		return nil, false
	}
	return body, true
}

func (s *Server) serveVerify(w http.ResponseWriter, r *http.Request) {
	token, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
		writeError(w, http.StatusUnauthorized, ErrCodeUnauthenticated, `the Authorization header must be "Bearer <agent token>"`, "")
		return
	}
	// The body is read as JSON whatever its Content-Type says (curl -d
	// sends a form type): the bearer token, not the type, keeps other
	// sites' pages out.
	wait := true
	switch v := r.URL.Query().Get("wait"); v {
	case "", "true", "1":
	case "false", "0":
		wait = false
	default:
		writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest, fmt.Sprintf("wait: %q is not true or false", v), "wait")
		return
	}
	body, ok := readBody(w, r, s.opts.MaxBodyBytes)
	if !ok {
		return
	}
	req, err := schema.ParseRequest(body)
	if err != nil {
		requestError(w, err)
		return
	}
	if req.Agent.Token != "" {
		writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest, "send the agent's token in the Authorization header, not in the body", "agent.token")
		return
	}
	req.Agent.Token = token

	v := s.verifier
	if !wait {
		v = s.noWait
	}
	start := time.Now()
	s.metrics.inFlight.Add(1)
	// Verify runs on a context the client cannot cancel: it records the
	// verdict and commits or releases the step with that same context, and
	// a request cut short there would lose its audit entry and keep its step
	// reserved. Only the wait for a person ends with the request (see
	// queueRef.Wait).
	vctx := context.WithValue(context.WithoutCancel(r.Context()), waitCtxKey{}, r.Context())
	verdict, err := v.Verify(vctx, req)
	s.metrics.inFlight.Add(-1)
	elapsed := time.Since(start)
	if err != nil {
		var re *schema.RequestError
		if errors.As(err, &re) {
			requestError(w, err)
			return
		}
		if verdict.Outcome == "" {
			// Not decided at all: only an ended context does this.
			writeError(w, http.StatusServiceUnavailable, ErrCodeUnavailable, "no decision: "+err.Error(), "")
			return
		}
	}
	s.recordDecision(req, verdict, elapsed)
	b, merr := json.Marshal(verdict)
	if merr != nil {
		writeError(w, http.StatusInternalServerError, ErrCodeInternal, "verdict not encodable", "")
		return
	}
	status, apiErr := verdictStatus(verdict)
	if r.Context().Err() != nil && verdict.ApprovalID != "" {
		// The grace period after SIGTERM ended while this request waited
		// for a person (or the client left). The approval stays pending;
		// asking again for the same step finds its answer.
		status = http.StatusServiceUnavailable
		apiErr = &APIError{Code: ErrCodeUnavailable, Message: "the server stopped before a person answered; ask again for the same step later"}
		w.Header().Set("Retry-After", "5")
	}
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
	case http.StatusTooManyRequests:
		// The hourly window slides: a minute frees at least the oldest
		// request's share more often than not; clients back off further.
		w.Header().Set("Retry-After", "60")
	}
	if apiErr != nil {
		b = withError(b, *apiErr)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func requestError(w http.ResponseWriter, err error) {
	var re *schema.RequestError
	field := ""
	if errors.As(err, &re) {
		field = re.Field
	}
	writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest, err.Error(), field)
}

// verdictStatus maps the denies that are about the caller rather than the
// call to their HTTP status; every other verdict is 200.
func verdictStatus(v toolgate.Verdict) (int, *APIError) {
	if v.Outcome != schema.Deny {
		return http.StatusOK, nil
	}
	msg := func(code string) string {
		for _, r := range v.Reasons {
			if r.Code == code {
				return r.Message
			}
		}
		return code
	}
	switch {
	case v.HasCode(codeBadToken):
		return http.StatusUnauthorized, &APIError{Code: ErrCodeUnauthenticated, Message: msg(codeBadToken), Field: "agent.token"}
	case v.HasCode(codeUnregistered):
		return http.StatusUnauthorized, &APIError{Code: ErrCodeUnauthenticated, Message: msg(codeUnregistered), Field: "agent.id"}
	case v.HasCode(codeRevoked):
		return http.StatusForbidden, &APIError{Code: ErrCodeForbidden, Message: msg(codeRevoked), Field: "agent.id"}
	case v.HasCode(codeHourlyBudget):
		return http.StatusTooManyRequests, &APIError{Code: ErrCodeRateLimited, Message: msg(codeHourlyBudget)}
	}
	return http.StatusOK, nil
}

// primaryCode is the first reason that asked for the final decision.
func primaryCode(v toolgate.Verdict) string {
	for _, r := range v.Reasons {
		if r.Outcome == v.Outcome && r.Code != "" {
			return r.Code
		}
	}
	if len(v.Reasons) > 0 && v.Reasons[0].Code != "" {
		return v.Reasons[0].Code
	}
	return "none"
}

func (s *Server) recordDecision(req toolgate.Request, v toolgate.Verdict, d time.Duration) {
	s.metrics.decision(string(v.Outcome), v.Tier, primaryCode(v), d)
	if !s.events.active() {
		return
	}
	s.events.publish(EventDecision, DecisionEvent{
		Time: time.Now().UTC(), AgentID: req.Agent.ID, ConversationID: req.Context.ConversationID,
		Step: req.Context.StepNumber, ActionType: req.Action.Type, Decision: string(v.Outcome),
		Tier: v.Tier, Codes: v.Codes(), ApprovalID: v.ApprovalID, AuditID: v.AuditID,
		LatencyMS: float64(d.Microseconds()) / 1000,
	})
}

// approvalsList is the body of GET /v1/approvals.
type approvalsList struct {
	Approvals []supervisor.Approval `json:"approvals"`
}

func (s *Server) serveApprovals(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	if status == "" {
		status = supervisor.StatusPending
	}
	switch status {
	case "all", supervisor.StatusPending, supervisor.StatusApproved, supervisor.StatusDenied, supervisor.StatusExpired:
	default:
		writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest,
			fmt.Sprintf("status: %q is not pending, approved, denied, expired or all", status), "status")
		return
	}
	list, err := s.queue.List(r.Context(), status)
	if err != nil {
		s.unavailable(w, err)
		return
	}
	if list == nil {
		list = []supervisor.Approval{}
	}
	writeJSON(w, http.StatusOK, approvalsList{Approvals: list})
}

func (s *Server) serveApproval(w http.ResponseWriter, r *http.Request) {
	a, err := s.queue.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.approvalError(w, err, a)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// answer is the body of POST /v1/approvals/{id}.
type answer struct {
	Approve *bool  `json:"approve"`
	By      string `json:"by"`
	Reason  string `json:"reason"`
}

// answerResult is the body of a refused answer (409): who answered first.
type answerResult struct {
	Error    *APIError           `json:"error,omitempty"`
	Approval supervisor.Approval `json:"approval"`
}

func (s *Server) serveAnswer(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, ErrCodeForbidden, "cross-origin answers are refused", "")
		return
	}
	if !jsonBody(r) {
		writeError(w, http.StatusUnsupportedMediaType, ErrCodeUnsupportedMedia, "the body must be JSON (Content-Type: application/json)", "")
		return
	}
	body, ok := readBody(w, r, maxAnswerBytes)
	if !ok {
		return
	}
	var a answer
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest, "the answer must be {\"approve\": bool, \"by\": string, \"reason\": string}: "+err.Error(), "")
		return
	}
	switch by := strings.TrimSpace(a.By); {
	case a.Approve == nil:
		writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest, "approve: required (true or false)", "approve")
		return
	case by == "":
		writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest, "by: required: who is answering", "by")
		return
	case len(by) > maxByLen:
		writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest, fmt.Sprintf("by: longer than %d bytes", maxByLen), "by")
		return
	case len(a.Reason) > maxReasonLen:
		writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest, fmt.Sprintf("reason: longer than %d bytes", maxReasonLen), "reason")
		return
	}
	res, err := s.queue.Resolve(r.Context(), r.PathValue("id"), *a.Approve, a.By, a.Reason)
	if err != nil {
		s.approvalError(w, err, res)
		return
	}
	writeJSON(w, http.StatusOK, answerResult{Approval: res})
}

func (s *Server) approvalError(w http.ResponseWriter, err error, a supervisor.Approval) {
	switch {
	case errors.Is(err, supervisor.ErrInvalidID):
		writeError(w, http.StatusBadRequest, ErrCodeInvalidRequest, err.Error(), "id")
	case errors.Is(err, supervisor.ErrNotFound):
		writeError(w, http.StatusNotFound, ErrCodeNotFound, err.Error(), "id")
	case errors.Is(err, supervisor.ErrExpired):
		writeJSON(w, http.StatusConflict, answerResult{Error: &APIError{Code: ErrCodeExpired, Message: err.Error()}, Approval: a})
	case errors.Is(err, supervisor.ErrAlreadyResolved):
		writeJSON(w, http.StatusConflict, answerResult{Error: &APIError{Code: ErrCodeAlreadyResolved,
			Message: fmt.Sprintf("already %s by %s", a.Status, a.ResolvedBy)}, Approval: a})
	default:
		s.unavailable(w, err)
	}
}

func (s *Server) unavailable(w http.ResponseWriter, err error) {
	s.log.Error("request failed", "err", err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		writeError(w, http.StatusServiceUnavailable, ErrCodeUnavailable, err.Error(), "")
		return
	}
	writeError(w, http.StatusServiceUnavailable, ErrCodeUnavailable, "the database failed: "+err.Error(), "")
}

// sameOrigin refuses a browser's cross-site POST: when the browser says
// where the page came from, it must be this server.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true // not a browser, or one that does not say
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// budgetBody is the body of GET /v1/agents/{id}/budget.
type budgetBody struct {
	AgentID string `json:"agent_id"`
	schema.BudgetFacts
}

func (s *Server) serveBudget(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	store := s.verifier.Store()
	if _, err := store.Agent(r.Context(), id); err != nil {
		if errors.Is(err, state.ErrNotFound) {
			writeError(w, http.StatusNotFound, ErrCodeNotFound, fmt.Sprintf("agent %q is not registered", id), "id")
			return
		}
		s.unavailable(w, err)
		return
	}
	b, err := store.Budget(r.Context(), id, time.Now())
	if err != nil {
		s.unavailable(w, err)
		return
	}
	writeJSON(w, http.StatusOK, budgetBody{AgentID: id, BudgetFacts: b})
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.readiness(ctx); err != nil {
		writeError(w, http.StatusServiceUnavailable, ErrCodeUnavailable, "not ready: "+err.Error(), "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "policy": s.verifier.Engine().Policy()})
}
