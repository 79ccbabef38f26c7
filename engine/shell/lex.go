package shell

import (
	"strconv"
	"strings"
)

// mode is the dialect a piece of text is read in.
type mode uint8

const (
	modePosix mode = iota // sh, bash, zsh: backslash escapes, $(...), backticks
	modePS                // PowerShell: backtick escapes, $(...) and (...) groups
	modeCmd               // cmd.exe: caret escapes, backslash is a path separator
)

type tokKind uint8

const (
	tWord  tokKind = iota
	tSep           // ; && || & newline ( ) { } (PowerShell): ends a pipeline
	tPipe          // | or |&: next simple command of the pipeline
	tRedir         // a redirection; text is the operator, target its word
)

type token struct {
	kind   tokKind
	text   string
	target string // redirection target, or heredoc delimiter
	body   string // heredoc body
	quoted bool   // the word had quotes or escapes (not a keyword, no brace expansion)
}

// lexer splits one source string into tokens, resolving quotes and escapes
// and normalising nested command strings through its normalizer.
type lexer struct {
	n        *normalizer
	src      string
	i        int
	m        mode
	depth    int
	toks     []token
	heredocs []int     // indices of heredoc redirections waiting for their body
	later    *[]string // canonical forms found in nested command strings
}

const maxTokens = 8192

// escaped consumes an escape character (PowerShell's backtick, cmd's caret)
// and writes the byte it escapes; an escaped newline is a line continuation.
func (l *lexer) escaped(b *strings.Builder) {
	if nx := l.peek(1); nx != 0 && nx != '\n' {
		b.WriteByte(nx)
	}
	l.i += 2
}

func (l *lexer) peek(k int) byte {
	if l.i+k < len(l.src) {
		return l.src[l.i+k]
	}
	return 0
}

func (l *lexer) sep(s string) {
	if n := len(l.toks); n > 0 && l.toks[n-1].kind == tSep {
		return
	}
	l.toks = append(l.toks, token{kind: tSep, text: s})
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' }

func (l *lexer) run() {
	for l.i < len(l.src) && len(l.toks) < maxTokens {
		c := l.src[l.i]
		switch {
		case isSpace(c):
			l.i++
		case c == '\n':
			l.i++
			l.sep("\n")
			l.readHeredocs()
		case c == ';':
			l.i++
			l.sep(";")
		case c == '&':
			switch {
			case l.peek(1) == '&':
				l.i += 2
				l.sep("&&")
			case l.peek(1) == '>' && l.m == modePosix:
				l.redirect("")
			case l.m == modePS: // call operator
				l.i++
			default:
				l.i++
				l.sep("&")
			}
		case c == '|':
			if l.peek(1) == '|' {
				l.i += 2
				l.sep("||")
				continue
			}
			l.i++
			if l.peek(0) == '&' {
				l.i++
			}
			l.toks = append(l.toks, token{kind: tPipe, text: "|"})
		case c == '(' && l.m == modePS:
			l.word()
		case c == '(' || c == ')':
			l.i++
			l.sep(string(c))
		case (c == '{' || c == '}') && l.m == modePS:
			l.i++
			l.sep(string(c))
		case (c == '<' || c == '>') && l.peek(1) == '(' && l.m == modePosix:
			l.word() // process substitution
		case c == '<' || c == '>':
			l.redirect("")
		case c == '#' && l.m != modeCmd:
			if j := strings.IndexByte(l.src[l.i:], '\n'); j >= 0 {
				l.i += j
			} else {
				l.i = len(l.src)
			}
		default:
			l.word()
		}
	}
}

// word reads one word and appends it (or, for "2>" and the like, a redirection).
func (l *lexer) word() {
	w, quoted, ok := l.readWord()
	if !ok {
		return
	}
	if !quoted && w != "" && allDigits(w) && (l.peek(0) == '>' || l.peek(0) == '<') {
		l.redirect(w)
		return
	}
	if !quoted && l.m == modePosix {
		if parts, ok := braceExpansion(w); ok {
			for _, p := range parts {
				l.toks = append(l.toks, token{kind: tWord, text: p})
			}
			return
		}
	}
	l.toks = append(l.toks, token{kind: tWord, text: w, quoted: quoted})
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// braceExpansion splits an unquoted {a,b,c} word, the "{rm,-rf,/}" trick.
func braceExpansion(w string) ([]string, bool) {
	if len(w) < 4 || w[0] != '{' || w[len(w)-1] != '}' {
		return nil, false
	}
	inner := w[1 : len(w)-1]
	if !strings.Contains(inner, ",") || strings.ContainsAny(inner, "{}") {
		return nil, false
	}
	var parts []string
	for _, p := range strings.Split(inner, ",") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return parts, len(parts) > 0
}

// isBreak reports whether c ends an unquoted word.
func (l *lexer) isBreak(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '\f', '\v', ';', '&', '|', '<', '>':
		return true
	case '(', ')':
		return l.m != modePS
	case '{', '}':
		return l.m == modePS
	}
	return false
}

// readWord reads an unquoted-or-quoted word at l.i. ok is false when nothing
// but a word separator (an unquoted $IFS) was read.
func (l *lexer) readWord() (string, bool, bool) {
	// Fast path: a word of plain characters is a substring of the source.
	start := l.i
	for j := l.i; j <= len(l.src); j++ {
		if j == len(l.src) || l.isBreak(l.src[j]) {
			if j > start {
				l.i = j
				return l.src[start:j], false, true
			}
			break
		}
		if l.special(l.src[j]) {
			break
		}
	}
	var b strings.Builder
	had, quoted := false, false
	// Process substitution <(...) and >(...).
	if l.m == modePosix && (l.peek(0) == '<' || l.peek(0) == '>') && l.peek(1) == '(' {
		op := l.src[l.i]
		inner, end := scanParen(l.src, l.i+1, l.m)
		l.i = end
		b.WriteByte(op)
		b.WriteByte('(')
		b.WriteString(l.nested(inner, modePosix))
		b.WriteByte(')')
		had = true
	}
	for l.i < len(l.src) {
		c := l.src[l.i]
		if l.isBreak(c) {
			break
		}
		switch l.m {
		case modePosix:
			switch c {
			case '\\':
				quoted, had = true, true
				if nx := l.peek(1); nx == '\n' {
					l.i += 2
				} else if nx != 0 {
					b.WriteByte(nx)
					l.i += 2
				} else {
					l.i++
				}
				continue
			case '\'':
				quoted, had = true, true
				l.singleQuote(&b)
				continue
			case '"':
				quoted, had = true, true
				l.doubleQuote(&b)
				continue
			case '$':
				if l.dollar(&b, false) {
					if had || b.Len() > 0 {
						return b.String(), quoted, true
					}
					continue
				}
				had = true
				continue
			case '`':
				had = true
				l.backtick(&b)
				continue
			}
		case modePS:
			switch c {
			case '`':
				quoted, had = true, true
				l.escaped(&b)
				continue
			case '\'':
				quoted, had = true, true
				l.singleQuote(&b)
				continue
			case '"':
				quoted, had = true, true
				l.doubleQuote(&b)
				continue
			case '$':
				had = true
				l.dollar(&b, false)
				continue
			case '(':
				if b.Len() > 0 && !strings.ContainsAny(b.String(), ".)]$") {
					return b.String(), quoted, true // IEX(...): the name ends at the group
				}
				had = true
				inner, end := scanParen(l.src, l.i, l.m)
				l.i = end
				b.WriteByte('(')
				if b.Len() == 1 {
					b.WriteString(l.nested(inner, modePS)) // an expression argument
				} else {
					b.WriteString(stripQuotes(inner)) // a method call's arguments
				}
				b.WriteByte(')')
				continue
			}
		case modeCmd:
			switch c {
			case '^':
				quoted, had = true, true
				l.escaped(&b)
				continue
			case '"':
				quoted, had = true, true
				l.doubleQuote(&b)
				continue
			case '%':
				had = true
				l.percent(&b)
				continue
			}
		}
		b.WriteByte(c)
		l.i++
		had = true
	}
	return b.String(), quoted, had
}

// special reports whether c needs more than copying inside an unquoted word.
func (l *lexer) special(c byte) bool {
	switch l.m {
	case modePosix:
		return c == '\\' || c == '\'' || c == '"' || c == '$' || c == '`' || c == '<' || c == '>'
	case modePS:
		return c == '`' || c == '\'' || c == '"' || c == '$' || c == '('
	default:
		return c == '^' || c == '"' || c == '%'
	}
}

func (l *lexer) singleQuote(b *strings.Builder) {
	l.i++ // opening quote
	for l.i < len(l.src) {
		j := strings.IndexByte(l.src[l.i:], '\'')
		if j < 0 {
			b.WriteString(l.src[l.i:])
			l.i = len(l.src)
			return
		}
		b.WriteString(l.src[l.i : l.i+j])
		l.i += j + 1
		if l.m == modePS && l.peek(0) == '\'' { // '' is a quote inside a PowerShell string
			b.WriteByte('\'')
			l.i++
			continue
		}
		return
	}
}

func (l *lexer) doubleQuote(b *strings.Builder) {
	l.i++ // opening quote
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case c == '"':
			l.i++
			if l.m != modePosix && l.peek(0) == '"' { // "" inside a Windows string
				b.WriteByte('"')
				l.i++
				continue
			}
			return
		case c == '\\' && l.m == modePosix:
			nx := l.peek(1)
			switch nx {
			case '$', '`', '"', '\\':
				b.WriteByte(nx)
				l.i += 2
			case '\n':
				l.i += 2
			default:
				b.WriteByte(c)
				l.i++
			}
		case c == '`' && l.m == modePS:
			if nx := l.peek(1); nx != 0 {
				b.WriteByte(nx)
			}
			l.i += 2
		case c == '`' && l.m == modePosix:
			l.backtick(b)
		case c == '$' && l.m != modeCmd:
			l.dollar(b, true)
		case c == '%' && l.m == modeCmd:
			l.percent(b)
		default:
			b.WriteByte(c)
			l.i++
		}
	}
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// varName reports whether src at i spells the variable name (case-insensitively
// if fold) not followed by another identifier character.
func varName(src string, i int, name string, fold bool) bool {
	if len(src)-i < len(name) {
		return false
	}
	s := src[i : i+len(name)]
	if s != name && !(fold && strings.EqualFold(s, name)) {
		return false
	}
	return i+len(name) == len(src) || !isIdent(src[i+len(name)])
}

// dollar handles a '$' at l.i. It returns true when it read an unquoted $IFS,
// which separates words.
func (l *lexer) dollar(b *strings.Builder, inQuotes bool) bool {
	src, i := l.src, l.i
	if l.m == modePS {
		switch {
		case strings.HasPrefix(strings.ToLower(src[i:min(len(src), i+5)]), "$env:"):
			j := i + 5
			for j < len(src) && isIdent(src[j]) {
				j++
			}
			name := strings.ToLower(src[i+5 : j])
			if name == "userprofile" || name == "home" {
				b.WriteByte('~')
			} else {
				b.WriteString("$env:" + name)
			}
			l.i = j
		case varName(src, i+1, "HOME", true):
			b.WriteByte('~')
			l.i += 5
		case strings.HasPrefix(src[i:], "$("):
			inner, end := scanParen(src, i+1, l.m)
			l.i = end
			b.WriteString("$(" + l.nested(inner, modePS) + ")")
		default:
			b.WriteByte('$')
			l.i++
		}
		return false
	}
	rest := src[i:]
	switch {
	case strings.HasPrefix(rest, "${IFS}") || varName(src, i+1, "IFS", false):
		if strings.HasPrefix(rest, "${IFS}") {
			l.i += 6
		} else {
			l.i += 4
		}
		// $IFS$9 and ${IFS}$1: an empty positional parameter after it.
		if l.peek(0) == '$' && l.peek(1) >= '0' && l.peek(1) <= '9' {
			l.i += 2
		}
		if inQuotes {
			b.WriteByte(' ')
			return false
		}
		return true
	case strings.HasPrefix(rest, "${HOME}"):
		b.WriteByte('~')
		l.i += 7
	case varName(src, i+1, "HOME", false):
		b.WriteByte('~')
		l.i += 5
	case strings.HasPrefix(rest, "$@") || strings.HasPrefix(rest, "$*"):
		l.i += 2 // empty outside a function: the "r$@m" trick
	case strings.HasPrefix(rest, "$'") && !inQuotes:
		l.ansiC(b)
	case strings.HasPrefix(rest, "$(("):
		_, end := scanParen(src, i+1, l.m)
		b.WriteString(src[i:end])
		l.i = end
	case strings.HasPrefix(rest, "$("):
		inner, end := scanParen(src, i+1, l.m)
		l.i = end
		b.WriteString("$(" + l.nested(inner, modePosix) + ")")
	case strings.HasPrefix(rest, "${"):
		j := strings.IndexByte(rest, '}')
		if j < 0 {
			j = len(rest) - 1
		}
		b.WriteString(rest[:j+1])
		l.i += j + 1
	default:
		b.WriteByte('$')
		l.i++
	}
	return false
}

// ansiC decodes a $'...' string: \xHH, \NNN, \uHHHH and the usual letters.
func (l *lexer) ansiC(b *strings.Builder) {
	l.i += 2
	src := l.src
	for l.i < len(src) {
		c := src[l.i]
		if c == '\'' {
			l.i++
			return
		}
		if c != '\\' || l.i+1 >= len(src) {
			b.WriteByte(c)
			l.i++
			continue
		}
		nx := src[l.i+1]
		l.i += 2
		switch nx {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'x', 'u', 'U':
			maxLen := map[byte]int{'x': 2, 'u': 4, 'U': 8}[nx]
			j := l.i
			for j < len(src) && j-l.i < maxLen && isHex(src[j]) {
				j++
			}
			if v, err := strconv.ParseUint(src[l.i:j], 16, 32); err == nil && j > l.i {
				if nx == 'x' {
					b.WriteByte(byte(v))
				} else {
					b.WriteRune(rune(v))
				}
			}
			l.i = j
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := l.i - 1
			for j < len(src) && j-(l.i-1) < 3 && src[j] >= '0' && src[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(src[l.i-1:j], 8, 16)
			b.WriteByte(byte(v))
			l.i = j
		default:
			b.WriteByte(nx)
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// backtick reads a `...` command substitution and writes it as $(...).
func (l *lexer) backtick(b *strings.Builder) {
	l.i++
	var inner strings.Builder
	for l.i < len(l.src) {
		c := l.src[l.i]
		if c == '`' {
			l.i++
			break
		}
		if c == '\\' && l.i+1 < len(l.src) && (l.src[l.i+1] == '`' || l.src[l.i+1] == '\\' || l.src[l.i+1] == '$') {
			inner.WriteByte(l.src[l.i+1])
			l.i += 2
			continue
		}
		inner.WriteByte(c)
		l.i++
	}
	b.WriteString("$(" + l.nested(inner.String(), modePosix) + ")")
}

// percent handles a cmd %VAR% reference.
func (l *lexer) percent(b *strings.Builder) {
	rest := l.src[l.i+1:]
	j := strings.IndexByte(rest, '%')
	if j <= 0 || j > 40 || strings.ContainsAny(rest[:j], " \t\n\"") {
		b.WriteByte('%')
		l.i++
		return
	}
	name := strings.ToLower(rest[:j])
	if name == "userprofile" || name == "home" {
		b.WriteByte('~')
	} else {
		b.WriteString("%" + name + "%")
	}
	l.i += j + 2
}

// redirect reads a redirection operator at l.i (fd, if any, already read) and its target.
func (l *lexer) redirect(fd string) {
	ops := [...]string{"&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<&", "<>", ">", "<"}
	op := ""
	for _, o := range ops {
		if strings.HasPrefix(l.src[l.i:], o) {
			op = o
			break
		}
	}
	if op == "" { // cannot happen: called on '<', '>' or "&>"
		l.i++
		return
	}
	l.i += len(op)
	if (op == "<<" || op == "<<<") && l.m != modePosix {
		return
	}
	for l.i < len(l.src) && isSpace(l.src[l.i]) {
		l.i++
	}
	target := ""
	if l.i < len(l.src) && !l.isBreak(l.src[l.i]) {
		target, _, _ = l.readWord()
	}
	if fd == "1" && op[0] == '>' {
		fd = ""
	}
	if op == ">|" {
		op = ">"
	}
	l.toks = append(l.toks, token{kind: tRedir, text: fd + op, target: target})
	if op == "<<" || op == "<<-" {
		l.heredocs = append(l.heredocs, len(l.toks)-1)
	}
}

// readHeredocs reads the bodies of the heredocs started on the line just ended.
func (l *lexer) readHeredocs() {
	for _, k := range l.heredocs {
		delim := l.toks[k].target
		var body strings.Builder
		for l.i < len(l.src) {
			line := l.src[l.i:]
			if j := strings.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
				l.i += j + 1
			} else {
				l.i = len(l.src)
			}
			if strings.TrimSpace(line) == delim {
				break
			}
			body.WriteString(line)
			body.WriteByte('\n')
		}
		l.toks[k].body = body.String()
	}
	l.heredocs = l.heredocs[:0]
}

// scanParen returns the text inside the parenthesis opening at src[open] and
// the index just after its closing parenthesis (len(src) if unbalanced).
func scanParen(src string, open int, m mode) (string, int) {
	depth := 0
	for i := open; i < len(src); i++ {
		switch c := src[i]; c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return src[open+1 : i], i + 1
			}
		case '\\':
			if m == modePosix {
				i++
			}
		case '`':
			if m == modePS {
				i++
			}
		case '\'', '"':
			if c == '\'' && m == modeCmd {
				continue
			}
			if j := strings.IndexByte(src[i+1:], c); j >= 0 {
				i += j + 1
			} else {
				i = len(src)
			}
		}
	}
	if open+1 > len(src) {
		return "", len(src)
	}
	return src[open+1:], len(src)
}

// stripQuotes removes quote characters and PowerShell escapes from raw text.
func stripQuotes(s string) string {
	if !strings.ContainsAny(s, "'\"`") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\'' || r == '"' || r == '`' {
			return -1
		}
		return r
	}, s)
}

// nested normalises a nested command string and returns its plain pipelines
// joined by "; " for use inside the enclosing word; everything it found goes
// to l.later.
func (l *lexer) nested(src string, m mode) string {
	own, all := l.n.source(src, l.depth+1, m)
	*l.later = append(*l.later, all...)
	return strings.Join(own, "; ")
}
