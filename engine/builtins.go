package engine

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/toolgate/toolgate/engine/scan"
	"github.com/toolgate/toolgate/engine/shell"
)

// The custom builtins. They are registered globally at init, so `toolgate
// eval`, `toolgate test` and the library see the same ones. Each does its
// scanning in Go (precompiled, prefiltered, one pass over the text) and
// returns facts; the policy decides over them.
//
//	toolgate.texts(input)                      {"arguments": [text], "untrusted": [text], "trusted": [string]}
//	toolgate.match(texts, rules)               [{"code","name","message","where","excerpt","class","decision"}]
//	toolgate.decode(texts)                     [{"code","message","where","scope","encodings","decoded"}]
//	toolgate.deobfuscate(texts)                [text]: other forms of each text, with spaced-out letters joined and leetspeak read
//	toolgate.shell(command)                    [canonical command strings]
//	toolgate.provenance(args, trusted, untrusted) [{"where","value","kind","block"}]
//	toolgate.inspect(input, options)           the default policy's scan facts in one call (inspect.go)
//
// A text is {"where": input path, "text": string, "scope": s}; a rule applies
// to a text when its "scope" (or "target") is equal to the text's scope, or
// is absent or "any" and the text's scope is none of "request", "removed"
// and "message". Argument texts
// also carry "key", their top-level argument name. A match carries its rule's
// "class" and "decision" when the rule has them.
var (
	textObject = types.NewObject([]*types.StaticProperty{
		types.NewStaticProperty("where", types.S),
		types.NewStaticProperty("text", types.S),
	}, types.NewDynamicProperty(types.S, types.A))
	textArray = types.NewArray(nil, textObject)
	anyArray  = types.NewArray(nil, types.A)
)

// requestScope is the scope of what a person asked for (toolgate.inspect's
// "request" texts): words about a call, not the call. removedScope is the
// scope of the words an edit takes away: text that no longer runs.
// messageScope holds an outbound call's whole arguments, each of which is
// matched on its own too. Only the rules that name one of these scopes are
// matched against its texts (namedOnly).
const (
	requestScope = "request"
	removedScope = "removed"
	messageScope = "message"
	// callScope holds the arguments no other scope reads: the rules for
	// any scope match it, and those that name it.
	callScope = "call"
	// fieldsScope holds the whole arguments of a call that is not
	// outbound, as JSON (an outbound call's are in messageScope): the
	// rules for any scope match it, and those that name it.
	fieldsScope = "fields"
)

var namedOnly = map[string]bool{requestScope: true, removedScope: true, messageScope: true}

func init() {
	rego.RegisterBuiltin1(&rego.Function{
		Name:        "toolgate.texts",
		Description: "Collects the strings of a request: argument strings with their paths, untrusted block contents, and trusted text.",
		Decl:        types.NewFunction(types.Args(types.Named("input", types.A)), types.Named("texts", types.A)),
	}, builtinTexts)
	rego.RegisterBuiltin2(&rego.Function{
		Name:        "toolgate.match",
		Description: "Matches texts against pattern rules (case-insensitive RE2, literal-prefiltered); at most one match per rule and text.",
		Decl:        types.NewFunction(types.Args(types.Named("texts", textArray), types.Named("rules", anyArray)), types.Named("matches", anyArray)),
	}, builtinMatch)
	rego.RegisterBuiltin1(&rego.Function{
		Name:        "toolgate.decode",
		Description: "Finds encoded content (base64, base32, hex, percent, HTML entities, escapes, zero-width, bidi, homoglyphs), decoding up to 3 layers.",
		Decl:        types.NewFunction(types.Args(types.Named("texts", textArray)), types.Named("findings", anyArray)),
	}, builtinDecode)
	rego.RegisterBuiltin1(&rego.Function{
		Name:        "toolgate.deobfuscate",
		Description: "Returns other forms of texts that disguise words: letters spaced or dotted apart joined, leetspeak read as letters.",
		Decl:        types.NewFunction(types.Args(types.Named("texts", textArray)), types.Named("forms", anyArray)),
	}, builtinDeobfuscate)
	rego.RegisterBuiltin1(&rego.Function{
		Name:        "toolgate.shell",
		Description: "Normalises a shell command line into canonical pipelines (quotes, escapes, flag spellings, wrappers, nested sh -c).",
		Decl:        types.NewFunction(types.Args(types.Named("command", types.S)), types.Named("canonical", types.NewArray(nil, types.S))),
	}, builtinShell)
	rego.RegisterBuiltin3(&rego.Function{
		Name:        "toolgate.provenance",
		Description: "Reports argument values found in untrusted text but in no trusted text.",
		Decl:        types.NewFunction(types.Args(types.Named("arguments", textArray), types.Named("trusted", types.NewArray(nil, types.S)), types.Named("untrusted", textArray)), types.Named("origins", anyArray)),
	}, builtinProvenance)
}

func builtinTexts(_ rego.BuiltinContext, in *ast.Term) (*ast.Term, error) {
	obj, ok := in.Value.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("toolgate.texts: input must be an object")
	}
	args := []*ast.Term{}
	for _, a := range argumentTexts(obj) {
		args = append(args, withKey(textTerm(a.where, a.text, "arguments"), a.key))
	}
	untrustedTexts, trusted, _ := contextTexts(obj)
	untrusted := make([]*ast.Term, len(untrustedTexts))
	for i, u := range untrustedTexts {
		untrusted[i] = textTerm(u.Where, u.Text, "context")
	}
	return ast.ObjectTerm(
		ast.Item(keyTerm("arguments"), ast.ArrayTerm(args...)),
		ast.Item(keyTerm("untrusted"), ast.ArrayTerm(untrusted...)),
		ast.Item(keyTerm("trusted"), ast.ArrayTerm(trusted...)),
	), nil
}

func withKey(t *ast.Term, key ast.String) *ast.Term {
	obj := t.Value.(ast.Object)
	obj.Insert(keyTerm("key"), ast.NewTerm(key))
	return t
}

func textTerm(where, text, scope string) *ast.Term {
	return ast.ObjectTerm(
		ast.Item(keyTerm("where"), ast.StringTerm(where)),
		ast.Item(keyTerm("text"), ast.StringTerm(text)),
		ast.Item(keyTerm("scope"), ast.StringTerm(scope)),
	)
}

// argText is one string of the action's arguments: its path, the text and
// the top-level argument it sits under.
type argText struct {
	where, text string
	key         ast.String
}

// argumentTexts collects every string of input.action.arguments, depth
// first in key order, with its path (action.arguments.a.b[2].c).
func argumentTexts(obj ast.Object) []argText {
	var args []argText
	v, ok := getPath(obj, "action", "arguments").(ast.Object)
	if !ok {
		return nil
	}
	for _, k := range v.Keys() {
		key, ok := k.Value.(ast.String)
		if !ok {
			continue
		}
		walkStrings(v.Get(k).Value, "action.arguments."+string(key), func(where, text string) {
			args = append(args, argText{where, text, key})
		})
	}
	return args
}

// contextTexts splits the context: the untrusted blocks' contents, with
// their paths; the trusted text (the user's intent and trusted blocks); and
// of those, the person's own words: the trusted blocks that are not the
// system prompt (source "system"), with their paths.
func contextTexts(obj ast.Object) (untrusted []scan.Text, trusted []*ast.Term, person []scan.Text) {
	trusted = []*ast.Term{}
	if intent, ok := getPath(obj, "context", "user_intent").(ast.String); ok && intent != "" {
		trusted = append(trusted, ast.NewTerm(intent))
	}
	blocks, ok := getPath(obj, "context", "blocks").(*ast.Array)
	if !ok {
		return nil, trusted, nil
	}
	for i := 0; i < blocks.Len(); i++ {
		b, ok := blocks.Elem(i).Value.(ast.Object)
		if !ok {
			continue
		}
		content, ok := getPath(b, "content").(ast.String)
		if !ok || content == "" {
			continue
		}
		where := "context.blocks[" + strconv.Itoa(i) + "].content"
		if trust, _ := getPath(b, "trust").(ast.String); trust == "untrusted" {
			untrusted = append(untrusted, scan.Text{Where: where, Text: string(content)})
			continue
		}
		trusted = append(trusted, ast.NewTerm(content))
		if source, _ := getPath(b, "source").(ast.String); source != "system" {
			person = append(person, scan.Text{Where: where, Text: string(content)})
		}
	}
	return untrusted, trusted, person
}

// walkStrings visits every string in v depth first, in key order, with its
// path (a.b[2].c).
func walkStrings(v ast.Value, path string, visit func(where, text string)) {
	switch x := v.(type) {
	case ast.String:
		visit(path, string(x))
	case ast.Object:
		for _, k := range x.Keys() {
			key := k.Value.String()
			if s, ok := k.Value.(ast.String); ok {
				key = string(s)
			}
			walkStrings(x.Get(k).Value, path+"."+key, visit)
		}
	case *ast.Array:
		for i := 0; i < x.Len(); i++ {
			walkStrings(x.Elem(i).Value, path+"["+strconv.Itoa(i)+"]", visit)
		}
	}
}

func getPath(v ast.Value, keys ...string) ast.Value {
	for _, k := range keys {
		obj, ok := v.(ast.Object)
		if !ok {
			return nil
		}
		t := obj.Get(keyTerm(k))
		if t == nil {
			return nil
		}
		v = t.Value
	}
	return v
}

func stringField(v ast.Value, key string) string {
	s, _ := getPath(v, key).(ast.String)
	return string(s)
}

// texts converts an array of text objects into scan.Texts, grouped by scope.
func texts(v ast.Value) (map[string][]scan.Text, error) {
	arr, ok := v.(*ast.Array)
	if !ok {
		return nil, fmt.Errorf("texts must be an array")
	}
	out := map[string][]scan.Text{}
	for i := 0; i < arr.Len(); i++ {
		e := arr.Elem(i).Value
		text, ok := getPath(e, "text").(ast.String)
		if !ok {
			return nil, fmt.Errorf("texts[%d].text must be a string", i)
		}
		scope := stringField(e, "scope")
		out[scope] = append(out[scope], scan.Text{Where: stringField(e, "where"), Text: string(text)})
	}
	return out, nil
}

// matchExtras are the rule fields a match carries along, so the policy need
// not look the rule up again.
var matchExtras = []string{"class", "decision"}

// compiledRules is a rule list compiled for matching, with what each
// match reports of its rule.
type compiledRules struct {
	byScope map[string]*scan.RuleSet  // "*" = rules for texts whose scope no rule names
	extra   map[string][][2]*ast.Term // code → the rule's "class" and "decision", when it has them
	class   map[string]string         // code → the rule's "class"
	subsets sync.Map                  // hash of a list of codes → subset (only)
}

// only is the part of c whose codes are among codes (an array or set of
// strings), scope by scope: a rule that names a scope still serves only
// texts of that scope. Built once per list of codes and kept with c, by the
// list's hash.
func (c *compiledRules) only(codes ast.Value) *compiledRules {
	h := codes.Hash()
	if v, ok := c.subsets.Load(h); ok {
		if e := v.(subset); e.codes.Compare(codes) == 0 {
			return e.rules
		}
	}
	keep := map[string]bool{}
	eachString(codes, func(s string) { keep[s] = true })
	sub := &compiledRules{byScope: make(map[string]*scan.RuleSet, len(c.byScope)), extra: c.extra, class: c.class}
	for scope, rs := range c.byScope {
		sub.byScope[scope] = rs.Subset(func(r scan.Rule) bool { return keep[r.Code] })
	}
	c.subsets.Store(h, subset{codes, sub})
	return sub
}

// subset is one list of codes and its rules (compiledRules.only).
type subset struct {
	codes ast.Value
	rules *compiledRules
}

// ruleSets are the compiled rule lists, by value (compileRules).
var ruleSets = newValueCache(64, compileRules)

func compiledFor(rules ast.Value) (*compiledRules, error) { return ruleSets.get(rules) }

func (c *compiledRules) forScope(scope string) *scan.RuleSet {
	if rs, ok := c.byScope[scope]; ok {
		return rs
	}
	return c.byScope["*"]
}

func compileRules(v ast.Value) (*compiledRules, error) {
	arr, ok := v.(*ast.Array)
	if !ok {
		return nil, fmt.Errorf("rules must be an array")
	}
	c := &compiledRules{byScope: map[string]*scan.RuleSet{}, extra: map[string][][2]*ast.Term{}, class: map[string]string{}}
	rules := make([]scan.Rule, 0, arr.Len())
	scopeOf := make(map[string][]string, arr.Len()) // code → its scopes, none for every scope
	scopes := map[string]bool{}
	for i := 0; i < arr.Len(); i++ {
		e := arr.Elem(i).Value
		r := scan.Rule{Code: stringField(e, "code"), Name: stringField(e, "name"), Message: stringField(e, "message"), Pattern: stringField(e, "pattern"), Except: stringField(e, "except")}
		if r.Code == "" || r.Pattern == "" {
			return nil, fmt.Errorf("rules[%d]: code and pattern are required", i)
		}
		scope := stringField(e, "scope")
		if scope == "" {
			scope = stringField(e, "target")
		}
		// A rule may name several scopes, comma-separated ("outbound,call").
		for _, s := range strings.Split(scope, ",") {
			if s = strings.TrimSpace(s); s != "" && s != "any" {
				scopes[s] = true
				scopeOf[r.Code] = append(scopeOf[r.Code], s)
			}
		}
		rules = append(rules, r)
		for _, k := range matchExtras {
			if val := stringField(e, k); val != "" {
				c.extra[r.Code] = append(c.extra[r.Code], ast.Item(keyTerm(k), ast.StringTerm(val)))
				if k == "class" {
					c.class[r.Code] = val
				}
			}
		}
	}
	// Every pattern is compiled once; each scope's set is a subset of them
	// (the unscoped rules and its own).
	full, err := scan.Compile(rules)
	if err != nil {
		return nil, err
	}
	// "*" serves texts whose scope no rule names: only the unscoped rules.
	// The request and removed scopes hold words about the call, not what
	// it does: only the rules that name them apply there.
	for scope := range namedOnly {
		scopes[scope] = true
	}
	for _, scope := range append([]string{"*"}, slices.Sorted(maps.Keys(scopes))...) {
		c.byScope[scope] = full.Subset(func(r scan.Rule) bool {
			s := scopeOf[r.Code]
			return slices.Contains(s, scope) || len(s) == 0 && !namedOnly[scope]
		})
	}
	return c, nil
}

func builtinMatch(_ rego.BuiltinContext, textsTerm, rulesTerm *ast.Term) (*ast.Term, error) {
	groups, err := texts(textsTerm.Value)
	if err != nil {
		return nil, fmt.Errorf("toolgate.match: %w", err)
	}
	c, err := compiledFor(rulesTerm.Value)
	if err != nil {
		return nil, fmt.Errorf("toolgate.match: %w", err)
	}
	return matchTerms(c, groups), nil
}

// matchTerms runs c over texts grouped by scope (scopes in order) and
// returns the matches as toolgate.match does; each is also passed to the
// optional visit.
func matchTerms(c *compiledRules, groups map[string][]scan.Text, visit ...func(scan.Match, *ast.Term)) *ast.Term {
	out := []*ast.Term{}
	for _, scope := range sortedKeys(groups) {
		for _, m := range c.forScope(scope).Match(groups[scope]) {
			items := [][2]*ast.Term{
				ast.Item(keyTerm("code"), ast.StringTerm(m.Code)),
				ast.Item(keyTerm("name"), ast.StringTerm(m.Name)),
				ast.Item(keyTerm("message"), ast.StringTerm(m.Message)),
				ast.Item(keyTerm("where"), ast.StringTerm(m.Where)),
				ast.Item(keyTerm("excerpt"), ast.StringTerm(m.Excerpt)),
			}
			items = append(items, c.extra[m.Code]...)
			t := ast.ObjectTerm(items...)
			for _, v := range visit {
				v(m, t)
			}
			out = append(out, t)
		}
	}
	return ast.ArrayTerm(out...)
}

func builtinDecode(_ rego.BuiltinContext, textsTerm *ast.Term) (*ast.Term, error) {
	groups, err := texts(textsTerm.Value)
	if err != nil {
		return nil, fmt.Errorf("toolgate.decode: %w", err)
	}
	out := []*ast.Term{}
	for _, scope := range sortedKeys(groups) {
		for _, f := range scan.Decode(groups[scope]) {
			out = append(out, findingTerm(f, scope))
		}
	}
	return ast.ArrayTerm(out...), nil
}

// builtinDeobfuscate returns, for each text with disguised words, its
// de-obfuscated forms as texts with the same where and scope.
func builtinDeobfuscate(_ rego.BuiltinContext, textsTerm *ast.Term) (*ast.Term, error) {
	groups, err := texts(textsTerm.Value)
	if err != nil {
		return nil, fmt.Errorf("toolgate.deobfuscate: %w", err)
	}
	out := []*ast.Term{}
	for _, scope := range sortedKeys(groups) {
		for _, t := range groups[scope] {
			for _, form := range scan.Deobfuscate(t.Text) {
				out = append(out, textTerm(t.Where, form, scope))
			}
		}
	}
	return ast.ArrayTerm(out...), nil
}

// findingTerm is one toolgate.decode finding.
func findingTerm(f scan.Finding, scope string) *ast.Term {
	enc := make([]*ast.Term, len(f.Encodings))
	for i, e := range f.Encodings {
		enc[i] = ast.StringTerm(e)
	}
	return ast.ObjectTerm(
		ast.Item(keyTerm("code"), ast.StringTerm(f.Code)),
		ast.Item(keyTerm("message"), ast.StringTerm(f.Message)),
		ast.Item(keyTerm("where"), ast.StringTerm(f.Where)),
		ast.Item(keyTerm("scope"), ast.StringTerm(scope)),
		ast.Item(keyTerm("encodings"), ast.ArrayTerm(enc...)),
		ast.Item(keyTerm("decoded"), ast.StringTerm(f.Decoded)),
	)
}

func builtinShell(_ rego.BuiltinContext, cmd *ast.Term) (*ast.Term, error) {
	s, ok := cmd.Value.(ast.String)
	if !ok {
		return nil, fmt.Errorf("toolgate.shell: command must be a string")
	}
	norm := shell.Normalize(string(s))
	out := make([]*ast.Term, len(norm))
	for i, n := range norm {
		out[i] = ast.StringTerm(n)
	}
	return ast.ArrayTerm(out...), nil
}

func builtinProvenance(_ rego.BuiltinContext, argsTerm, trustedTerm, untrustedTerm *ast.Term) (*ast.Term, error) {
	args, err := flatTexts(argsTerm.Value)
	if err != nil {
		return nil, fmt.Errorf("toolgate.provenance: arguments: %w", err)
	}
	untrusted, err := flatTexts(untrustedTerm.Value)
	if err != nil {
		return nil, fmt.Errorf("toolgate.provenance: untrusted: %w", err)
	}
	tarr, ok := trustedTerm.Value.(*ast.Array)
	if !ok {
		return nil, fmt.Errorf("toolgate.provenance: trusted must be an array of strings")
	}
	trusted := make([]string, 0, tarr.Len())
	for i := 0; i < tarr.Len(); i++ {
		if s, ok := tarr.Elem(i).Value.(ast.String); ok {
			trusted = append(trusted, string(s))
		}
	}
	out := []*ast.Term{}
	for _, o := range scan.Provenance(args, trusted, untrusted) {
		out = append(out, ast.ObjectTerm(
			ast.Item(keyTerm("where"), ast.StringTerm(o.Where)),
			ast.Item(keyTerm("value"), ast.StringTerm(o.Value)),
			ast.Item(keyTerm("kind"), ast.StringTerm(o.Kind)),
			ast.Item(keyTerm("block"), ast.StringTerm(o.Block)),
		))
	}
	return ast.ArrayTerm(out...), nil
}

func flatTexts(v ast.Value) ([]scan.Text, error) {
	groups, err := texts(v)
	if err != nil {
		return nil, err
	}
	var out []scan.Text
	for _, k := range sortedKeys(groups) {
		out = append(out, groups[k]...)
	}
	return out, nil
}

func sortedKeys(m map[string][]scan.Text) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	if len(keys) > 1 {
		slicesSort(keys)
	}
	return keys
}
