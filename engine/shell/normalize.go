package shell

import (
	"slices"
	"strings"
)

const (
	maxInput   = 64 << 10 // bytes of input looked at
	maxDepth   = 3        // levels of nested command strings followed
	maxOutputs = 4096     // canonical strings returned
)

// Normalize returns canonical forms of a shell command line, one string per pipeline,
// plus the pipelines of every nested command string it can see (sh -c '...', bash -c, eval,
// $(...), backticks, powershell -Command/-c, cmd /c, xargs ... sh -c, watch, the
// command ssh HOST runs, and the -a command of an ansible ad-hoc run).
//
// The line is read as POSIX shell; when it looks like PowerShell or cmd it is
// read in that dialect as well. The result has no duplicates and is never nil
// for a line with a command in it. Normalize never panics and its work is
// bounded by the input size.
func Normalize(cmd string) []string {
	if len(cmd) > maxInput {
		cmd = cmd[:maxInput]
	}
	n := &normalizer{budget: 8*len(cmd) + 4096}
	_, all := n.source(cmd, 0, modePosix)
	if m := detectMode(cmd); m != modePosix {
		_, more := n.source(cmd, 0, m)
		all = append(all, more...)
	}
	// The line once more with the parts it builds itself put together
	// (expand.go): variables, aliases, joined strings, echo | rev | sh.
	if x, ok := expand(cmd); ok {
		_, more := n.source(x, 0, modePosix)
		all = append(all, more...)
		if m := detectMode(x); m != modePosix {
			_, more := n.source(x, 0, m)
			all = append(all, more...)
		}
	}
	out := make([]string, 0, len(all))
	var seen map[string]struct{}
	if len(all) > 16 {
		seen = make(map[string]struct{}, len(all))
	}
	for _, s := range all {
		if s == "" {
			continue
		}
		if seen != nil {
			if _, dup := seen[s]; dup {
				continue
			}
			seen[s] = struct{}{}
		} else if slices.Contains(out, s) {
			continue
		}
		out = append(out, s)
		if len(out) == maxOutputs {
			break
		}
	}
	return out
}

// normalizer carries the state shared by one Normalize call.
type normalizer struct {
	produced int // strings produced so far, to bound pathological inputs
	budget   int // bytes of output left; nested text is not expanded past it
}

// source normalises src read in dialect m at nesting depth. own holds the
// plain canonical form of each of its pipelines; all holds every rendering
// (own, the sudo-marked variants, then the nested command strings).
func (n *normalizer) source(src string, depth int, m mode) (own, all []string) {
	if depth > maxDepth || n.produced > maxOutputs || n.budget < 0 {
		s := collapse(src)
		return []string{s}, nil
	}
	var later []string
	l := &lexer{n: n, src: src, m: m, depth: depth, later: &later, toks: make([]token, 0, len(src)/6+4)}
	l.run()
	for _, p := range parse(l.toks, m) {
		plain, marked := n.renderPipeline(p, depth, m, &later)
		if plain == "" {
			continue
		}
		own = append(own, plain)
		all = append(all, plain)
		if marked != plain {
			all = append(all, marked)
		}
	}
	all = append(all, later...)
	n.produced += len(all)
	for _, s := range own {
		n.budget -= len(s)
	}
	return own, all
}

// collapse turns every run of white space into one space and trims the ends.
func collapse(s string) string {
	if !strings.ContainsAny(s, "\t\n\r\f\v") && !strings.Contains(s, "  ") &&
		(s == "" || s[0] != ' ' && s[len(s)-1] != ' ') {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

type simple struct {
	words  []string
	redirs []token
}

type pipeline []simple

// keywords are shell reserved words skipped where a command name is expected.
var keywords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true,
	"while": true, "until": true, "{": true, "}": true, "!": true, "function": true,
	"case": true, "esac": true,
}

func parse(toks []token, m mode) []pipeline {
	var (
		out   []pipeline
		cur   pipeline
		sc    simple
		words = make([]string, 0, len(toks)) // shared backing array for all simple commands
		start = 0
	)
	endSimple := func() {
		sc.words = words[start:len(words):len(words)]
		start = len(words)
		if len(sc.words) > 0 || len(sc.redirs) > 0 {
			cur = append(cur, sc)
		}
		sc = simple{}
	}
	endPipeline := func() {
		endSimple()
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur = nil
	}
	for _, t := range toks {
		switch t.kind {
		case tWord:
			if len(words) == start && m == modePosix && !t.quoted && keywords[t.text] {
				continue
			}
			words = append(words, t.text)
		case tRedir:
			sc.redirs = append(sc.redirs, t)
		case tPipe:
			endSimple()
		case tSep:
			endPipeline()
		}
	}
	endPipeline()
	return out
}

func (n *normalizer) renderPipeline(p pipeline, depth int, m mode, later *[]string) (plain, marked string) {
	n.fedToShell(p, depth, m, later)
	if len(p) == 1 {
		return n.renderSimple(p[0], depth, m, later)
	}
	plains := make([]string, 0, len(p))
	markeds := make([]string, 0, len(p))
	for _, sc := range p {
		ps, ms := n.renderSimple(sc, depth, m, later)
		if ps == "" {
			continue
		}
		plains = append(plains, ps)
		markeds = append(markeds, ms)
	}
	plain = strings.Join(plains, " | ")
	if slices.Equal(plains, markeds) {
		return plain, plain
	}
	return plain, strings.Join(markeds, " | ")
}

// fedToShell normalises text that a pipeline feeds to a shell on its standard
// input: "echo 'rm -rf /' | sh", "cat <<EOF | bash".
func (n *normalizer) fedToShell(p pipeline, depth int, m mode, later *[]string) {
	if len(p) < 2 || depth >= maxDepth || m != modePosix || len(p[0].words) == 0 {
		return
	}
	fed := false
	for _, sc := range p[1:] {
		if len(sc.words) > 0 && shells[canonName(sc.words[0], m)] {
			if _, ok := shellScript(sc.words[1:]); !ok {
				fed = true
			}
		}
	}
	if !fed {
		return
	}
	var texts []string
	switch canonName(p[0].words[0], m) {
	case "echo", "printf":
		if args := p[0].words[1:]; len(args) > 0 {
			for len(args) > 0 && strings.HasPrefix(args[0], "-") {
				args = args[1:]
			}
			texts = append(texts, strings.Join(args, " "))
		}
	}
	for _, r := range p[0].redirs {
		switch r.text {
		case "<<", "<<-":
			texts = append(texts, r.body)
		case "<<<":
			texts = append(texts, r.target)
		}
	}
	for _, t := range texts {
		_, all := n.source(t, depth+1, modePosix)
		*later = append(*later, all...)
	}
}

// isAssignment reports whether w is NAME=value.
func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		if !isIdent(w[i]) {
			return false
		}
	}
	return w[0] < '0' || w[0] > '9'
}

// renderSimple renders one simple command; marked keeps sudo/doas in front.
func (n *normalizer) renderSimple(sc simple, depth int, m mode, later *[]string) (plain, marked string) {
	words := sc.words
	if m == modePosix {
		k := 0
		for k < len(words) && isAssignment(words[k]) {
			k++
		}
		if k == len(words) { // only assignments: HISTFILE=/dev/null
			return strings.Join(words, " "), strings.Join(words, " ")
		}
		words = words[k:]
	}
	var markers []string
	for guard := 0; guard < 8 && len(words) > 0; guard++ {
		rest, marker, ok := n.unwrap(words, depth, m, later)
		if !ok {
			break
		}
		if marker != "" {
			markers = append(markers, marker)
		}
		if len(rest) == 0 {
			words = nil // "sudo -s": the marker is the whole command
			break
		}
		words = rest
	}
	var b strings.Builder
	if len(words) > 0 {
		n.renderCommand(&b, words, depth, m, later, sc.redirs)
	}
	for _, r := range sc.redirs {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.text)
		dup := (strings.HasSuffix(r.text, ">&") || strings.HasSuffix(r.text, "<&")) &&
			(r.target == "-" || r.target != "" && allDigits(r.target))
		if !dup && r.target != "" {
			b.WriteByte(' ')
		}
		b.WriteString(collapse(r.target))
	}
	plain = b.String()
	if len(markers) == 0 {
		return plain, plain
	}
	if plain == "" {
		s := strings.Join(markers, " ")
		return s, s
	}
	return plain, strings.Join(markers, " ") + " " + plain
}

// canonName is the canonical command name of a word: basename, lowercased,
// ".exe" removed, PowerShell aliases mapped.
func canonName(w string, m mode) string {
	if strings.HasPrefix(w, "(") || strings.HasPrefix(w, "$(") || strings.HasPrefix(w, "<(") {
		return w // a group or substitution in command position
	}
	if m == modePosix {
		if j := strings.LastIndexByte(w, '/'); j >= 0 && j < len(w)-1 {
			w = w[j+1:]
		}
	} else {
		if j := strings.LastIndexAny(w, `/\`); j >= 0 && j < len(w)-1 {
			w = w[j+1:]
		}
		w = strings.TrimPrefix(w, "@")
	}
	w = strings.ToLower(w)
	w = strings.TrimSuffix(w, ".exe")
	if c, ok := psOnlyAliases[w]; ok {
		return c
	}
	if m == modePS {
		if c, ok := psAliases[w]; ok {
			return c
		}
	}
	return w
}

// specKey is the table key of a command name: python3.12 → python.
func specKey(name string) string {
	k := strings.TrimRight(name, "0123456789.")
	if k == "" {
		return name
	}
	return k
}

// unwrap removes one wrapper from words. ok is false when words[0] is not a
// wrapper. marker is the text kept for the sudo-marked rendering.
func (n *normalizer) unwrap(words []string, depth int, m mode, later *[]string) (rest []string, marker string, ok bool) {
	name := canonName(words[0], m)
	w, isWrapper := wrappers[name]
	if !isWrapper {
		return nil, "", false
	}
	args := words[1:]
	opts, rest := splitOptions(args, w.value, w.longValue)
	switch name {
	case "env":
		// env -S "cmd args" splits its string; skip VAR=val assignments.
		var split []string
		for _, o := range opts {
			if strings.HasPrefix(o, "-S ") {
				split = append(split, strings.Fields(o[3:])...)
			}
		}
		for len(rest) > 0 && (isAssignment(rest[0]) || rest[0] == "-") {
			rest = rest[1:]
		}
		rest = append(split, rest...)
	case "timeout":
		if len(rest) > 0 {
			rest = rest[1:] // the duration
		}
	case "watch":
		// watch runs its operands through sh -c: normalise them as a command
		// string and keep "watch ..." itself as the command.
		if len(rest) > 0 && depth < maxDepth {
			_, all := n.source(strings.Join(rest, " "), depth+1, modePosix)
			*later = append(*later, all...)
		}
		return nil, "", false
	case "ssh":
		// ssh HOST CMD... runs CMD through a shell on HOST: normalise it
		// as a command string, as for watch, and keep "ssh ..." itself.
		if len(rest) > 1 && depth < maxDepth {
			_, all := n.source(strings.Join(rest[1:], " "), depth+1, modePosix)
			*later = append(*later, all...)
		}
		return nil, "", false
	case "ansible":
		// ansible HOSTS -m shell -a CMD: the module's arguments (-a,
		// --args), which the shell, command and raw modules run, are
		// normalised as a command string; options and the host pattern
		// come in any order. "ansible ..." itself stays the command.
		for k, a := range args {
			var cmd string
			switch {
			case (a == "-a" || a == "--args") && k+1 < len(args):
				cmd = args[k+1]
			case strings.HasPrefix(a, "--args="):
				cmd = a[len("--args="):]
			}
			if cmd != "" && depth < maxDepth {
				_, all := n.source(cmd, depth+1, modePosix)
				*later = append(*later, all...)
			}
		}
		return nil, "", false
	case "sudo", "doas":
		marker = strings.Join(append([]string{name}, opts...), " ")
	}
	if len(rest) == 0 && marker == "" {
		return nil, "", false // "exec 3<>/dev/tcp/..." and the like: keep the wrapper as the command
	}
	return rest, marker, true
}

// splitOptions splits leading options from args, getopt style: short
// clusters split, letters in value take the rest of the cluster or the next
// argument, long options in longValue take the next argument.
func splitOptions(args []string, value string, longValue map[string]bool) (opts, rest []string) {
	for k := 0; k < len(args); k++ {
		a := args[k]
		if a == "--" {
			return opts, args[k+1:]
		}
		if len(a) < 2 || a[0] != '-' {
			return opts, args[k:]
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasVal := strings.Cut(a, "=")
			name = strings.ToLower(name)
			if !hasVal && longValue[name[2:]] && k+1 < len(args) {
				val, hasVal = args[k+1], true
				k++
			}
			if hasVal {
				opts = append(opts, name+" "+val)
			} else {
				opts = append(opts, name)
			}
			continue
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			if strings.IndexByte(value, c) >= 0 {
				val := a[j+1:]
				if val == "" && k+1 < len(args) {
					val = args[k+1]
					k++
				}
				opts = append(opts, "-"+string(c)+" "+val)
				break
			}
			opts = append(opts, "-"+string(c))
		}
	}
	return opts, nil
}
