package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/schema"
)

// Query is the entry point every bundle must define.
const Query = "data.toolgate.tier1.decision"

// DefaultBundleName names the embedded bundle in decisions.
const DefaultBundleName = "default"

// Codes the engine itself emits when the policy cannot decide.
const (
	CodeNoDecision  = "ENGINE-001" // the policy produced no decision: deny
	CodeBadDecision = "ENGINE-002" // the policy's decision is malformed: deny
)

// Engine evaluates Tier 1. It is safe for concurrent use: Evaluate reads the
// current prepared query through an atomic pointer, and Reload swaps it, so
// decisions in flight finish on the bundle they started with.
type Engine struct {
	cur     atomic.Pointer[prepared]
	overlay []map[string]any
	logger  *slog.Logger
}

type prepared struct {
	query  rego.PreparedEvalQuery
	policy schema.Policy
}

// Option configures New.
type Option func(*options)

type options struct {
	bundle  *bundle.Bundle
	name    string
	overlay []map[string]any
	logger  *slog.Logger
}

// WithBundle evaluates b instead of the embedded default bundle.
func WithBundle(b *bundle.Bundle, name string) Option {
	return func(o *options) { o.bundle, o.name = b, name }
}

// WithData deep-merges d over the bundle's data: objects merge key by key,
// any other value replaces. Several calls apply in order. Reloads keep it.
func WithData(d map[string]any) Option {
	return func(o *options) { o.overlay = append(o.overlay, d) }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// New prepares the query once. It fails when the bundle does not compile or
// lacks the entry point.
func New(ctx context.Context, opts ...Option) (*Engine, error) {
	o := options{name: DefaultBundleName, logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	e := &Engine{overlay: o.overlay, logger: o.logger}
	b := o.bundle
	if b == nil {
		var err error
		if b, err = DefaultBundle(); err != nil {
			return nil, err
		}
	}
	if err := e.Reload(ctx, b, o.name); err != nil {
		return nil, err
	}
	return e, nil
}

// DefaultBundle reads the embedded default policy, without its tests.
func DefaultBundle() (*bundle.Bundle, error) {
	return ReadBundleFS(policies.FS, false)
}

// ReadBundleFS reads a bundle from a file system (a directory of .rego and
// data.json files). Test files (_test.rego) are kept only when withTests.
func ReadBundleFS(fsys fs.FS, withTests bool) (*bundle.Bundle, error) {
	loader, err := bundle.NewFSLoader(fsys)
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	if !withTests {
		loader = loader.WithFilter(func(abspath string, info fs.FileInfo, _ int) bool {
			return !info.IsDir() && strings.HasSuffix(abspath, "_test.rego")
		})
	}
	b, err := bundle.NewCustomReader(loader).WithRegoVersion(ast.RegoV1).WithProcessAnnotations(true).Read()
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	return &b, nil
}

// Reload prepares b and swaps it in atomically. On error the current bundle
// stays in place.
func (e *Engine) Reload(ctx context.Context, b *bundle.Bundle, name string) error {
	p, err := prepare(ctx, b, name, e.overlay, Query)
	if err != nil {
		return err
	}
	old := e.cur.Swap(p)
	if old != nil {
		e.logger.Info("policy reloaded", "bundle", name, "revision", p.policy.Revision, "previous", old.policy.Revision)
	}
	return nil
}

// Policy names the bundle decisions are currently made with.
func (e *Engine) Policy() schema.Policy { return e.cur.Load().policy }

// prepare compiles b with overlay merged over its data, for query.
func prepare(ctx context.Context, b *bundle.Bundle, name string, overlay []map[string]any, query string) (*prepared, error) {
	data := map[string]any{}
	if b.Data != nil {
		data = deepCopy(b.Data).(map[string]any)
	}
	for _, o := range overlay {
		mergeData(data, o)
	}
	opts := []func(*rego.Rego){
		rego.Query(query),
		rego.Store(inmem.NewFromObjectWithOpts(data, inmem.OptRoundTripOnWrite(true), inmem.OptReturnASTValuesOnRead(true))),
		rego.StrictBuiltinErrors(true),
		rego.Capabilities(Capabilities()),
		rego.SetRegoVersion(ast.RegoV1),
	}
	for _, m := range b.Modules {
		if m.Parsed == nil {
			return nil, fmt.Errorf("bundle %s: module %s was not parsed", name, m.Path)
		}
		opts = append(opts, rego.ParsedModule(m.Parsed))
	}
	q, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare bundle %s: %w", name, err)
	}
	return &prepared{query: q, policy: schema.Policy{Bundle: name, Revision: b.Manifest.Revision}}, nil
}

// forbiddenBuiltins may not be used by policies: rules must stay pure and
// never reach the network or the host.
var forbiddenBuiltins = []string{"http.send", "net.lookup_ip_addr", "opa.runtime", "time.now_ns", "rand.intn", "uuid.rfc4122", "trace"}

// Capabilities are OPA's for this version, without the forbidden builtins, and
// with toolgate's own. A policy that calls a forbidden builtin does not
// compile.
func Capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		return slices.Contains(forbiddenBuiltins, b.Name)
	})
	return caps
}

// Evaluate decides req. facts may be nil (no state): the policy then lists
// the controls it could not apply. An empty or malformed result is a deny,
// never an allow; err is non-nil only when evaluation itself failed (and the
// returned decision is then a deny too).
func (e *Engine) Evaluate(ctx context.Context, req *schema.Request, facts *schema.Facts) (schema.Decision, error) {
	return e.evaluate(ctx, req, facts, nil)
}

// Explain decides like Evaluate and writes a readable account of the rules
// that fired. Tracing is expensive: use it on request only.
func (e *Engine) Explain(ctx context.Context, req *schema.Request, facts *schema.Facts, w io.Writer) (schema.Decision, error) {
	buf := topdown.NewBufferTracer()
	d, err := e.evaluate(ctx, req, facts, buf)
	topdown.PrettyTraceWithOpts(w, *buf, topdown.PrettyTraceOptions{Locations: true, ExprVariables: false})
	return d, err
}

func (e *Engine) evaluate(ctx context.Context, req *schema.Request, facts *schema.Facts, tracer topdown.QueryTracer) (schema.Decision, error) {
	p := e.cur.Load()
	input, err := InputValue(req, facts)
	if err != nil {
		return failClosed(p.policy, CodeBadDecision, err.Error()), err
	}
	rs, err := p.eval(ctx, input, tracer)
	if err != nil {
		err = fmt.Errorf("evaluate policy: %w", err)
		return failClosed(p.policy, CodeNoDecision, err.Error()), err
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return failClosed(p.policy, CodeNoDecision, "the policy produced no decision"), nil
	}
	t, ok := rs[0].Expressions[0].Value.(*ast.Term)
	if !ok {
		return failClosed(p.policy, CodeBadDecision, "the policy's result is not a term"), nil
	}
	d, err := decodeDecision(t.Value)
	if err != nil {
		return failClosed(p.policy, CodeBadDecision, err.Error()), nil
	}
	d.Policy = p.policy
	if facts == nil {
		d.NotApplied = NoStateControls
	}
	return d, nil
}

// eval runs the prepared query on input, results kept as AST terms; tracer
// may be nil.
//
// Cancellation: OPA, left to itself, starts a goroutine per evaluation that
// waits for ctx to end (a goroutine started, scheduled and woken on every
// decision, several percent of one). The engine hands it a cancel of its
// own instead, tripped by context.AfterFunc when ctx ends: the same
// cancellation, with no goroutine unless it happens, and none at all for a
// context that cannot end.
func (p *prepared) eval(ctx context.Context, input ast.Value, tracer topdown.QueryTracer) (rego.ResultSet, error) {
	cancel := topdown.NewCancel()
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, cancel.Cancel)
		defer stop()
		if ctx.Err() != nil { // ended already: trip it now, not on another goroutine's time
			cancel.Cancel()
		}
	}
	opts := []rego.EvalOption{rego.EvalParsedInput(input), rego.EvalMetrics(metrics.NoOp()), rego.EvalGenerateJSON(keepAST), rego.EvalExternalCancel(cancel)}
	if tracer != nil {
		opts = append(opts, rego.EvalQueryTracer(tracer))
	}
	return p.query.Eval(ctx, opts...)
}

// NoStateControls are the controls that need state.
var NoStateControls = []string{"agent", "conversation", "budget"}

func failClosed(p schema.Policy, code, msg string) schema.Decision {
	return schema.Decision{
		Outcome: schema.Deny,
		Risk:    "critical",
		Tier:    1,
		Reasons: []schema.Reason{{Code: code, Rule: "engine", Message: msg, Outcome: schema.Deny}},
		Policy:  p,
	}
}

// keepAST hands the query's result over as OPA computed it: the decision is
// read from the AST directly, without a conversion to Go maps first.
func keepAST(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }

var errMalformed = errors.New("malformed decision")

// The decision's keys.
var (
	keyDecision   = ast.StringTerm("decision")
	keyRisk       = ast.StringTerm("risk")
	keyCategory   = ast.StringTerm("category")
	keyReasons    = ast.StringTerm("reasons")
	keyPrecedence = ast.StringTerm("precedence")
	keyNotApplied = ast.StringTerm("not_applied")
	keyCode       = ast.StringTerm("code")
	keyRule       = ast.StringTerm("rule")
	keyMessage    = ast.StringTerm("message")
	keyWhere      = ast.StringTerm("where")
)

// astString is obj[key] when it is a string, else "".
func astString(obj ast.Object, key *ast.Term) string {
	if t := obj.Get(key); t != nil {
		if s, ok := t.Value.(ast.String); ok {
			return string(s)
		}
	}
	return ""
}

// elems visits the elements of an array or a set (in the order a conversion
// to JSON lists them); any other value has none.
func elems(v *ast.Term, f func(*ast.Term) error) error {
	if v == nil {
		return nil
	}
	switch x := v.Value.(type) {
	case *ast.Array:
		for i := 0; i < x.Len(); i++ {
			if err := f(x.Elem(i)); err != nil {
				return err
			}
		}
	case ast.Set:
		return x.Iter(f)
	}
	return nil
}

func decodeDecision(v ast.Value) (schema.Decision, error) {
	m, ok := v.(ast.Object)
	if !ok {
		return schema.Decision{}, fmt.Errorf("%w: not an object", errMalformed)
	}
	out := astString(m, keyDecision)
	d := schema.Decision{Outcome: schema.Outcome(out), Tier: 1}
	if !d.Outcome.Valid() {
		return schema.Decision{}, fmt.Errorf("%w: decision %q is not allow, deny, escalate or pending", errMalformed, out)
	}
	d.Risk = astString(m, keyRisk)
	d.Category = astString(m, keyCategory)
	rs := m.Get(keyReasons)
	n := 0
	if rs != nil {
		if c, ok := rs.Value.(interface{ Len() int }); ok {
			n = c.Len()
		}
	}
	d.Reasons = make([]schema.Reason, 0, n)
	err := elems(rs, func(r *ast.Term) error {
		rm, ok := r.Value.(ast.Object)
		if !ok {
			return fmt.Errorf("%w: a reason is not an object", errMalformed)
		}
		d.Reasons = append(d.Reasons, schema.Reason{Code: astString(rm, keyCode), Rule: astString(rm, keyRule), Message: astString(rm, keyMessage), Where: astString(rm, keyWhere), Outcome: schema.Outcome(astString(rm, keyDecision))})
		return nil
	})
	if err != nil {
		return schema.Decision{}, err
	}
	rank := map[schema.Outcome]int{}
	i := 0
	_ = elems(m.Get(keyPrecedence), func(p *ast.Term) error {
		if o, ok := p.Value.(ast.String); ok {
			rank[schema.Outcome(o)] = i
		}
		i++
		return nil
	})
	// Strongest first (the policy's precedence), then by code; reasons whose
	// outcome the precedence does not list go last.
	slices.SortStableFunc(d.Reasons, func(a, b schema.Reason) int {
		ra, oka := rank[a.Outcome]
		rb, okb := rank[b.Outcome]
		switch {
		case oka != okb && oka:
			return -1
		case oka != okb:
			return 1
		case ra != rb:
			return ra - rb
		}
		return strings.Compare(a.Code, b.Code)
	})
	for _, r := range d.Reasons {
		if strings.HasPrefix(r.Code, "BUDGET-") {
			d.BudgetExceeded = true
		}
	}
	_ = elems(m.Get(keyNotApplied), func(x *ast.Term) error {
		if s, ok := x.Value.(ast.String); ok {
			d.NotApplied = append(d.NotApplied, string(s))
		}
		return nil
	})
	return d, nil
}
