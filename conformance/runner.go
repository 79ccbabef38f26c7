package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/bundles"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/state"
)

// Options tune Run.
type Options struct {
	// Bundle, Config and Data are the defaults for suites that do not name
	// their own bundle or config; Data files are merged before a suite's.
	Bundle string
	Config string
	Data   []string
	// Run selects cases whose "suite/case" name matches.
	Run *regexp.Regexp
	// Parallel is the number of cases decided at once (default GOMAXPROCS).
	Parallel int
	// FreshDB gives every case its own database, even those that need no
	// state (which otherwise share one stateless Verifier per policy).
	FreshDB bool
	// TempDir holds the cases' databases (default: a new os.MkdirTemp
	// directory, removed at the end).
	TempDir string
	Logger  *slog.Logger
}

// Report is the outcome of a run.
type Report struct {
	Suites   []SuiteResult `json:"suites"`
	Passed   int           `json:"passed"`
	Failed   int           `json:"failed"`
	Errors   int           `json:"errors"`
	Duration time.Duration `json:"duration_ns"`
}

// OK reports whether every case passed.
func (r *Report) OK() bool { return r.Failed == 0 && r.Errors == 0 }

// SuiteResult is one suite's cases, in file order.
type SuiteResult struct {
	Name     string        `json:"name"`
	File     string        `json:"file"`
	Cases    []CaseResult  `json:"cases"`
	Passed   int           `json:"passed"`
	Failed   int           `json:"failed"`
	Errors   int           `json:"errors"`
	Duration time.Duration `json:"duration_ns"`
}

// CaseResult is one case: passed, failed (a step did not meet its
// expectation) or an error (the case could not be run: its database or a
// fixture failed).
type CaseResult struct {
	Name     string        `json:"name"`
	Line     int           `json:"line"`
	Passed   bool          `json:"passed"`
	Error    string        `json:"error,omitempty"`
	Stateful bool          `json:"stateful"`
	Steps    []StepResult  `json:"steps"`
	Duration time.Duration `json:"duration_ns"`
}

// StepResult is what one step expected and got.
type StepResult struct {
	Name     string        `json:"name"`
	Line     int           `json:"line"`
	Expected Expectation   `json:"expected"`
	Actual   Actual        `json:"actual"`
	Failures []string      `json:"failures,omitempty"`
	Setup    bool          `json:"setup,omitempty"`
	Reasons  []Reason      `json:"reasons,omitempty"`
	Request  string        `json:"-"`
	Duration time.Duration `json:"-"`
}

// Actual is what the Verifier said.
type Actual struct {
	Decision schema.Outcome `json:"decision,omitempty"`
	Tier     int            `json:"tier,omitempty"`
	Codes    []string       `json:"codes,omitempty"`
	// Error and Field are set when the request was refused as invalid.
	Error string `json:"error,omitempty"`
	Field string `json:"field,omitempty"`
}

// Reason is a verdict's reason, as reports print it.
type Reason struct {
	Code     string `json:"code"`
	Decision string `json:"decision"`
	Message  string `json:"message"`
}

// env is a policy a set of suites shares: the config and the engine built
// from the bundle and data, prepared once.
type env struct {
	cfg       *config.Config
	eng       *engine.Engine
	stateless *toolgate.Verifier // nil when cases under this config need state

	// template is an empty database with every migration applied, copied
	// for each stateful case: opening a copy is much cheaper than migrating
	// a new file.
	templateOnce sync.Once
	template     []byte
	templateErr  error
}

// freshDB writes a migrated, empty database at path.
func (e *env) freshDB(ctx context.Context, dir, path string, logger *slog.Logger) error {
	e.templateOnce.Do(func() {
		tdir, err := os.MkdirTemp(dir, "template-")
		if err != nil {
			e.templateErr = err
			return
		}
		defer os.RemoveAll(tdir)
		tp := filepath.Join(tdir, "template.db")
		v, err := toolgate.New(e.cfg, toolgate.WithEngine(e.eng), toolgate.WithDB(tp), toolgate.NoWait(), toolgate.WithLogger(logger))
		if err != nil {
			e.templateErr = err
			return
		}
		if _, err := v.Store().DB().ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			v.Close()
			e.templateErr = fmt.Errorf("checkpoint the template database: %w", err)
			return
		}
		if err := v.Close(); err != nil {
			e.templateErr = err
			return
		}
		e.template, e.templateErr = os.ReadFile(tp)
	})
	if e.templateErr != nil {
		return e.templateErr
	}
	return os.WriteFile(path, e.template, 0o600)
}

type envKey struct {
	bundle, config, data string
}

// Run decides every selected case and returns the report. The error is a
// *SuiteError when a suite's policy or config cannot be loaded (the run did
// not start), or the context's error.
func Run(ctx context.Context, suites []*Suite, opts Options) (*Report, error) {
	start := time.Now()
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tmp := opts.TempDir
	if tmp == "" {
		d, err := os.MkdirTemp("", "toolgate-conformance-")
		if err != nil {
			return nil, fmt.Errorf("conformance: temp dir: %w", err)
		}
		defer os.RemoveAll(d)
		tmp = d
	}
	envs := map[envKey]*env{}
	defer func() {
		for _, e := range envs {
			if e.stateless != nil {
				e.stateless.Close()
			}
		}
	}()
	type job struct {
		suite *Suite
		c     *Case
		env   *env
		out   *CaseResult
		db    string
	}
	rep := &Report{Suites: make([]SuiteResult, len(suites))}
	var jobs []job
	for i, s := range suites {
		e, err := suiteEnv(ctx, s, opts, envs, logger)
		if err != nil {
			return nil, err
		}
		sr := &rep.Suites[i]
		sr.Name, sr.File = s.Name, s.File
		for j := range s.Cases {
			c := &s.Cases[j]
			if opts.Run != nil && !opts.Run.MatchString(s.Name+"/"+c.Name) {
				continue
			}
			sr.Cases = append(sr.Cases, CaseResult{})
		}
		k := 0
		for j := range s.Cases {
			c := &s.Cases[j]
			if opts.Run != nil && !opts.Run.MatchString(s.Name+"/"+c.Name) {
				continue
			}
			jobs = append(jobs, job{suite: s, c: c, env: e, out: &sr.Cases[k], db: filepath.Join(tmp, fmt.Sprintf("s%03d-c%04d.db", i, j))})
			k++
		}
	}

	workers := opts.Parallel
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ch := make(chan job)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				*j.out = runCase(ctx, j.suite, j.c, j.env, j.db, opts.FreshDB, logger)
			}
		}()
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		ch <- j
	}
	close(ch)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range rep.Suites {
		sr := &rep.Suites[i]
		for _, c := range sr.Cases {
			sr.Duration += c.Duration
			switch {
			case c.Error != "":
				sr.Errors++
			case c.Passed:
				sr.Passed++
			default:
				sr.Failed++
			}
		}
		rep.Passed += sr.Passed
		rep.Failed += sr.Failed
		rep.Errors += sr.Errors
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

// suiteEnv finds or builds the policy a suite runs against.
func suiteEnv(ctx context.Context, s *Suite, opts Options, envs map[envKey]*env, logger *slog.Logger) (*env, error) {
	bundle, cfgPath := s.Bundle, s.Config
	if bundle == "" {
		bundle = opts.Bundle
	}
	if cfgPath == "" {
		cfgPath = opts.Config
	}
	data := append(append([]string{}, opts.Data...), s.Data...)
	key := envKey{bundle, cfgPath, strings.Join(data, "\x00")}
	if e, ok := envs[key]; ok {
		return e, nil
	}
	fail := func(field string, err error) error {
		return &SuiteError{File: s.File, Field: field, Problem: err.Error()}
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, fail("config", err)
	}
	eng, err := NewEngine(ctx, cfg, bundle, data, logger)
	if err != nil {
		return nil, fail("bundle", err)
	}
	e := &env{cfg: cfg, eng: eng}
	// Cases that need no state share one Verifier without a database, when
	// the config asks for nothing that needs one: registration, an audit
	// log, model tiers (which are not run in suites without state).
	if !cfg.RequireRegistration(false) && cfg.Audit.SigningKey == "" && cfg.Triage == nil && cfg.Supervisor == nil {
		v, err := toolgate.New(cfg, toolgate.WithEngine(eng), toolgate.WithoutState(), toolgate.NoWait(), toolgate.WithLogger(logger))
		if err != nil {
			return nil, fail("config", err)
		}
		e.stateless = v
	}
	envs[key] = e
	return e, nil
}

// NewEngine prepares the engine as `toolgate eval` does: the bundle (the
// embedded default when empty; verified when the config names a key), the
// config's policy keys, the config's data files, then each data file.
func NewEngine(ctx context.Context, cfg *config.Config, bundle string, data []string, logger *slog.Logger) (*engine.Engine, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts := []engine.Option{engine.WithLogger(logger), engine.WithData(toolgate.ConfigData(cfg))}
	if bundle == "" {
		bundle = cfg.Resolve(cfg.Policy.Bundle)
	}
	var key *bundles.VerificationKey
	if p := cfg.Resolve(cfg.Policy.VerificationKey); p != "" {
		pem, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("verification key: %w", err)
		}
		key = &bundles.VerificationKey{PEM: pem}
	}
	if bundle != "" {
		b, err := bundles.Load(ctx, bundle, key)
		if err != nil {
			return nil, err
		}
		opts = append(opts, engine.WithBundle(b, bundles.Name(bundle, b)))
	} else if key != nil {
		return nil, errors.New("a verification key is configured but the embedded default bundle is not signed")
	}
	var files []string
	for _, p := range cfg.Policy.Data {
		files = append(files, cfg.Resolve(p))
	}
	files = append(files, data...)
	for _, f := range files {
		d, err := engine.ReadDataFile(f)
		if err != nil {
			return nil, err
		}
		opts = append(opts, engine.WithData(d))
	}
	return engine.New(ctx, opts...)
}

// runCase decides one case's steps in order, on its own database unless it
// needs none.
func runCase(ctx context.Context, s *Suite, c *Case, e *env, dbPath string, fresh bool, logger *slog.Logger) (res CaseResult) {
	start := time.Now()
	res = CaseResult{Name: c.Name, Line: c.Line}
	defer func() { res.Duration = time.Since(start) }()

	v := e.stateless
	resolve := func(string) (string, string, bool) { return "", "", false }
	if v == nil || fresh || !s.stateless(c) {
		res.Stateful = true
		if err := e.freshDB(ctx, filepath.Dir(dbPath), dbPath, logger); err != nil {
			res.Error = fmt.Sprintf("prepare the case's database: %v", err)
			return res
		}
		cv, err := toolgate.New(e.cfg, toolgate.WithEngine(e.eng), toolgate.WithDB(dbPath), toolgate.NoWait(), toolgate.WithLogger(logger))
		if err != nil {
			res.Error = fmt.Sprintf("open the case's database: %v", err)
			return res
		}
		defer func() {
			cv.Close()
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(dbPath + suffix)
			}
		}()
		v = cv
		ids, err := registerAgents(ctx, cv.Store(), s.Agents)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		resolve = func(name string) (string, string, bool) {
			a, ok := ids[name]
			return a[0], a[1], ok
		}
		for i, h := range s.History {
			if _, err := decide(ctx, v, h, resolve); err != nil {
				res.Error = fmt.Sprintf("history step %d (line %d): %v", i+1, h.Line, err)
				return res
			}
		}
	}
	res.Passed = true
	for _, st := range c.Steps {
		sr := StepResult{Name: st.Name, Line: st.Line, Expected: st.Expect, Setup: st.Expect.empty()}
		if st.InFlight {
			if err := hold(ctx, v.Store(), st, resolve); err != nil {
				res.Error = fmt.Sprintf("in-flight step (line %d): %v", st.Line, err)
				res.Passed = false
				return res
			}
			sr.Setup = true
			res.Steps = append(res.Steps, sr)
			continue
		}
		verdict, err := decide(ctx, v, st, resolve)
		var re *schema.RequestError
		switch {
		case errors.As(err, &re):
			sr.Actual = Actual{Error: re.Error(), Field: re.Field}
		case err != nil:
			res.Error = fmt.Sprintf("step %q (line %d): %v", st.Name, st.Line, err)
			res.Passed = false
			return res
		default:
			sr.Actual = Actual{Decision: verdict.Outcome, Tier: verdict.Tier, Codes: verdict.Codes()}
			for _, r := range verdict.Reasons {
				sr.Reasons = append(sr.Reasons, Reason{Code: r.Code, Decision: string(r.Outcome), Message: r.Message})
			}
		}
		if sr.Setup {
			if sr.Actual.Error != "" {
				sr.Failures = []string{"setup step: request refused: " + sr.Actual.Error}
			}
		} else {
			sr.Failures = check(st.Expect, sr.Actual)
		}
		if len(sr.Failures) > 0 {
			res.Passed = false
		}
		res.Steps = append(res.Steps, sr)
	}
	return res
}

func decide(ctx context.Context, v *toolgate.Verifier, st Step, resolve resolver) (toolgate.Verdict, error) {
	req, err := buildRequest(st.Request, resolve)
	if err != nil {
		return toolgate.Verdict{}, err
	}
	return v.Verify(ctx, req)
}

// hold reserves a step's conversation step and never commits or releases
// it: the next request for that step finds it in flight (LOOP-005).
func hold(ctx context.Context, store *state.Store, st Step, resolve resolver) error {
	if store == nil {
		return errors.New("no state store")
	}
	req, err := buildRequest(st.Request, resolve)
	if err != nil {
		return err
	}
	_, _, err = store.Reserve(ctx, req, state.ReserveOptions{TTL: time.Hour})
	return err
}

// registerAgents registers the fixtures and returns name → [id, token].
func registerAgents(ctx context.Context, store *state.Store, agents []AgentFixture) (map[string][2]string, error) {
	ids := make(map[string][2]string, len(agents))
	for _, a := range agents {
		ag, token, err := store.RegisterAgent(ctx, state.AgentSpec{Name: a.Name, Trust: a.Trust, AllowedTools: a.AllowedTools,
			BlockedTools: a.BlockedTools, MaxDailyCostUSD: a.MaxDailyCostUSD, MaxRequestsPerHour: a.MaxRequestsPerHour})
		if err != nil {
			return nil, fmt.Errorf("agent fixture %q (line %d): %w", a.Name, a.Line, err)
		}
		if a.Revoked {
			if err := store.RevokeAgent(ctx, ag.ID); err != nil {
				return nil, fmt.Errorf("agent fixture %q (line %d): revoke: %w", a.Name, a.Line, err)
			}
		}
		ids[a.Name] = [2]string{ag.ID, token}
	}
	return ids, nil
}

// check compares what a step got with what it expected.
func check(want Expectation, got Actual) []string {
	var f []string
	if want.Error != "" {
		switch {
		case got.Error == "":
			f = append(f, fmt.Sprintf("error: expected the request to be refused for %s, got %s", want.Error, got.Decision))
		case got.Field != want.Error:
			f = append(f, fmt.Sprintf("error: expected a refusal for %s, got %s", want.Error, got.Error))
		}
		return f
	}
	if got.Error != "" {
		return []string{"request refused: " + got.Error}
	}
	if want.Decision != "" && want.Decision != got.Decision {
		f = append(f, fmt.Sprintf("decision: expected %s, got %s", want.Decision, got.Decision))
	}
	for _, c := range want.Codes {
		if !slices.Contains(got.Codes, c) {
			f = append(f, fmt.Sprintf("codes: expected %s, not among %s", c, codeList(got.Codes)))
		}
	}
	for _, c := range want.NotCodes {
		if slices.Contains(got.Codes, c) {
			f = append(f, fmt.Sprintf("not_codes: %s present", c))
		}
	}
	if want.Tier != 0 && want.Tier != got.Tier {
		f = append(f, fmt.Sprintf("tier: expected %d, got %d", want.Tier, got.Tier))
	}
	return f
}

func codeList(c []string) string {
	if len(c) == 0 {
		return "[] (no reasons)"
	}
	return "[" + strings.Join(c, " ") + "]"
}
