package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/toolgate/toolgate/schema"
)

// Suite is one suite file: the policy it runs against, its fixtures and its
// cases.
type Suite struct {
	Name string
	File string // the path it was loaded from
	// Bundle and Config are paths resolved against the suite file's
	// directory; empty means the runner's default (--bundle, --config).
	Bundle string
	Config string
	Data   []string
	// Agents are registered in each case's fresh database.
	Agents []AgentFixture
	// History is run through the Verifier before each case's own requests.
	History []Step
	Cases   []Case
}

// AgentFixture is an agent registered through state.Store.RegisterAgent;
// requests name it with agent: {ref: NAME}, which the runner replaces by
// the generated id and token.
type AgentFixture struct {
	Name               string
	Trust              schema.TrustLevel
	AllowedTools       []string
	BlockedTools       []string
	MaxDailyCostUSD    float64
	MaxRequestsPerHour int
	Revoked            bool
	Line               int
}

// Case is one test: a single request with its expectation, or a sequence of
// steps, each with its own.
type Case struct {
	Name  string
	Line  int
	Steps []Step
	// multi is set when the case was written with steps:.
	multi bool
}

// Step is one request and what it must produce. A step without any
// expectation is a setup step: it must be a valid request; its verdict is
// not checked. An InFlight step reserves its conversation step and leaves
// it in flight, as if another request were being decided.
type Step struct {
	Name     string
	Line     int
	Request  map[string]any // the Request JSON shape, defaults merged in
	InFlight bool
	Expect   Expectation
}

// Expectation is what a step must produce.
type Expectation struct {
	Decision schema.Outcome `json:"decision,omitempty"`
	Codes    []string       `json:"codes,omitempty"`
	NotCodes []string       `json:"not_codes,omitempty"`
	Tier     int            `json:"tier,omitempty"`
	// Error is the field an invalid request must be refused for.
	Error string `json:"error,omitempty"`
}

func (e Expectation) empty() bool {
	return e.Decision == "" && len(e.Codes) == 0 && len(e.NotCodes) == 0 && e.Tier == 0 && e.Error == ""
}

// stateless reports whether a case can be decided without a database and
// get the same verdict: one request, no fixtures, nothing in flight.
func (s *Suite) stateless(c *Case) bool {
	return !c.multi && len(c.Steps) == 1 && !c.Steps[0].InFlight && len(s.Agents) == 0 && len(s.History) == 0
}

// SuiteError is an invalid suite: the file, the line and the field.
type SuiteError struct {
	File    string
	Line    int
	Field   string
	Problem string
}

func (e *SuiteError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// The raw YAML shapes. Unknown keys are rejected (KnownFields).
type rawSuite struct {
	Name     string      `yaml:"name"`
	Bundle   string      `yaml:"bundle"`
	Config   string      `yaml:"config"`
	Data     []string    `yaml:"data"`
	Defaults yaml.Node   `yaml:"defaults"`
	Fixtures rawFixtures `yaml:"fixtures"`
	Cases    []rawCase   `yaml:"cases"`
}

type rawFixtures struct {
	Agents  []rawAgent `yaml:"agents"`
	History []rawStep  `yaml:"history"`
}

type rawAgent struct {
	Name               string    `yaml:"name"`
	Trust              yaml.Node `yaml:"trust"`
	AllowedTools       []string  `yaml:"allowed_tools"`
	BlockedTools       []string  `yaml:"blocked_tools"`
	MaxDailyCostUSD    float64   `yaml:"max_daily_cost_usd"`
	MaxRequestsPerHour int       `yaml:"max_requests_per_hour"`
	Revoked            bool      `yaml:"revoked"`
	Line               int       `yaml:"-"`
}

type rawExpect struct {
	Decision yaml.Node `yaml:"decision"`
	Codes    []string  `yaml:"codes"`
	NotCodes []string  `yaml:"not_codes"`
	Tier     int       `yaml:"tier"`
	Error    string    `yaml:"error"`
}

type rawStep struct {
	Name      string    `yaml:"name"`
	Request   yaml.Node `yaml:"request"`
	InFlight  bool      `yaml:"in_flight"`
	rawExpect `yaml:",inline"`
}

type rawCase struct {
	Name      string    `yaml:"name"`
	Request   yaml.Node `yaml:"request"`
	Steps     []rawStep `yaml:"steps"`
	rawExpect `yaml:",inline"`
}

// LoadPaths loads every suite the paths name: files, or directories whose
// *.yaml and *.yml files are suites (not recursive, so a suite's config
// files can live in a subdirectory). Suites come back sorted by path.
func LoadPaths(paths []string) ([]*Suite, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, &SuiteError{File: p, Problem: err.Error()}
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, &SuiteError{File: p, Problem: err.Error()}
		}
		n := len(files)
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
		if len(files) == n {
			return nil, &SuiteError{File: p, Problem: "no suite files (*.yaml, *.yml) in this directory"}
		}
	}
	sort.Strings(files)
	suites := make([]*Suite, 0, len(files))
	names := map[string]string{}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			return nil, err
		}
		if prev, ok := names[s.Name]; ok {
			return nil, &SuiteError{File: f, Field: "name", Problem: fmt.Sprintf("suite %q is also defined in %s", s.Name, prev)}
		}
		names[s.Name] = f
		suites = append(suites, s)
	}
	return suites, nil
}

// Load reads one suite file.
func Load(path string) (*Suite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &SuiteError{File: path, Problem: err.Error()}
	}
	return Parse(path, data)
}

var (
	unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	yamlLine     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
)

// yamlError turns yaml.v3's errors into a SuiteError naming the line and,
// for an unknown key, the key.
func yamlError(file string, err error) error {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	first := &SuiteError{File: file}
	var more []string
	for i, m := range msgs {
		se := &SuiteError{File: file, Problem: m}
		if g := unknownField.FindStringSubmatch(m); g != nil {
			se.Line, _ = strconv.Atoi(g[1])
			se.Field, se.Problem = g[2], "unknown key"
		} else if g := yamlLine.FindStringSubmatch(m); g != nil {
			se.Line, _ = strconv.Atoi(g[1])
			se.Problem = g[2]
		}
		if i == 0 {
			*first = *se
		} else {
			more = append(more, se.Error())
		}
	}
	if len(more) > 0 {
		first.Problem += " (and: " + strings.Join(more, "; ") + ")"
	}
	return first
}

// Parse decodes a suite from data; file names it in errors and anchors its
// relative paths.
func Parse(file string, data []byte) (*Suite, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var raw rawSuite
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &SuiteError{File: file, Problem: "empty suite file"}
		}
		return nil, yamlError(file, err)
	}
	// Lines of fixtures and cases, which the typed decode drops.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(file, err)
	}
	bad := func(line int, field, format string, a ...any) error {
		return &SuiteError{File: file, Line: line, Field: field, Problem: fmt.Sprintf(format, a...)}
	}
	dir := filepath.Dir(file)
	resolve := func(p string) string {
		if p == "" || filepath.IsAbs(p) || strings.Contains(p, "://") {
			return p
		}
		return filepath.Join(dir, p)
	}
	s := &Suite{Name: strings.TrimSpace(raw.Name), File: file, Bundle: resolve(raw.Bundle), Config: resolve(raw.Config)}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	for _, d := range raw.Data {
		s.Data = append(s.Data, resolve(d))
	}
	defaults, err := mappingValue(file, &raw.Defaults, "defaults")
	if err != nil {
		return nil, err
	}
	lines := nodeLines(&doc)

	agents := map[string]bool{}
	for i, ra := range raw.Fixtures.Agents {
		line := lines[fmt.Sprintf("fixtures.agents[%d]", i)]
		name := strings.TrimSpace(ra.Name)
		if name == "" {
			return nil, bad(line, "name", "required")
		}
		if agents[name] {
			return nil, bad(line, "name", "agent %q is defined twice", name)
		}
		agents[name] = true
		a := AgentFixture{Name: name, AllowedTools: ra.AllowedTools, BlockedTools: ra.BlockedTools,
			MaxDailyCostUSD: ra.MaxDailyCostUSD, MaxRequestsPerHour: ra.MaxRequestsPerHour, Revoked: ra.Revoked, Line: line}
		if ra.Trust.Kind != 0 {
			lvl, err := schema.ParseTrustLevel(ra.Trust.Value)
			if ra.Trust.Kind != yaml.ScalarNode || err != nil {
				return nil, bad(ra.Trust.Line, "trust", "want untrusted, supervised, autonomous, trusted or 0..3, not %q", ra.Trust.Value)
			}
			a.Trust = lvl
		}
		if a.MaxDailyCostUSD < 0 || a.MaxRequestsPerHour < 0 {
			return nil, bad(line, "budget", "limits must not be negative")
		}
		s.Agents = append(s.Agents, a)
	}

	step := func(rs *rawStep, line int, base map[string]any, where string) (Step, error) {
		st := Step{Name: rs.Name, Line: line, InFlight: rs.InFlight}
		req, err := mappingValue(file, &rs.Request, where+".request")
		if err != nil {
			return st, err
		}
		st.Request = merge(base, req)
		if st.Expect, err = expectation(file, &rs.rawExpect); err != nil {
			return st, err
		}
		if st.InFlight && !st.Expect.empty() {
			return st, bad(line, "in_flight", "an in-flight step only reserves its step: it takes no expectation")
		}
		return st, checkRequest(file, line, st, agents, &rs.Request)
	}
	for i := range raw.Fixtures.History {
		rs := &raw.Fixtures.History[i]
		line := lines[fmt.Sprintf("fixtures.history[%d]", i)]
		st, err := step(rs, line, defaults, "history")
		if err != nil {
			return nil, err
		}
		if !st.Expect.empty() {
			return nil, bad(line, "history", "history steps take no expectation; write them as a case's steps")
		}
		s.History = append(s.History, st)
	}

	if len(raw.Cases) == 0 {
		return nil, bad(lines["cases"], "cases", "a suite needs at least one case")
	}
	seen := map[string]int{}
	for i := range raw.Cases {
		rc := &raw.Cases[i]
		key := fmt.Sprintf("cases[%d]", i)
		line := lines[key]
		c := Case{Name: strings.TrimSpace(rc.Name), Line: line}
		if c.Name == "" {
			return nil, bad(line, "name", "required")
		}
		if prev, ok := seen[c.Name]; ok {
			return nil, bad(line, "name", "case %q is already defined at line %d", c.Name, prev)
		}
		seen[c.Name] = line
		if len(rc.Steps) == 0 {
			if rc.Request.Kind == 0 {
				return nil, bad(line, "request", "required (or steps)")
			}
			st, err := step(&rawStep{Name: c.Name, Request: rc.Request, rawExpect: rc.rawExpect}, line, defaults, key)
			if err != nil {
				return nil, err
			}
			if st.Expect.empty() {
				return nil, bad(line, "decision", "a case needs an expectation: decision, codes, not_codes, tier or error")
			}
			c.Steps = []Step{st}
		} else {
			c.multi = true
			if e, err := expectation(file, &rc.rawExpect); err != nil {
				return nil, err
			} else if !e.empty() {
				return nil, bad(line, "steps", "with steps, each step carries its own expectation")
			}
			base, err := mappingValue(file, &rc.Request, key+".request")
			if err != nil {
				return nil, err
			}
			base = merge(defaults, base)
			checked := false
			for j := range rc.Steps {
				sl := lines[fmt.Sprintf("%s.steps[%d]", key, j)]
				st, err := step(&rc.Steps[j], sl, base, fmt.Sprintf("%s.steps[%d]", key, j))
				if err != nil {
					return nil, err
				}
				if st.Name == "" {
					st.Name = fmt.Sprintf("step %d", j+1)
				}
				checked = checked || !st.Expect.empty()
				c.Steps = append(c.Steps, st)
			}
			if !checked {
				return nil, bad(line, "steps", "no step carries an expectation")
			}
		}
		s.Cases = append(s.Cases, c)
	}
	return s, nil
}

// nodeLines maps the paths of fixtures and cases (cases[3],
// cases[3].steps[1], fixtures.agents[0]) to their lines.
func nodeLines(doc *yaml.Node) map[string]int {
	out := map[string]int{}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return out
	}
	root := doc.Content[0]
	get := func(m *yaml.Node, key string) *yaml.Node {
		if m == nil || m.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		return nil
	}
	seq := func(prefix string, n *yaml.Node, each func(string, *yaml.Node)) {
		if n == nil || n.Kind != yaml.SequenceNode {
			return
		}
		out[prefix] = n.Line
		for i, it := range n.Content {
			p := fmt.Sprintf("%s[%d]", prefix, i)
			out[p] = it.Line
			if each != nil {
				each(p, it)
			}
		}
	}
	out["cases"] = root.Line
	seq("cases", get(root, "cases"), func(p string, c *yaml.Node) { seq(p+".steps", get(c, "steps"), nil) })
	fx := get(root, "fixtures")
	seq("fixtures.agents", get(fx, "agents"), nil)
	seq("fixtures.history", get(fx, "history"), nil)
	return out
}

func expectation(file string, r *rawExpect) (Expectation, error) {
	e := Expectation{Codes: r.Codes, NotCodes: r.NotCodes, Tier: r.Tier, Error: strings.TrimSpace(r.Error)}
	if r.Decision.Kind != 0 {
		o := schema.Outcome(r.Decision.Value)
		if r.Decision.Kind != yaml.ScalarNode || !o.Valid() {
			return e, &SuiteError{File: file, Line: r.Decision.Line, Field: "decision", Problem: fmt.Sprintf("want allow, deny, escalate or pending, not %q", r.Decision.Value)}
		}
		e.Decision = o
	}
	if e.Tier < 0 || e.Tier > 3 {
		return e, &SuiteError{File: file, Line: r.Decision.Line, Field: "tier", Problem: "want 1, 2 or 3"}
	}
	if e.Error != "" && (e.Decision != "" || len(e.Codes) > 0 || len(e.NotCodes) > 0 || e.Tier != 0) {
		return e, &SuiteError{File: file, Line: r.Decision.Line, Field: "error", Problem: "an invalid request has no decision, codes or tier to expect"}
	}
	return e, nil
}

// mappingValue decodes a YAML mapping node (or nothing) into JSON-shaped
// values: maps with string keys, slices, strings, numbers, booleans.
func mappingValue(file string, n *yaml.Node, field string) (map[string]any, error) {
	if n.Kind == 0 {
		return map[string]any{}, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, &SuiteError{File: file, Line: n.Line, Field: field, Problem: "must be a mapping"}
	}
	v, err := jsonValue(file, n)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

func jsonValue(file string, n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.AliasNode:
		return jsonValue(file, n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, &SuiteError{File: file, Line: k.Line, Problem: "mapping keys must be strings"}
			}
			v, err := jsonValue(file, n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		a := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := jsonValue(file, c)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, &SuiteError{File: file, Line: n.Line, Problem: err.Error()}
			}
			return b, nil
		case "!!int", "!!float":
			// Kept as written: json.Number marshals verbatim.
			if json.Valid([]byte(n.Value)) {
				return json.Number(n.Value), nil
			}
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, &SuiteError{File: file, Line: n.Line, Problem: err.Error()}
			}
			return f, nil
		}
		// Strings, timestamps and anything else stay the text written.
		return n.Value, nil
	}
	return nil, &SuiteError{File: file, Line: n.Line, Problem: "unsupported YAML node"}
}

// merge deep-merges over onto a copy of base: mappings merge key by key,
// anything else replaces.
func merge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = copyValue(v)
	}
	for k, v := range over {
		if om, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = merge(bm, om)
				continue
			}
		}
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return merge(x, nil)
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = copyValue(e)
		}
		return a
	}
	return v
}

// agentRef returns the fixture name a request's agent: {ref: NAME} names.
func agentRef(req map[string]any) (string, bool) {
	a, ok := req["agent"].(map[string]any)
	if !ok {
		return "", false
	}
	r, ok := a["ref"]
	if !ok {
		return "", false
	}
	s, _ := r.(string)
	return s, true
}

// checkRequest refuses, at load time, what can only be a mistake in the
// suite: a reference to an undefined agent, and keys the Request shape does
// not have (unless the step expects the request to be refused).
func checkRequest(file string, line int, st Step, agents map[string]bool, node *yaml.Node) error {
	if ref, ok := agentRef(st.Request); ok && !agents[ref] {
		return &SuiteError{File: file, Line: line, Field: "agent.ref", Problem: fmt.Sprintf("no agent fixture named %q", ref)}
	}
	if st.Expect.Error != "" {
		return nil
	}
	_, err := buildRequest(st.Request, func(string) (string, string, bool) { return "agent_placeholder", "", true })
	var re *schema.RequestError
	if errors.As(err, &re) && re.Problem == "unknown field" {
		if l := keyLine(node, re.Field[strings.LastIndex(re.Field, ".")+1:]); l > 0 {
			line = l
		}
		return &SuiteError{File: file, Line: line, Field: "request." + re.Field, Problem: "unknown key in the request"}
	}
	return nil
}

// keyLine finds the line of a mapping key anywhere under n.
func keyLine(n *yaml.Node, key string) int {
	if n == nil {
		return 0
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i].Line
			}
		}
	}
	for _, c := range n.Content {
		if l := keyLine(c, key); l > 0 {
			return l
		}
	}
	return 0
}

// resolver maps an agent fixture's name to its id and token.
type resolver func(name string) (id, token string, ok bool)

// buildRequest turns a step's request into a validated Request, replacing
// agent: {ref: NAME} by the fixture's id and token (unless the request
// gives its own token). Errors are *schema.RequestError, as for any request.
func buildRequest(req map[string]any, resolve resolver) (schema.Request, error) {
	if ref, ok := agentRef(req); ok {
		id, token, found := resolve(ref)
		if !found {
			return schema.Request{}, fmt.Errorf("agent.ref: no agent fixture named %q", ref)
		}
		req = merge(req, nil)
		a := req["agent"].(map[string]any)
		delete(a, "ref")
		a["id"] = id
		if _, given := a["token"]; !given && token != "" {
			a["token"] = token
		}
	}
	data, err := json.Marshal(req)
	if err != nil {
		return schema.Request{}, fmt.Errorf("encode request: %w", err)
	}
	return schema.ParseRequest(data)
}
