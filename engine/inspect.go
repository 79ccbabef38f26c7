package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/toolgate/toolgate/engine/scan"
	"github.com/toolgate/toolgate/engine/shell"
)

// toolgate.inspect(input, options) gathers, in one call, the scan facts the
// default policy decides over. It selects the texts the way the policy's data
// says (the tool's category, the config's payload keys and path key parts,
// the category sets) and runs the same scanners as toolgate.match and
// toolgate.decode. options:
//
//	"category"            the tool's registry category
//	"patterns"            suspicious-content rules (toolgate.match's rules)
//	"danger"              dangerous-command rules
//	"payload_keys"        argument names that carry payload, not control values
//	"path_key_parts"      an argument whose name contains one of these holds a path
//	"control_field_parts" for an HTTP tool, a field of a structured payload
//	                      argument whose name contains one of these is a control
//	                      value (isPayload)
//	"command_categories"  categories whose every string argument is a command
//	"path_scopes"         category → scope of its path arguments (read_path, write_path...)
//	"outbound_categories" categories whose arguments leave the host
//	"query_categories"    categories whose every string argument is a database query
//	"task_categories"     categories whose every string argument instructs another
//	                      agent (a sub-agent's task or prompt)
//	"script_suffixes"     file names a write tool's call writes a shell script to
//	                      (".sh", ".ps1"...); content starting with "#!" is one too
//	"instruction_files"   files of agents' standing instructions ("agents.md",
//	                      "claude.md", ".cursorrules"...): what a write tool writes
//	                      there is read as a task (names as for fileMatches)
//	"http_categories"     categories of generic HTTP tools (api_call, http_request)
//	"state_changing_methods" HTTP methods that change state (POST, PUT...): the URLs
//	                      of such a request of an HTTP tool are matched in scope
//	                      "http_write"
//	"command_files"       files whose lines are run later ("makefile", "dockerfile",
//	                      ".github/workflows/", "package.json"...): the command lines
//	                      in what a write tool writes there are commands
//	"command_keys"        names of fields that hold a command line ("command",
//	                      "bash_command", "entrypoint"...): such a field of an
//	                      outbound call (a job runner's API) is a command, and so is
//	                      a string a written program sets one to (shell.CodeCommands)
//	"action_verbs"        verbs a tool's name may carry (RequestedActions)
//	"generic_verbs"       words of a tool's name that stand for every action verb
//	"direct_codes"        codes of the patterns that also count in the person's
//	                      own words (jailbreak language: "developer mode enabled")
//
// It returns
//
//	"texts"              toolgate.texts(input), and "decoded": what the untrusted
//	                     texts decode to (scan.Decode), when untrusted text is in view
//	"control_arguments"  the argument texts that are not payload (isPayload)
//	"spoofed_arguments"  zero-width or bidi characters, mixed-script
//	                     homoglyph words and punycode labels that decode to
//	                     look-alikes in the control arguments
//	                     (scan.Disguised), computed for every call; in what
//	                     a write tool writes, bidi overrides or isolates, and
//	                     homoglyph words inside an address (inAddress)
//	"danger_hits"        danger matches over the danger texts: every string argument of a
//	                     command category, written and canonical (scope "command");
//	                     path arguments in their category's path scope, and also as
//	                     "read_path" when that scope is another; every argument of an
//	                     outbound category (scope "outbound"); every string
//	                     argument of a query category (scope "query") or of a
//	                     task category (scope "task"); and, when a write tool
//	                     writes a shell script, the strings it writes (not
//	                     the path, not what an edit replaces: old_string...)
//	                     as commands (a script written is a command deferred);
//	                     a task's text also as "read_path" and the command
//	                     lines written into it (shell.Fragments) as commands;
//	                     what a write tool writes to an instruction file, as
//	                     a task, and to a command file, its command lines;
//	                     an outbound or query tool's object and array arguments
//	                     also whole, as JSON, in its scope;
//	                     what a write tool writes, in scope "written"; the
//	                     whole arguments of an outbound call, in "message",
//	                     read only by the rules that target it, and of any
//	                     other call, in "fields" (in both, a payload argument
//	                     given as JSON text is read as what it parses to);
//	                     the words an edit takes
//	                     away (removedWords: those of old_string that
//	                     new_string no longer holds, or of a unified diff's
//	                     "-" lines that its "+" lines no longer hold), in
//	                     "removed", read only by the rules that target it;
//	                     the URLs of a state-changing HTTP call, in
//	                     "http_write";
//	                     every string argument none of the above reads (a
//	                     log line, a utility or MCP tool's parameter), in
//	                     "call", read by the rules for any scope and those
//	                     that target it;
//	                     and, for an outbound category, the trusted texts
//	                     joined by newlines (scope "request", where "context")
//	                     when they name a URL, host or e-mail address the
//	                     call sends to (scan.NamesDestination): the person's
//	                     request, read only by the rules that target it
//	"pattern_hits"       pattern matches over the argument and untrusted texts
//	"encoded"            toolgate.decode over the same texts
//	"decoded_hits"       pattern matches over what they decode to
//	"injection_hits"     the pattern and decoded hits of class "injection" in the
//	                     untrusted blocks (where "context.")
//	"deobfuscated_hits"  the injection rules over the untrusted blocks once
//	                     de-obfuscated (toolgate.deobfuscate: spaced-out letters
//	                     joined, leetspeak read as letters), without the hits the
//	                     plain text already gave (same code and where)
//	"requested_actions"  [{"verb", "where"}]: verbs of the tool's name (and,
//	                     for a state-changing HTTP call, of what the call says
//	                     it does: httpActionWords) that the untrusted text
//	                     asks for and the trusted text never mentions
//	                     (scan.RequestedActions)
//	"direct_hits"        the direct_codes patterns over the person's own words:
//	                     the trusted blocks whose source is not "system"
//	                     (contextTexts), whether or not untrusted text is in view;
//	                     a pattern whose target is "person" counts only here
//
// The six from "pattern_hits" to "requested_actions" are computed only when
// untrusted text is in view, and are empty otherwise.
func init() {
	rego.RegisterBuiltin2(&rego.Function{
		Name:        "toolgate.inspect",
		Description: "Selects a request's texts by the policy's data and returns every scan fact the default policy uses (danger, pattern, encoding and injection hits) in one call.",
		Decl:        types.NewFunction(types.Args(types.Named("input", types.A), types.Named("options", types.NewObject(nil, types.NewDynamicProperty(types.S, types.A)))), types.Named("facts", types.A)),
	}, builtinInspect)
}

// argText is one string argument: its input path, text and top-level key.
func builtinInspect(_ rego.BuiltinContext, in, optsTerm *ast.Term) (*ast.Term, error) {
	obj, ok := in.Value.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("toolgate.inspect: input must be an object")
	}
	opts, ok := optsTerm.Value.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("toolgate.inspect: options must be an object")
	}
	category := stringField(opts, "category")
	// The string-set options; a non-string element is an error in all but
	// payload_keys, where it simply never matches.
	var payloadKeys, pathParts, controlParts, scriptSuffixes, instructionFiles, commandFiles, commandKeys, httpCategories, writeMethods, directCodes ast.Value
	for _, o := range []struct {
		key    string
		strict bool
		into   *ast.Value
	}{
		{"payload_keys", false, &payloadKeys},
		{"path_key_parts", true, &pathParts},
		{"control_field_parts", true, &controlParts},
		{"script_suffixes", true, &scriptSuffixes},
		{"instruction_files", true, &instructionFiles},
		{"command_files", true, &commandFiles},
		{"command_keys", true, &commandKeys},
		{"http_categories", false, &httpCategories},
		{"state_changing_methods", true, &writeMethods},
		{"direct_codes", true, &directCodes},
	} {
		v, err := stringsIn(opts, o.key, o.strict)
		if err != nil {
			return nil, err
		}
		*o.into = v
	}
	var keyNames []string
	eachString(commandKeys, func(k string) { keyNames = append(keyNames, strings.ToLower(k)) })
	// A generic HTTP tool's body is the request itself: its fields that
	// name a destination or a principal (control_field_parts) are control
	// values; a message's body says what it says, whatever its fields are
	// called. Its URLs are matched in "http_write" when the request changes
	// state (its method is one of state_changing_methods).
	isHTTP := contains(httpCategories, category)
	if !isHTTP {
		controlParts = nil
	}
	method, _ := getPath(obj, "action", "arguments", "method").(ast.String)
	changesState := isHTTP && contains(writeMethods, strings.ToUpper(string(method)))
	// Which scopes the tool's category puts its arguments in.
	var isCommand, isOutbound, isQuery, isTask bool
	for _, set := range []struct {
		key string
		in  *bool
	}{
		{"command_categories", &isCommand},
		{"outbound_categories", &isOutbound},
		{"query_categories", &isQuery},
		{"task_categories", &isTask},
	} {
		cats, err := stringsIn(opts, set.key, false)
		if err != nil {
			return nil, err
		}
		*set.in = contains(cats, category)
	}
	pathScope, hasPathScope := "", false
	if ps, ok := getPath(opts, "path_scopes").(ast.Object); ok {
		if t := ps.Get(ast.StringTerm(category)); t != nil {
			s, ok := t.Value.(ast.String)
			if !ok {
				return nil, fmt.Errorf("toolgate.inspect: path_scopes[%q] must be a string", category)
			}
			pathScope, hasPathScope = string(s), true
		}
	} else if getPath(opts, "path_scopes") != nil {
		return nil, fmt.Errorf("toolgate.inspect: path_scopes must be an object")
	}

	// The texts, as toolgate.texts collects them.
	args := argumentTexts(obj)
	untrusted, trustedTerms, person := contextTexts(obj)
	argTerms := make([]*ast.Term, len(args))
	controlTerms := []*ast.Term{}
	var control []scan.Text
	for i, a := range args {
		argTerms[i] = ast.ObjectTerm(
			ast.Item(keyTerm("where"), ast.StringTerm(a.where)),
			ast.Item(keyTerm("text"), ast.StringTerm(a.text)),
			ast.Item(keyTerm("scope"), keyTerm("arguments")),
			ast.Item(keyTerm("key"), ast.NewTerm(a.key)),
		)
		if !isPayload(a, payloadKeys, controlParts) {
			controlTerms = append(controlTerms, argTerms[i])
			control = append(control, scan.Text{Where: a.where, Text: a.text})
			continue
		}
		// A body sent as one string (form-encoded, or JSON text) has
		// fields all the same: those that name a destination are control
		// values, as in a structured body ("address=T9yD...&amount=4750").
		if controlParts != nil {
			for _, f := range bodyFields(a) {
				if !isPayload(f, payloadKeys, controlParts) {
					controlTerms = append(controlTerms, textTerm(f.where, f.text, "arguments"))
					control = append(control, scan.Text{Where: f.where, Text: f.text})
				}
			}
		}
	}
	untrustedTerms := make([]*ast.Term, len(untrusted))
	for i, u := range untrusted {
		untrustedTerms[i] = textTerm(u.Where, u.Text, "context")
	}

	// Danger texts, by scope, without duplicates.
	danger := map[string][]scan.Text{}
	seen := map[[3]string]bool{}
	scoped := map[string]bool{} // the wheres some scope holds
	add := func(scope, where, text string) {
		k := [3]string{scope, where, text}
		if !seen[k] {
			seen[k] = true
			scoped[where] = true
			danger[scope] = append(danger[scope], scan.Text{Where: where, Text: text})
		}
	}
	isPath := func(key ast.String) bool {
		lk := strings.ToLower(string(key))
		return anyString(pathParts, func(p string) bool { return strings.Contains(lk, p) })
	}
	// What a text decodes to counts as the text: a command, query,
	// message or file that arrives base64, hex, percent-encoded or escaped
	// is the command, query, message or file it decodes to.
	addDecoded := func(scope, where, text string, normalize bool) {
		forms := scan.Decodings(text)
		if scope == "outbound" && strings.IndexByte(text, '%') >= 0 {
			if u, err := url.QueryUnescape(text); err == nil && u != text {
				forms = append(forms, u)
			}
		}
		for _, f := range forms {
			add(scope, where, f)
			if normalize {
				for _, c := range shell.Normalize(f) {
					add(scope, where, c)
				}
			}
		}
	}
	addCommand := func(a argText) {
		add("command", a.where, a.text)
		for _, c := range shell.Normalize(a.text) {
			add("command", a.where, c)
		}
		addDecoded("command", a.where, a.text, true)
	}
	// A write tool writing a shell script: its path has a script suffix, or
	// a text it writes starts with "#!". What an edit replaces (old_string,
	// old_str...) is not written: removing a dangerous line is no danger.
	written := func(a argText) bool { return !isPath(a.key) && !replaced(a.where) }
	writesScript := pathScope == "write_path" && slices.ContainsFunc(args, func(a argText) bool {
		if isPath(a.key) {
			lt := strings.ToLower(a.text)
			return anyString(scriptSuffixes, func(s string) bool { return strings.HasSuffix(lt, s) })
		}
		return written(a) && strings.HasPrefix(a.text, "#!")
	})
	// A write tool writing a file whose lines are run later (a Makefile, a
	// Dockerfile, a CI workflow, package.json's scripts: command_files):
	// the command lines in what it writes are commands deferred, found as
	// in prose (shell.Fragments) and line by line (shell.FileCommands).
	writesCommands := pathScope == "write_path" && slices.ContainsFunc(args, func(a argText) bool {
		return isPath(a.key) && fileMatches(a.text, commandFiles)
	})
	// A write tool writing an agent's standing instructions (AGENTS.md,
	// CLAUDE.md, .cursorrules: instruction_files) writes a task for every
	// agent that later reads them.
	writesInstructions := pathScope == "write_path" && slices.ContainsFunc(args, func(a argText) bool {
		return isPath(a.key) && fileMatches(a.text, instructionFiles)
	})
	// An instruction to another agent: read as words (task), for the
	// credential files it names (read_path), and for the command lines
	// written into it (command).
	addFragments := func(a argText) { // the command lines written into a text
		for _, f := range shell.Fragments(a.text) {
			addCommand(argText{where: a.where, text: f, key: a.key})
		}
	}
	addTask := func(a argText) {
		add("task", a.where, a.text)
		addDecoded("task", a.where, a.text, false)
		add("read_path", a.where, a.text)
		addFragments(a)
	}
	for _, a := range args {
		isWritten := pathScope == "write_path" && written(a) // writesScript and the others imply the scope
		if isCommand || writesScript && isWritten {
			addCommand(a)
		}
		if isTask || writesInstructions && isWritten {
			addTask(a)
		}
		if isWritten {
			add("written", a.where, a.text)
			addDecoded("written", a.where, a.text, false) // atob('...') in a page
			// What a program written hands to a shell, whatever its file.
			for _, c := range shell.CodeCommands(a.text, keyNames) {
				addCommand(argText{where: a.where, text: c, key: a.key})
			}
		}
		if pathScope == "write_path" && !isPath(a.key) {
			var words string
			if replaced(a.where) {
				words = removedWords(a.text, replacement(args, a.where))
			} else if old, new, ok := diffSides(a.text); ok {
				words = removedWords(old, new)
			}
			if words != "" {
				add(removedScope, a.where, words)
			}
		}
		if changesState && hasScheme(a.text) {
			add("http_write", a.where, a.text)
		}
		if writesCommands && isWritten {
			// The lines the prose reading found too are matched once.
			lines := shell.Fragments(a.text)
			for _, l := range shell.FileCommands(a.text) {
				if !slices.Contains(lines, l) {
					lines = append(lines, l)
				}
			}
			for _, l := range lines {
				addCommand(argText{where: a.where, text: l, key: a.key})
			}
		}
		if hasPathScope && isPath(a.key) {
			add(pathScope, a.where, a.text)
			if pathScope != "read_path" { // credential files count whatever a file tool does with them
				add("read_path", a.where, a.text)
			}
		}
		if isOutbound {
			add("outbound", a.where, a.text)
			addDecoded("outbound", a.where, a.text, false)
			// A job runner's or remote shell's API runs what it is given.
			if slices.Contains(keyNames, lastKey(a.where)) {
				addCommand(a)
			}
		}
		if isQuery {
			add("query", a.where, a.text)
			addDecoded("query", a.where, a.text, false)
		}
		// An argument no scope above reads (a log line, a utility or MCP
		// tool's parameter, a search query) is read by the rules for any
		// scope, in scope "call": a note to the call's reviewer, a grant
		// of the warehouse's top role, can be anywhere; and what a tool
		// is given leaves for its server (DANGER-100, 101).
		if !scoped[a.where] {
			add(callScope, a.where, a.text)
		}
	}
	// An outbound or database call's structured arguments are also
	// matched whole, as they are sent ({"role": "reader", "type":
	// "anyone"}, a database_write's {"sanctions_screening": "PASSED"}): a
	// rule may need a field's name with its value.
	// And the whole outbound call, in scope "message" (read only by rules
	// that name it): a rule may need the recipient and what is sent
	// together. Any other call whole is in scope "fields", read by the
	// rules for any scope, when it holds a value that is no string: a flag
	// with its value is no string argument (a payment's
	// "requires_second_approval": false), and arguments that are all
	// strings are read already.
	// A body sent as JSON text is read whole as the object it sends: a
	// rule reads {"body": {"enabled": false}} the same whether the tool was
	// given the body as an object or as a string.
	v, ok := getPath(obj, "action", "arguments").(ast.Object)
	if ok {
		v = withParsedBodies(v, payloadKeys)
	}
	switch {
	case ok && isOutbound:
		add(messageScope, "action.arguments", v.String())
	case ok && holdsScalar(v):
		add(fieldsScope, "action.arguments", v.String())
	}
	if ok && (isOutbound || isQuery) {
		v.Foreach(func(k, val *ast.Term) {
			key, isString := k.Value.(ast.String)
			switch val.Value.(type) {
			case ast.Object, *ast.Array:
				if !isString {
					return
				}
				if isOutbound {
					add("outbound", "action.arguments."+string(key), val.Value.String())
				}
				if isQuery {
					add("query", "action.arguments."+string(key), val.Value.String())
				}
			}
		})
	}
	argTexts := make([]scan.Text, len(args))
	for i, a := range args {
		argTexts[i] = scan.Text{Where: a.where, Text: a.text}
	}
	// The request: the person's own words, joined, when they name where
	// an outbound call sends (a "send it to ..." said turns earlier
	// counts with the turn that gave the address).
	words := make([]string, len(trustedTerms))
	for i, t := range trustedTerms {
		words[i] = string(t.Value.(ast.String))
	}
	if isOutbound && len(words) > 0 {
		if request := strings.Join(words, "\n"); scan.NamesDestination(argTexts, request) {
			add(requestScope, "context", request)
		}
	}
	// A process's first decision compiles both rule lists: the patterns on
	// another goroutine while this one compiles the danger rules.
	if len(untrusted) > 0 || directCodes != nil && len(person) > 0 {
		ruleSets.prefetch(valueOf(opts, "patterns"))
	}
	dangerRules, err := compiledFor(valueOf(opts, "danger"))
	if err != nil {
		return nil, fmt.Errorf("toolgate.inspect: danger: %w", err)
	}
	dangerHits := matchTerms(dangerRules, danger)

	var spoofed []*ast.Term
	for _, f := range scan.Disguised(control) {
		spoofed = append(spoofed, findingTerm(f, "arguments"))
	}
	// What a write tool writes counts too, for two disguises alone: code
	// with bidi overrides or isolates in it reads otherwise than it runs
	// (Trojan Source; a right-to-left mark in prose does not count), and an
	// e-mail address, URL or domain with look-alike letters in it
	// (payouts@sunrеisen-partner.de, a Cyrillic е, in a payout config)
	// sends whatever uses it elsewhere (a mixed-script word in prose does
	// not count), and so does a key or value that spells letters or
	// digits in backslash escapes ("\u0061\u006c..." for "alarm_enabled" in
	// a config), which no encoder writes.
	if pathScope == "write_path" {
		for _, a := range args {
			if !written(a) {
				continue
			}
			for _, f := range scan.Disguised([]scan.Text{{Where: a.where, Text: a.text}}) {
				if f.Code == "ENCODED-008" && strings.ContainsAny(a.text, bidiOverrides) || f.Code == "ENCODED-009" && inAddress(a.text, f.Offset) || f.Code == "ENCODED-006" {
					spoofed = append(spoofed, findingTerm(f, "arguments"))
				}
			}
		}
	}

	empty := ast.ArrayTerm()
	// The person's own words: jailbreak language typed by whoever is
	// talking to the agent (the direct_codes patterns over the trusted
	// blocks that are not the system prompt), with or without untrusted
	// text in view.
	directHits := empty
	if directCodes != nil && len(person) > 0 {
		patterns, err := compiledFor(valueOf(opts, "patterns"))
		if err != nil {
			return nil, fmt.Errorf("toolgate.inspect: patterns: %w", err)
		}
		directHits = matchTerms(patterns.only(directCodes), map[string][]scan.Text{"person": person})
	}
	patternHits, encodedTerm, decodedHits, injectionHits, disguisedHits, requestedTerm := empty, empty, empty, empty, empty, empty
	var decodedTerms []*ast.Term // what the untrusted texts decode to
	if len(untrusted) > 0 {
		verbs, err := verbsFor(getPath(opts, "action_verbs"), getPath(opts, "generic_verbs"))
		if err != nil {
			return nil, err
		}
		if verbs != nil {
			trusted := make([]scan.Text, len(words))
			for i, w := range words {
				trusted[i] = scan.Text{Text: w}
			}
			tool, _ := getPath(obj, "action", "type").(ast.String)
			name := string(tool)
			if changesState {
				name += httpActionWords(args)
			}
			var req []*ast.Term
			for _, r := range verbs.RequestedActions(name, trusted, untrusted) {
				req = append(req, ast.ObjectTerm(
					ast.Item(keyTerm("verb"), ast.StringTerm(r.Verb)),
					ast.Item(keyTerm("where"), ast.StringTerm(r.Where)),
				))
			}
			requestedTerm = ast.ArrayTerm(req...)
		}
		patterns, err := compiledFor(valueOf(opts, "patterns"))
		if err != nil {
			return nil, fmt.Errorf("toolgate.inspect: patterns: %w", err)
		}
		scanned := map[string][]scan.Text{"context": untrusted}
		if len(args) > 0 {
			scanned["arguments"] = argTexts
		}
		var injection []*ast.Term
		plain := map[[2]string]bool{} // code and where of each injection hit
		isInjection := func(m scan.Match) bool {
			return patterns.class[m.Code] == "injection" && strings.HasPrefix(m.Where, "context.")
		}
		collect := func(m scan.Match, t *ast.Term) {
			if isInjection(m) {
				injection = append(injection, t)
				plain[[2]string{m.Code, m.Where}] = true
			}
		}
		hits := matchTerms(patterns, scanned, collect)
		decoded := map[string][]scan.Text{}
		var enc []*ast.Term
		for _, scope := range sortedKeys(scanned) {
			for _, f := range scan.Decode(scanned[scope]) {
				enc = append(enc, findingTerm(f, scope))
				decoded[scope] = append(decoded[scope], scan.Text{Where: f.Where, Text: f.Decoded})
			}
		}
		dhits := matchTerms(patterns, decoded, collect)
		// Disguised injection language: only what the plain text did not
		// already show counts.
		var forms []scan.Text
		for _, u := range untrusted {
			for _, f := range scan.Deobfuscate(u.Text) {
				forms = append(forms, scan.Text{Where: u.Where, Text: f})
			}
		}
		var disguised []*ast.Term
		if len(forms) > 0 {
			seen := map[[3]string]bool{}
			matchTerms(patterns, map[string][]scan.Text{"context": forms}, func(m scan.Match, t *ast.Term) {
				k := [3]string{m.Code, m.Where, m.Excerpt}
				if isInjection(m) && !plain[[2]string{m.Code, m.Where}] && !seen[k] {
					seen[k] = true
					disguised = append(disguised, t)
				}
			})
		}
		for _, t := range decoded["context"] {
			decodedTerms = append(decodedTerms, textTerm(t.Where, t.Text, "context"))
		}
		patternHits, encodedTerm, decodedHits = hits, ast.ArrayTerm(enc...), dhits
		injectionHits, disguisedHits = ast.ArrayTerm(injection...), ast.ArrayTerm(disguised...)
	}

	return ast.ObjectTerm(
		ast.Item(keyTerm("texts"), ast.ObjectTerm(
			ast.Item(keyTerm("arguments"), ast.ArrayTerm(argTerms...)),
			ast.Item(keyTerm("untrusted"), ast.ArrayTerm(untrustedTerms...)),
			ast.Item(keyTerm("trusted"), ast.ArrayTerm(trustedTerms...)),
			ast.Item(keyTerm("decoded"), ast.ArrayTerm(decodedTerms...)),
		)),
		ast.Item(keyTerm("control_arguments"), ast.ArrayTerm(controlTerms...)),
		ast.Item(keyTerm("spoofed_arguments"), ast.ArrayTerm(spoofed...)),
		ast.Item(keyTerm("danger_hits"), dangerHits),
		ast.Item(keyTerm("pattern_hits"), patternHits),
		ast.Item(keyTerm("encoded"), encodedTerm),
		ast.Item(keyTerm("decoded_hits"), decodedHits),
		ast.Item(keyTerm("injection_hits"), injectionHits),
		ast.Item(keyTerm("deobfuscated_hits"), disguisedHits),
		ast.Item(keyTerm("requested_actions"), requestedTerm),
		ast.Item(keyTerm("direct_hits"), directHits),
	), nil
}

// bidiOverrides are the bidi controls that reorder what follows them
// (U+202A..U+202E embeddings and overrides, U+2066..U+2069 isolates).
const bidiOverrides = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

// fileMatches reports whether path names one of the files of names: a
// name with a slash matches a part of the path (".github/workflows/"), one
// starting with a dot its end (".mk"), any other its base name
// ("makefile"); all in lower case, with backslashes read as slashes.
func fileMatches(path string, names ast.Value) bool {
	p := strings.ToLower(strings.ReplaceAll(path, `\`, "/"))
	base := p[strings.LastIndexByte(p, '/')+1:]
	return anyString(names, func(n string) bool {
		switch {
		case strings.Contains(n, "/"):
			return strings.Contains(p, n)
		case strings.HasPrefix(n, "."):
			return strings.HasSuffix(base, n)
		}
		return base == n
	})
}

// isPayload reports whether a is payload rather than a control value: its
// argument is one of payloadKeys, and it is that argument's text, an
// element of a list of texts (a message body, attachments), or a field of
// a structured payload ({"body": {...}}, as HTTP tools send) whose name
// does not say it holds a destination or a principal: a field whose name
// contains one of controlParts ("email", "url", "account", "recipient"...)
// is a control value, since the address, endpoint or account of the
// change sits there; ids, dates and prose fields stay payload.
func isPayload(a argText, payloadKeys, controlParts ast.Value) bool {
	if !contains(payloadKeys, string(a.key)) {
		return false
	}
	rest := strings.TrimPrefix(a.where, "action.arguments."+string(a.key))
	if strings.IndexByte(rest, '.') < 0 { // the text itself, or list elements
		return true
	}
	field := lastKey(a.where)
	return !anyString(controlParts, func(p string) bool { return strings.Contains(field, p) })
}

// formBodyRE: a form-encoded body, two fields or more (coin=USDT&address=...).
var formBodyRE = regexp.MustCompile(`^[\w.\[\]%-]+=[^&\s]*(?:&[\w.\[\]%-]+=[^&\s]*)+$`)

// bodyFields are the fields of a body written as one string, form-encoded
// or JSON, each with its path under a's (action.arguments.body.address);
// none when a's text is neither.
func bodyFields(a argText) []argText {
	text := strings.TrimSpace(a.text)
	var out []argText
	switch {
	case len(text) > 1 && (text[0] == '{' || text[0] == '['):
		av := jsonValue(text)
		if av == nil {
			return nil
		}
		walkStrings(av, a.where, func(where, s string) {
			if where != a.where {
				out = append(out, argText{where, s, a.key})
			}
		})
	case formBodyRE.MatchString(text):
		q, err := url.ParseQuery(text)
		if err != nil {
			return nil
		}
		for _, k := range slices.Sorted(maps.Keys(q)) {
			for _, v := range q[k] {
				out = append(out, argText{a.where + "." + k, v, a.key})
			}
		}
	}
	return out
}

// verbSets are the prepared action_verbs and generic_verbs options, by
// value: [action_verbs, generic_verbs or null].
var verbSets = newValueCache(16, prepareVerbs)

func prepareVerbs(v ast.Value) (*scan.Verbs, error) {
	pair := v.(*ast.Array)
	checked, err := checkStrings(pair.Elem(0).Value, "action_verbs", true)
	if err != nil {
		return nil, err
	}
	var words, generic []string
	eachString(checked, func(s string) { words = append(words, s) })
	if g := pair.Elem(1).Value; g != ast.NullValue {
		if g, err = checkStrings(g, "generic_verbs", true); err != nil {
			return nil, err
		}
		eachString(g, func(s string) { generic = append(generic, s) })
	}
	return scan.NewVerbs(words, generic...), nil
}

// verbsFor is the prepared action_verbs option v with the generic_verbs
// option g (arrays or sets of strings; g may be nil), nil when v is absent.
func verbsFor(v, g ast.Value) (*scan.Verbs, error) {
	if v == nil {
		return nil, nil
	}
	if g == nil {
		g = ast.NullValue
	}
	return verbSets.get(ast.NewArray(ast.NewTerm(v), ast.NewTerm(g)))
}

func valueOf(obj ast.Object, key string) ast.Value {
	if v := getPath(obj, key); v != nil {
		return v
	}
	return ast.NewArray()
}

// stringsIn is the optional array or set of strings at key (nil when
// absent). strict: an element that is not a string is an error; otherwise,
// as with Rego's `in`, it simply never matches.
func stringsIn(obj ast.Object, key string, strict bool) (ast.Value, error) {
	return checkStrings(getPath(obj, key), key, strict)
}

// checkStrings is stringsIn for the value v of the option key.
func checkStrings(v ast.Value, key string, strict bool) (ast.Value, error) {
	bad := false
	switch x := v.(type) {
	case nil:
		return nil, nil
	case *ast.Array, ast.Set:
		if strict {
			x.(interface{ Foreach(func(*ast.Term)) }).Foreach(func(t *ast.Term) {
				if _, ok := t.Value.(ast.String); !ok {
					bad = true
				}
			})
		}
	default:
		bad = true
	}
	if bad {
		return nil, fmt.Errorf("toolgate.inspect: %s must be an array or set of strings", key)
	}
	return v, nil
}

// eachString calls f with every string element of an array or set.
func eachString(v ast.Value, f func(string)) {
	c, ok := v.(interface{ Foreach(func(*ast.Term)) })
	if !ok {
		return
	}
	c.Foreach(func(t *ast.Term) {
		if s, ok := t.Value.(ast.String); ok {
			f(string(s))
		}
	})
}

// anyString reports whether f holds for a string element of an array or set.
func anyString(v ast.Value, f func(string) bool) bool {
	found := false
	eachString(v, func(x string) { found = found || f(x) })
	return found
}

// lastKey is the name of the field a where points at, lowercase:
// "commands" for action.arguments.body.commands[0].
func lastKey(where string) string {
	for strings.HasSuffix(where, "]") {
		i := strings.LastIndexByte(where, '[')
		if i < 0 {
			break
		}
		where = where[:i]
	}
	return strings.ToLower(where[strings.LastIndexByte(where, '.')+1:])
}

// withParsedBodies returns args with each top-level payload argument
// (payload_keys: body, data...) that is JSON text of an object or a list
// replaced by the value it parses to; args itself when none is.
func withParsedBodies(args ast.Object, payloadKeys ast.Value) ast.Object {
	out := args
	args.Foreach(func(k, val *ast.Term) {
		s, isString := val.Value.(ast.String)
		if !isString {
			return
		}
		text := strings.TrimSpace(string(s))
		if len(text) < 2 || text[0] != '{' && text[0] != '[' {
			return
		}
		if key, ok := k.Value.(ast.String); !ok || !contains(payloadKeys, string(key)) {
			return
		}
		pv := jsonValue(text)
		if pv == nil {
			return
		}
		if out == args {
			out = args.Copy()
		}
		out.Insert(k, ast.NewTerm(pv))
	})
	return out
}

// jsonValue returns what text, JSON, parses to, as an AST value; nil when
// it does not parse.
func jsonValue(text string) ast.Value {
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return nil
	}
	av, err := ast.InterfaceToValue(v)
	if err != nil {
		return nil
	}
	return av
}

// holdsScalar reports whether v holds, at any depth, a value that is
// neither a string nor a collection: a boolean, a number or null.
func holdsScalar(v ast.Value) bool {
	switch x := v.(type) {
	case ast.Boolean, ast.Number, ast.Null:
		return true
	case ast.Object:
		found := false
		x.Foreach(func(_, t *ast.Term) { found = found || holdsScalar(t.Value) })
		return found
	case *ast.Array:
		found := false
		x.Foreach(func(t *ast.Term) { found = found || holdsScalar(t.Value) })
		return found
	}
	return false
}

// contains reports whether the array or set v holds the string s.
func contains(v ast.Value, s string) bool {
	return anyString(v, func(x string) bool { return x == s })
}

// actionFields name the body fields of an HTTP call that say what it does
// ({"command": "unlock"}, {"action": "open"}).
var actionFields = map[string]bool{"action": true, "command": true, "cmd": true, "operation": true, "op": true}

// httpActionWords returns what a state-changing HTTP call says it does, as
// words to read beside the tool's name (api_call says nothing): the words
// of its URLs' paths ("/v1/refunds", "/users/42/lifecycle/reset_factors"),
// "delete" when it or a request it batches uses DELETE, and the values of
// body fields named in actionFields. POST, PUT and PATCH say only that
// something changes, so they add nothing.
func httpActionWords(args []argText) string {
	var b strings.Builder
	for _, a := range args {
		field := strings.ToLower(a.where[strings.LastIndexAny(a.where, ".]")+1:])
		switch {
		case strings.HasPrefix(a.text, "https://") || strings.HasPrefix(a.text, "http://"):
			if u, err := url.Parse(a.text); err == nil {
				b.WriteString(" " + u.Path)
			}
		case field == "method" && strings.EqualFold(a.text, "DELETE"):
			b.WriteString(" delete")
		case actionFields[field] && len(a.text) <= 64:
			b.WriteString(" " + a.text)
		}
	}
	return b.String()
}

// replaced reports whether the argument at where is what an edit replaces
// (old_string, old_str, oldText...): its field name starts with "old".
func replaced(where string) bool {
	field := where[strings.LastIndexByte(where, '.')+1:]
	return len(field) >= 3 && strings.EqualFold(field[:3], "old")
}

// replacement returns the text an edit writes in place of the one at
// where (old_string → new_string, oldText → newText, in the same object),
// "" when it writes none.
func replacement(args []argText, where string) string {
	if !replaced(where) {
		return ""
	}
	dot := strings.LastIndexByte(where, '.') + 1
	field := where[dot:]
	newField := "new" + field[3:]
	if field[0] == 'O' {
		newField = "New" + field[3:]
	}
	for _, a := range args {
		if a.where == where[:dot]+newField {
			return a.text
		}
	}
	return ""
}

// diffSides returns the lines a unified diff takes away and the lines it
// adds, without their "-" and "+" markers; ok is false when s holds no
// hunk ("@@" at the start of a line). The "---" and "+++" file headers are
// neither. A patch handed to apply_patch or git apply is read as an edit's
// old and new text are.
func diffSides(s string) (old, new string, ok bool) {
	if !strings.HasPrefix(s, "@@") && !strings.Contains(s, "\n@@") {
		return "", "", false
	}
	var o, n strings.Builder
	for line := range strings.Lines(s) {
		switch {
		case strings.HasPrefix(line, "---") || strings.HasPrefix(line, "+++"):
		case line[0] == '-':
			o.WriteString(line[1:])
		case line[0] == '+':
			n.WriteString(line[1:])
		}
	}
	return o.String(), n.String(), true
}

// maxRemovedWords bounds the words removedWords returns.
const maxRemovedWords = 512

// removedWords returns, space-separated and in order, the words (runs of
// letters, digits, _ and -) of old that new does not hold at all: what an
// edit takes away. A line rewritten with the same names takes nothing
// away; a check whose call is gone (hmac.compare_digest, csrf_protect, a
// codeql job) does.
func removedWords(old, new string) string {
	isWord := func(r rune) bool {
		return r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	kept := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(new), func(r rune) bool { return !isWord(r) }) {
		kept[w] = true
	}
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(old), func(r rune) bool { return !isWord(r) }) {
		if !kept[w] && len(out) < maxRemovedWords {
			kept[w] = true // each word once
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

// hasScheme reports whether s starts as a URL does: a scheme, then "://"
// (https://, and mcp://github/... as MCP bridges write their tools' URLs).
func hasScheme(s string) bool {
	i := strings.Index(s, "://")
	if i < 1 || i > 16 {
		return false
	}
	for k := 0; k < i; k++ {
		c := s[k] | 0x20
		if !('a' <= c && c <= 'z') && !(k > 0 && ('0' <= s[k] && s[k] <= '9' || s[k] == '+' || s[k] == '.' || s[k] == '-')) {
			return false
		}
	}
	return true
}

// inAddress reports whether the word at offset i of s is part of an e-mail
// address, a URL or a domain name: the run of characters around it up to
// white space, quotes or brackets holds an "@" or "://", or is a dotted
// name.
func inAddress(s string, i int) bool {
	isEdge := func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune("\"'`<>()[]{},;", r)
	}
	start := strings.LastIndexFunc(s[:i], isEdge) + 1
	end := len(s)
	if j := strings.IndexFunc(s[i:], isEdge); j >= 0 {
		end = i + j
	}
	tok := strings.TrimRight(s[start:end], ".:")
	if strings.Contains(tok, "@") || strings.Contains(tok, "://") {
		return true
	}
	dot := strings.IndexByte(tok, '.')
	return dot > 0 && dot < len(tok)-1
}
