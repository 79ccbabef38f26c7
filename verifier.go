package toolgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/supervisor"
	"github.com/toolgate/toolgate/triage"
)

// Codes the pipeline itself emits.
const (
	CodeStateUnavailable = "STATE-001" // the state store failed: deny
	CodeAuditFailed      = audit.CodeNotRecorded
)

// Triager is Tier 2: asked whether an escalated call is influenced by the
// untrusted content. triage.Client implements it.
type Triager interface {
	Triage(ctx context.Context, req schema.Request, d schema.Decision) (triage.Outcome, error)
	AlwaysProbe(category string) bool
}

// Reviewer is the Tier 3 model. supervisor.Model implements it.
type Reviewer interface {
	Review(ctx context.Context, req schema.Request, trail supervisor.Trail) (supervisor.Review, error)
	Paranoid() bool
}

// Approver is Tier 3's person. supervisor.Queue implements it.
type Approver interface {
	Request(ctx context.Context, req schema.Request, reasons []schema.Reason) (supervisor.Approval, error)
	Wait(ctx context.Context, id string) (supervisor.Approval, error)
	FindForRequest(ctx context.Context, req schema.Request) (supervisor.Approval, bool, error)
	MaxPerHour() int
}

// Auditor records final verdicts. audit.Log implements it.
type Auditor interface {
	Append(ctx context.Context, r audit.Record) (audit.Entry, error)
}

// txAuditor is an Auditor that can also append inside a state transaction
// (audit.Log on the state's database): the verdict's entry and its step's
// commit or release are then written together.
type txAuditor interface {
	AppendIn(ctx context.Context, q audit.Querier, r audit.Record) (audit.Entry, error)
}

// Verdict is the final answer: the decision (where it was settled, with
// every tier's reasons) and the trail of each tier that ran.
type Verdict struct {
	schema.Decision
	// Tier1 is the deterministic tier's own decision, when a later tier ran
	// and the final decision may differ from it.
	Tier1 *schema.Decision `json:"tier1,omitempty"`
	// Triage, Supervisor and Approval are set when that tier ran.
	Triage     *TierOutcome     `json:"triage,omitempty"`
	Supervisor *TierOutcome     `json:"supervisor,omitempty"`
	Approval   *ApprovalOutcome `json:"approval,omitempty"`
	// ApprovalID is set while a person's answer is pending.
	ApprovalID string `json:"approval_id,omitempty"`
	// Guidance is the supervisor's advice to the agent on REORIENT.
	Guidance string `json:"guidance,omitempty"`
	// AuditID is the audit log's sequence number for this verdict.
	AuditID int64 `json:"audit_id,omitempty"`
}

// TierOutcome is what a model tier said, and what it cost.
type TierOutcome struct {
	Result     string         `json:"result"`
	Outcome    schema.Outcome `json:"decision"`
	Code       string         `json:"code,omitempty"`
	Model      string         `json:"model"`
	Confidence float64        `json:"confidence,omitempty"`
	Reasoning  string         `json:"reasoning,omitempty"`
	TokensIn   int            `json:"tokens_in"`
	TokensOut  int            `json:"tokens_out"`
	LatencyMS  int64          `json:"latency_ms"`
}

// ApprovalOutcome is what a person said.
type ApprovalOutcome struct {
	ID         string         `json:"id"`
	Status     string         `json:"status"`
	Outcome    schema.Outcome `json:"decision"`
	ResolvedBy string         `json:"resolved_by,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	LatencyMS  int64          `json:"latency_ms"`
}

// Verifier wires the tiers: Tier 1 on the engine with facts from state, then
// triage, supervisor and approvals for what Tier 1 escalates, then the audit
// log and the step's commit or release. Safe for concurrent use.
type Verifier struct {
	engine     *engine.Engine
	store      *state.Store
	triager    Triager
	reviewer   Reviewer
	approver   Approver
	auditor    Auditor
	requireReg bool
	noWait     bool
	ttl        time.Duration
	logger     *slog.Logger
	closers    []func() error
}

// Option configures New.
type Option func(*options)

type options struct {
	logger      *slog.Logger
	engine      *engine.Engine
	engineOpts  []engine.Option
	noState     bool
	dbPath      string
	auditSigner signature.Signer
	auditKey    string
	triager     Triager
	reviewer    Reviewer
	approver    Approver
	noWait      bool
	serve       bool
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithEngine shares an engine already prepared (for example one that
// reloads bundles); otherwise New prepares one from the config.
func WithEngine(e *engine.Engine) Option { return func(o *options) { o.engine = e } }

// WithEngineOptions adds options to the engine New prepares.
func WithEngineOptions(opts ...engine.Option) Option {
	return func(o *options) { o.engineOpts = append(o.engineOpts, opts...) }
}

// WithoutState decides without a database: no agents, conversation controls,
// budgets, approvals queue or audit log. Decisions list the controls in
// not_applied; pending stays pending.
func WithoutState() Option { return func(o *options) { o.noState = true } }

// WithDB chooses the SQLite file (default: the config's state.path, else
// $XDG_STATE_HOME/toolgate/toolgate.db).
func WithDB(path string) Option { return func(o *options) { o.dbPath = path } }

// WithAuditSigner turns the signed audit log on with this signer.
func WithAuditSigner(s signature.Signer) Option { return func(o *options) { o.auditSigner = s } }

// WithAuditKey turns the signed audit log on with the PEM key at path (its
// passphrase from the config's audit.passphrase_env).
func WithAuditKey(path string) Option { return func(o *options) { o.auditKey = path } }

// WithTriager, WithReviewer and WithApprover replace the tiers the config
// would build.
func WithTriager(t Triager) Option   { return func(o *options) { o.triager = t } }
func WithReviewer(r Reviewer) Option { return func(o *options) { o.reviewer = r } }
func WithApprover(a Approver) Option { return func(o *options) { o.approver = a } }

// NoWait makes Verify return pending with the approval id instead of
// waiting for a person; a later Verify of the same step sees the answer.
func NoWait() Option { return func(o *options) { o.noWait = true } }

// ServeMode applies the server's defaults (registration required unless the
// config says otherwise).
func ServeMode() Option { return func(o *options) { o.serve = true } }

// New builds a Verifier from the config (nil: every default).
func New(cfg *config.Config, opts ...Option) (*Verifier, error) {
	if cfg == nil {
		var err error
		if cfg, err = config.Load(""); err != nil {
			return nil, err
		}
	}
	o := options{logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	ctx := context.Background()
	v := &Verifier{
		logger:     o.logger,
		triager:    o.triager,
		reviewer:   o.reviewer,
		approver:   o.approver,
		noWait:     o.noWait,
		requireReg: cfg.RequireRegistration(o.serve),
		// A reservation must outlive the longest wait for a person.
		ttl: time.Duration(cfg.Approvals.TimeoutSeconds)*time.Second + time.Minute,
	}
	fail := func(err error) (*Verifier, error) {
		v.Close()
		return nil, err
	}
	v.engine = o.engine
	if v.engine == nil {
		eopts := append([]engine.Option{engine.WithLogger(o.logger), engine.WithData(ConfigData(cfg))}, o.engineOpts...)
		e, err := engine.New(ctx, eopts...)
		if err != nil {
			return fail(err)
		}
		v.engine = e
	}
	if v.triager == nil && cfg.Triage != nil {
		t, err := triage.FromConfig(cfg.Triage)
		if err != nil {
			return fail(fmt.Errorf("triage: %w", err))
		}
		v.triager = t
	}
	if v.reviewer == nil && cfg.Supervisor != nil {
		m, err := supervisor.ModelFromConfig(cfg.Supervisor)
		if err != nil {
			return fail(fmt.Errorf("supervisor: %w", err))
		}
		v.reviewer = m
	}
	if o.noState {
		if o.auditKey != "" || o.auditSigner != nil {
			return fail(errors.New("the audit log needs state: drop --no-state or the audit key"))
		}
		return v, nil
	}
	path := o.dbPath
	if path == "" {
		path = cfg.StatePath()
	}
	store, err := state.Open(ctx, path)
	if err != nil {
		return fail(err)
	}
	v.store = store
	v.closers = append(v.closers, store.Close)
	if v.approver == nil {
		qo, err := supervisor.OptionsFromConfig(cfg.Approvals)
		if err != nil {
			return fail(fmt.Errorf("approvals: %w", err))
		}
		qo.Logger = o.logger
		q, err := supervisor.OpenQueue(ctx, store.DB(), qo)
		if err != nil {
			return fail(fmt.Errorf("approvals: %w", err))
		}
		v.approver = q
		v.closers = append([]func() error{q.Close}, v.closers...)
	}
	signer := o.auditSigner
	keyPath := o.auditKey
	if keyPath == "" && signer == nil {
		keyPath = cfg.Resolve(cfg.Audit.SigningKey)
	}
	if keyPath != "" {
		s, err := audit.LoadSigner(keyPath, config.Secret(cfg.Audit.PassphraseEnv))
		if err != nil {
			return fail(fmt.Errorf("audit key: %w", err))
		}
		signer = s
	}
	if signer != nil {
		// The log writes through the store's writer: one queue, and
		// concurrent decisions' writes share transactions.
		write := func(ctx context.Context, fn func(context.Context, audit.Querier) error) error {
			return store.Write(ctx, "audit", func(ctx context.Context, tx *state.Tx, _ func(func())) error { return fn(ctx, tx) })
		}
		log, err := audit.Open(ctx, store.DB(), signer, audit.Options{CheckpointEvery: cfg.Audit.CheckpointEvery, Write: write})
		if err != nil {
			return fail(err)
		}
		v.auditor = log
		v.closers = append([]func() error{func() error { return log.Close(context.Background()) }}, v.closers...)
	}
	return v, nil
}

// Close writes the audit log's final checkpoint and closes the database.
func (v *Verifier) Close() error {
	var errs []error
	for _, c := range v.closers {
		errs = append(errs, c())
	}
	v.closers = nil
	return errors.Join(errs...)
}

// Engine is the Tier 1 engine in use (for reloads).
func (v *Verifier) Engine() *engine.Engine { return v.engine }

// Store is the state store, nil without state.
func (v *Verifier) Store() *state.Store { return v.store }

// Verify decides req through every configured tier. An invalid request is a
// *RequestError; any other failure is a deny verdict, never an allow, and
// err is nil unless ctx ended.
func (v *Verifier) Verify(ctx context.Context, req Request) (Verdict, error) {
	if err := req.Validate(); err != nil {
		return Verdict{}, err
	}
	var facts *schema.Facts
	var res *state.Reservation
	if v.store != nil {
		r, f, err := v.store.Reserve(ctx, req, state.ReserveOptions{RequireRegistration: v.requireReg, TTL: v.ttl})
		if err != nil {
			v.logger.Error("state store unavailable: denying", "err", err, "agent", req.Agent.ID)
			d := denial(CodeStateUnavailable, "state", "state store unavailable: "+err.Error(), v.engine.Policy())
			return v.finish(ctx, req, Verdict{Decision: d}, nil, nil)
		}
		res, facts = r, &f
	}
	d, err := v.engine.Evaluate(ctx, &req, facts)
	if err != nil {
		v.logger.Error("policy evaluation failed: denying", "err", err)
	}
	verdict, probes := v.escalate(ctx, req, d)
	return v.finish(ctx, req, verdict, res, probes)
}

// escalate runs the later tiers on what Tier 1 could not settle.
func (v *Verifier) escalate(ctx context.Context, req Request, d schema.Decision) (Verdict, []audit.Probe) {
	verdict := Verdict{Decision: d}
	verdict.Reasons = append([]schema.Reason(nil), d.Reasons...)
	var probes []audit.Probe
	out := d.Outcome
	probe := out == schema.Escalate ||
		(out == schema.Allow && v.triager != nil && v.triager.AlwaysProbe(d.Category))
	review := out == schema.Allow && v.reviewer != nil && v.reviewer.Paranoid()

	if probe && v.triager != nil {
		t, err := v.triager.Triage(ctx, req, d)
		if err != nil {
			t = triage.Outcome{Result: triage.ResultError, Next: schema.Escalate, Code: triage.CodeEndpointError, Reason: err.Error()}
		}
		verdict.Triage = &TierOutcome{Result: t.Result, Outcome: t.Next, Code: t.Code, Model: t.Model, Confidence: t.Confidence,
			Reasoning: t.Reason, TokensIn: t.TokensIn, TokensOut: t.TokensOut, LatencyMS: t.Latency.Milliseconds()}
		probes = append(probes, audit.Probe{Tier: 2, Provider: "openai-compatible", Model: t.Model, TokensIn: t.TokensIn, TokensOut: t.TokensOut,
			Confidence: t.Confidence, Reasoning: t.Reason, Result: t.Result, LatencyMS: t.Latency.Milliseconds(), ExecutionAllowed: t.Next == schema.Allow})
		if t.Code != "" {
			verdict.Reasons = append(verdict.Reasons, schema.Reason{Code: t.Code, Rule: "triage", Message: triageMessage(t), Outcome: t.Next})
		}
		switch t.Next {
		case schema.Allow:
			// Tier 1 escalated and nothing else objected: the call proceeds.
			out = schema.Allow
			verdict.Tier = 2
		case schema.Deny:
			out = schema.Deny
			verdict.Tier = 2
		default:
			out = schema.Escalate
			review = true
		}
	} else if out == schema.Escalate && v.reviewer != nil {
		// No triage configured: escalations stay escalate unless a
		// supervisor model is there to review them.
		review = true
	}

	if review && v.reviewer != nil {
		r, err := v.reviewer.Review(ctx, req, supervisor.Trail{Tier1: d, Triage: triageOf(verdict)})
		if err != nil {
			r = supervisor.Review{Verdict: supervisor.VerdictPause, Next: schema.Pending, Code: supervisor.CodeModelFailure, Reason: err.Error()}
		}
		verdict.Supervisor = &TierOutcome{Result: r.Verdict, Outcome: r.Next, Code: r.Code, Model: r.Model, Reasoning: r.Reason,
			TokensIn: r.TokensIn, TokensOut: r.TokensOut, LatencyMS: r.Latency.Milliseconds()}
		probes = append(probes, audit.Probe{Tier: 3, Provider: "openai-compatible", Model: r.Model, TokensIn: r.TokensIn, TokensOut: r.TokensOut,
			Reasoning: r.Reason, Result: r.Verdict, LatencyMS: r.Latency.Milliseconds(), ExecutionAllowed: r.Next == schema.Allow})
		if r.Code != "" {
			verdict.Reasons = append(verdict.Reasons, schema.Reason{Code: r.Code, Rule: "supervisor", Message: r.Reason, Outcome: r.Next})
		}
		verdict.Tier = 3
		verdict.Guidance = r.Guidance
		out = r.Next
	} else if review && out == schema.Escalate && v.approver != nil {
		// No supervisor model: what Tier 1 or triage escalated goes to a person.
		out = schema.Pending
	}

	if out == schema.Pending && v.approver != nil {
		out = v.approve(ctx, req, &verdict)
	}
	verdict.Outcome = out
	if verdict.Triage != nil || verdict.Supervisor != nil || verdict.Approval != nil {
		verdict.Tier1 = &d
	}
	return verdict, probes
}

func triageOf(v Verdict) *triage.Outcome {
	if v.Triage == nil {
		return nil
	}
	return &triage.Outcome{Result: v.Triage.Result, Next: v.Triage.Outcome, Confidence: v.Triage.Confidence, Reason: v.Triage.Reasoning, Model: v.Triage.Model, Code: v.Triage.Code}
}

func triageMessage(t triage.Outcome) string {
	if t.Reason != "" {
		return fmt.Sprintf("triage %s: %s", t.Result, t.Reason)
	}
	return "triage " + t.Result
}

// approve asks a person, or finds the answer already given for this step.
func (v *Verifier) approve(ctx context.Context, req Request, verdict *Verdict) schema.Outcome {
	start := time.Now()
	a, found, err := v.approver.FindForRequest(ctx, req)
	if err != nil {
		v.logger.Error("approvals unavailable: denying", "err", err)
		verdict.Reasons = append(verdict.Reasons, schema.Reason{Code: CodeStateUnavailable, Rule: "approvals", Message: "approvals unavailable: " + err.Error(), Outcome: schema.Deny})
		return schema.Deny
	}
	if !found || (!a.Pending() && a.Status == supervisor.StatusExpired) {
		a, err = v.approver.Request(ctx, req, verdict.Reasons)
		switch {
		case errors.Is(err, supervisor.ErrRateLimited):
			r := supervisor.RateLimitedReason(v.approver.MaxPerHour())
			verdict.Reasons = append(verdict.Reasons, r)
			verdict.Approval = &ApprovalOutcome{Status: "rate_limited", Outcome: schema.Deny}
			return schema.Deny
		case err != nil:
			v.logger.Error("approval request failed: denying", "err", err)
			verdict.Reasons = append(verdict.Reasons, schema.Reason{Code: CodeStateUnavailable, Rule: "approvals", Message: "approval request failed: " + err.Error(), Outcome: schema.Deny})
			return schema.Deny
		}
	}
	if a.Pending() && !v.noWait {
		a, err = v.approver.Wait(ctx, a.ID)
		if err != nil && a.Pending() {
			// The caller gave up: no answer is a deny, and the approval
			// stays open for a later Verify of this step.
			verdict.ApprovalID = a.ID
		}
	}
	out, reason := a.Outcome()
	verdict.Approval = &ApprovalOutcome{ID: a.ID, Status: a.Status, Outcome: out, ResolvedBy: a.ResolvedBy, Reason: a.Reason, LatencyMS: time.Since(start).Milliseconds()}
	if out == schema.Pending {
		verdict.ApprovalID = a.ID
		if !v.noWait {
			out = schema.Deny // waited and got no answer: never a silent allow
		}
		return out
	}
	verdict.Tier = 3
	if reason.Code != "" {
		verdict.Reasons = append(verdict.Reasons, reason)
	}
	return out
}

// finish records the verdict and commits or releases the step. An allow
// that cannot be recorded or committed becomes a deny.
func (v *Verifier) finish(reqCtx context.Context, req Request, verdict Verdict, res *state.Reservation, probes []audit.Probe) (Verdict, error) {
	// Recording and releasing must happen even when the caller has gone:
	// a lost audit entry or a step left reserved would be worse than the
	// few milliseconds they take.
	ctx := context.WithoutCancel(reqCtx)
	if verdict.Tier == 0 {
		verdict.Tier = 1
	}
	if ta, ok := v.auditor.(txAuditor); ok && v.store != nil {
		return v.settle(ctx, req, verdict, res, probes, ta), reqCtx.Err()
	}
	return v.finishApart(ctx, req, verdict, res, probes), reqCtx.Err()
}

// Errors of settle's transaction, by the write that failed.
type (
	commitError  struct{ error }
	releaseError struct{ error }
)

// settle writes the verdict's audit entry and commits (allow) or releases
// the step in one transaction: both are durable, or neither is. A step that
// is no longer held turns an allow into a deny, recorded as such.
func (v *Verifier) settle(ctx context.Context, req Request, verdict Verdict, res *state.Reservation, probes []audit.Probe, ta txAuditor) Verdict {
	cost := 0.0
	if req.Action.CostUSD != nil {
		cost = *req.Action.CostUSD
	}
	var final Verdict
	err := v.store.Write(ctx, "settle", func(ctx context.Context, tx *state.Tx, onCommit func(func())) error {
		vd := verdict
		vd.Reasons = append([]schema.Reason(nil), verdict.Reasons...)
		if vd.Outcome == schema.Allow {
			if err := res.CommitIn(ctx, tx, onCommit, cost); err != nil {
				if !errors.Is(err, state.ErrReservationLost) {
					return commitError{err}
				}
				v.logger.Error("state commit failed: denying", "err", err)
				vd.Outcome = schema.Deny
				vd.Reasons = append(vd.Reasons, schema.Reason{Code: CodeStateUnavailable, Rule: "state", Message: "step not committed: " + err.Error(), Outcome: schema.Deny})
			}
		} else if err := res.ReleaseIn(ctx, tx, onCommit); err != nil {
			return releaseError{err}
		}
		e, err := ta.AppendIn(ctx, tx, audit.Record{Request: req, Decision: vd.Decision, Probes: probes, ApprovalID: vd.ApprovalID})
		if err != nil {
			return err
		}
		vd.AuditID = e.Seq
		final = vd
		return nil
	})
	if err == nil {
		return final
	}
	// Nothing of the transaction was written.
	var ce commitError
	var re releaseError
	switch {
	case errors.As(err, &ce):
		v.logger.Error("state commit failed: denying", "err", ce.error)
		verdict.Outcome = schema.Deny
		verdict.Reasons = append(verdict.Reasons, schema.Reason{Code: CodeStateUnavailable, Rule: "state", Message: "step not committed: " + ce.Error(), Outcome: schema.Deny})
		return v.finishApart(ctx, req, verdict, res, probes)
	case errors.As(err, &re):
		// Record the verdict anyway; the release is retried and logged.
		return v.finishApart(ctx, req, verdict, res, probes)
	}
	v.logger.Error("audit entry not recorded", "err", err, "decision", verdict.Outcome)
	if verdict.Outcome == schema.Allow {
		verdict.Decision = audit.DenyUnrecorded(verdict.Decision, err)
	}
	if err := res.Release(ctx); err != nil {
		v.logger.Error("state release failed", "err", err)
	}
	return verdict
}

// finishApart records the verdict, then commits or releases the step, each
// in its own transaction.
func (v *Verifier) finishApart(ctx context.Context, req Request, verdict Verdict, res *state.Reservation, probes []audit.Probe) Verdict {
	if v.auditor != nil {
		e, err := v.auditor.Append(ctx, audit.Record{Request: req, Decision: verdict.Decision, Probes: probes, ApprovalID: verdict.ApprovalID})
		if err != nil {
			v.logger.Error("audit entry not recorded", "err", err, "decision", verdict.Outcome)
			if verdict.Outcome == schema.Allow {
				verdict.Decision = audit.DenyUnrecorded(verdict.Decision, err)
			}
		} else {
			verdict.AuditID = e.Seq
		}
	}
	if verdict.Outcome == schema.Allow {
		cost := 0.0
		if req.Action.CostUSD != nil {
			cost = *req.Action.CostUSD
		}
		if err := res.Commit(ctx, cost); err != nil {
			v.logger.Error("state commit failed: denying", "err", err)
			verdict.Outcome = schema.Deny
			verdict.Reasons = append(verdict.Reasons, schema.Reason{Code: CodeStateUnavailable, Rule: "state", Message: "step not committed: " + err.Error(), Outcome: schema.Deny})
		}
	} else if err := res.Release(ctx); err != nil {
		v.logger.Error("state release failed", "err", err)
	}
	return verdict
}

func denial(code, rule, msg string, p schema.Policy) schema.Decision {
	return schema.Decision{Outcome: schema.Deny, Risk: "critical", Tier: 1, Policy: p,
		Reasons: []schema.Reason{{Code: code, Rule: rule, Message: msg, Outcome: schema.Deny}}}
}

// ConfigData turns the config's policy keys into data.toolgate.config, to
// merge over the bundle's data.
func ConfigData(cfg *config.Config) map[string]any {
	c := map[string]any{"max_steps": cfg.Conversation.MaxSteps}
	if len(cfg.Policy.AdditionalPatterns) > 0 {
		c["additional_patterns"] = toAny(cfg.Policy.AdditionalPatterns)
	}
	if len(cfg.Policy.AdditionalHighRiskTools) > 0 {
		c["additional_high_risk_tools"] = toAny(cfg.Policy.AdditionalHighRiskTools)
	}
	if len(cfg.Policy.AgentTools) > 0 {
		at := map[string]any{}
		for id, t := range cfg.Policy.AgentTools {
			at[id] = map[string]any{"allowed": toAny(t.Allowed), "blocked": toAny(t.Blocked)}
		}
		c["agent_tools"] = at
	}
	return map[string]any{"toolgate": map[string]any{"config": c}}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
