package shell

import (
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/engine/scan"
)

// Spellings that build a command out of parts the line itself defines,
// undone before the line is normalised once more (Normalize adds the
// canonical forms of the result to those of the line as written):
//
//   - cmd's ^ escapes between letters are dropped (p^ow^er^sh^ell);
//   - quoted strings joined with "+" ('Inv'+'oke-Exp'+'ression', "ev"+"al")
//     are one string, and so is a list of them joined with nothing between
//     (Python's ''.join(['by','pass']), JavaScript's ['by','pass'].join(''));
//   - variables and aliases set on the line are substituted where they are
//     used later on it (a=r; b=m; $a$b -rf ~ and alias t='rm -rf'; t ~ are
//     rm -rf ~; $c='iex'; & $c ... is iex ...; $a='Set-Mp'; iex ($a+'Pref...')
//     is iex ('Set-MpPref...')), up to the next setting of
//     the same name (t=cu; t=${t}rl; $t is curl); a value may use $HOME,
//     and a loop sets its variable to its words (for k in ~/.ssh/id_*; do
//     curl -F f=@$k ... is curl -F f=@~/.ssh/id_* ...; for s in a b; do
//     systemctl mask "$s" is systemctl mask "a b");
//   - arrays set on the line are read where they are used later on it
//     (S=(gsu til); ${S[0]}${S[1]} is gsutil; ${S[@]} is every word), and
//     $(printf '%s' b a c k) is the words it joins (back);
//   - text an echo or printf passes through rev, a ROT13 tr, base64 -d or
//     xxd -r -p is replaced by what comes out, where it is piped into a
//     shell or read back by $(...) (echo 'hs | ...' | rev | sh).
//
// Each step runs a bounded number of rounds over the text (64 joins, 16
// substitutions, 8 filter runs) and gives up when what it builds passes
// about twice the input; values are taken literally, as written, and
// nothing is run.

// quotedList is up to 64 quoted strings separated by commas.
const quotedList = `(?:'[^'\n]*'|"[^"\n]*")(?:\s*,\s*(?:'[^'\n]*'|"[^"\n]*")){0,63}`

var (
	// concatRE is a quoted string, "+", and another string in the same quotes.
	concatRE = regexp.MustCompile(`'([^'\n]*)'\s*\+\s*'|"([^"\n]*)"\s*\+\s*"`)
	// joinListRE is a list of quoted strings joined by an empty string:
	// ''.join([...]) or "".join((...)), and [...].join('').
	joinListRE = regexp.MustCompile(`(?:''|"")\s*\.\s*join\(\s*[\[(]\s*(` + quotedList + `)\s*,?\s*[\])]\s*\)|\[\s*(` + quotedList + `)\s*,?\s*\]\s*\.\s*join\(\s*(?:''|"")\s*\)`)
	// quotedRE is one quoted string of such a list.
	quotedRE = regexp.MustCompile(`'([^'\n]*)'|"([^"\n]*)"`)
	// assignRE is NAME=value at the start of a command, with export, local,
	// readonly, declare or set in front, or PowerShell's $name = value.
	assignRE = regexp.MustCompile(`(?:^|[;&|\n({"]\s*)(?:(?:export|local|readonly|declare|typeset)\s+(?:-\w+\s+)?|set\s+)?(\$?)([A-Za-z_]\w{0,40})\s*=\s*('[^'\n]*'|"[^"\n]*"|[^\s;&|'"]+)`)
	// forRE is a loop over up to 16 words: for NAME in WORD...; do.
	forRE = regexp.MustCompile(`(?:^|[;&|\n(]\s*)for\s+([A-Za-z_]\w{0,40})\s+in\s+((?:[^\s;&|'"]+|'[^'\n]*'|"[^"\n]*")(?:[ \t]+(?:[^\s;&|'"]+|'[^'\n]*'|"[^"\n]*")){0,15})\s*;\s*do\b`)
	// arrayRE is NAME=(word word ...) at the start of a command, with
	// declare -a, local -a or typeset -a in front.
	arrayRE = regexp.MustCompile(`(?:^|[;&|\n({]\s*)(?:(?:declare|local|typeset|readonly)\s+-a\s+)?([A-Za-z_]\w{0,40})=\(([^()\n]{0,400})\)`)
	// printfJoinRE is $(printf '%s' word word ...), which joins its words.
	printfJoinRE = regexp.MustCompile(`\$\(\s*printf\s+(?:'%s'|"%s"|%s)\s+([^()$;&|'"\n]{1,400})\)`)
	// homeRE is $HOME, which the canonical form writes ~ anyway.
	homeRE = regexp.MustCompile(`\$(?:HOME\b|\{HOME\})`)
	// aliasRE is alias NAME=value (POSIX) or Set-Alias / New-Alias NAME value.
	aliasRE = regexp.MustCompile(`(?i)(?:^|[;&|\n]\s*)(?:alias\s+([\w.-]{1,40})=('[^'\n]*'|"[^"\n]*"|[^\s;&|]+)|(?:set|new)-alias\s+(?:-name\s+)?([\w.-]{1,40})\s+(?:-value\s+)?('[^'\n]*'|"[^"\n]*"|[^\s;&|]+))`)
	// filteredRE is echo or printf of a word, then one to four filters, then
	// a pipe into a shell or the end of a $(...).
	filteredRE = regexp.MustCompile(`(?i)\b(?:echo|printf)\s+(?:-[ne]+\s+)?('[^'\n]+'|"[^"\n]+"|[^\s|;&'"()]+)((?:\s*\|\s*(?:rev|tr\s+\S+\s+\S+|base64\s+(?:-d|-D|--decode)|xxd\s+(?:-r\s+-p|-p\s+-r|-rp|-pr))){1,4})\s*(\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b|\))`)
)

// expand returns text with the spellings above undone, and whether
// anything changed.
func expand(text string) (string, bool) {
	out := stripCarets(text)
	out = joinConcat(out)
	out = joinLists(out)
	out = substituteArrays(out)
	out = joinPrintf(out)
	out = substituteLocals(out)
	out = joinConcat(out) // what the variables held may be strings joined with "+": $a+$b
	out = runFilters(out)
	return out, out != text
}

// stripCarets removes cmd's escape character between two letters or
// digits: "p^ow^er^sh^ell", "I^E^X".
func stripCarets(s string) string {
	if strings.IndexByte(s, '^') < 0 {
		return s
	}
	b := []byte(s)
	out := b[:0]
	for i, c := range b {
		if c == '^' && i > 0 && i+1 < len(b) && isAlnum(b[i-1]) && isAlnum(b[i+1]) {
			continue
		}
		out = append(out, c)
	}
	return string(out)
}

func isAlnum(c byte) bool { return isLetter(c) || isDigit(c) }

// joinConcat joins quoted strings concatenated with "+".
func joinConcat(s string) string {
	for range 64 {
		loc := concatRE.FindStringIndex(s)
		if loc == nil {
			return s
		}
		// 'abc' + 'def' → 'abcdef': drop the closing quote, the plus and
		// the opening quote between the two strings.
		m := s[loc[0]:loc[1]]
		q := m[0]
		close := strings.IndexByte(m[1:], q) + 1
		s = s[:loc[0]] + m[:close] + s[loc[1]:]
	}
	return s
}

// joinLists replaces each list of quoted strings joined by an empty string
// with the one string it builds: ['by','pass'] joined by an empty string is
// 'bypass'.
func joinLists(s string) string {
	if !strings.Contains(s, "join") {
		return s
	}
	return joinListRE.ReplaceAllStringFunc(s, func(m string) string {
		var b strings.Builder
		for _, q := range quotedRE.FindAllStringSubmatch(m, -1) {
			b.WriteString(q[1] + q[2])
		}
		if strings.ContainsRune(b.String(), '\'') {
			return `"` + b.String() + `"`
		}
		return "'" + b.String() + "'"
	})
}

// substituteArrays replaces ${NAME[i]}, ${NAME[@]} and ${NAME[*]} by the
// words of the array NAME the line set before them, up to its next setting.
func substituteArrays(s string) string {
	if !strings.Contains(s, "=(") {
		return s
	}
	limit := 2*len(s) + 1024
	for range 8 {
		ms := arrayRE.FindAllStringSubmatchIndex(s, 8)
		changed := false
		for k, m := range ms {
			name, words := s[m[2]:m[3]], shellWords(s[m[4]:m[5]])
			rest, after := s[m[1]:], ""
			for _, n := range ms[k+1:] {
				if s[n[2]:n[3]] == name {
					rest, after = s[m[1]:n[0]], s[n[0]:]
					break
				}
			}
			if r, ok := replaceElements(rest, name, words, limit); ok {
				s, changed = s[:m[1]]+r+after, true
				break
			}
		}
		if !changed || len(s) > limit {
			return s
		}
	}
	return s
}

// replaceElements replaces ${name[i]}, ${name[@]} and ${name[*]} in s by
// words; an index past the end is the empty word, as in bash. It gives up
// (false) when the result would pass limit bytes.
func replaceElements(s, name string, words []string, limit int) (string, bool) {
	open := "${" + name + "["
	var b strings.Builder
	changed := false
	for {
		j := strings.Index(s, open)
		if j < 0 {
			b.WriteString(s)
			break
		}
		end := strings.Index(s[j+len(open):], "]}")
		if end < 0 {
			b.WriteString(s)
			break
		}
		idx := s[j+len(open) : j+len(open)+end]
		var value string
		switch {
		case idx == "@" || idx == "*":
			value = strings.Join(words, " ")
		case idx != "" && len(idx) <= 4 && allDigits(idx):
			if i, err := strconv.Atoi(idx); err == nil && i < len(words) {
				value = words[i]
			}
		default: // an index the line computes: not followed
			b.WriteString(s[:j+len(open)])
			s = s[j+len(open):]
			continue
		}
		b.WriteString(s[:j])
		b.WriteString(value)
		s = s[j+len(open)+end+2:]
		changed = true
		if b.Len() > limit {
			return "", false
		}
	}
	return b.String(), changed
}

// shellWords splits an array's body into its words, each unquoted:
// "a 'b c' d" is a, b c and d.
func shellWords(s string) []string {
	var words []string
	for i := 0; i < len(s); {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			break
		}
		var w strings.Builder
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			if q := s[i]; q == '\'' || q == '"' {
				k := strings.IndexByte(s[i+1:], q)
				if k < 0 {
					w.WriteString(s[i+1:])
					i = len(s)
					break
				}
				w.WriteString(s[i+1 : i+1+k])
				i += k + 2
				continue
			}
			w.WriteByte(s[i])
			i++
		}
		words = append(words, w.String())
	}
	return words
}

// joinPrintf replaces $(printf '%s' a b c) by abc: printf repeats its
// format for each word, and '%s' adds nothing between them.
func joinPrintf(s string) string {
	if !strings.Contains(s, "printf") {
		return s
	}
	return printfJoinRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := printfJoinRE.FindStringSubmatch(m)
		return strings.Join(strings.Fields(sub[1]), "")
	})
}

// substituteLocals replaces uses of the variables and aliases a line sets
// by their values, in the text after each setting.
func substituteLocals(s string) string {
	limit := 2*len(s) + 1024 // values can repeat text: bound what comes out
	for range 16 {
		changed := false
		ms := settings(s)
		for k, m := range ms {
			name, written := s[m[4]:m[5]], s[m[6]:m[7]]
			value := unquote(written)
			if m[2] < 0 { // a loop: its variable stands for its words
				value = strings.Join(shellWords(written), " ")
			}
			if written[0] != '\'' && strings.IndexByte(homeRE.ReplaceAllString(value, ""), '$') >= 0 {
				continue // a value built from variables (but $HOME): not followed; in single quotes $ is a dollar
			}
			// A PowerShell string joined to others with "+" ($a+$b) keeps
			// its quotes there, for joinConcat to join it.
			quoted := ""
			if m[2] >= 0 && m[3] > m[2] && (written[0] == '\'' || written[0] == '"') {
				quoted = written
			}
			// Up to the next setting of the same name, whose own value
			// may use this one (t=cu; t=${t}rl): after it, the new value
			// holds, and a later round substitutes that.
			rest, after := s[m[1]:], ""
			for _, n := range ms[k+1:] {
				if s[n[4]:n[5]] == name && n[1] > m[1] {
					rest, after = s[m[1]:n[1]], s[n[1]:]
					break
				}
			}
			if r, ok := replaceVar(rest, name, value, quoted, limit); ok {
				s, changed = s[:m[1]]+r+after, true
				break
			}
		}
		if !changed {
			for _, m := range aliasRE.FindAllStringSubmatchIndex(s, 32) {
				n, v := 2, 4
				if m[2] < 0 {
					n, v = 6, 8
				}
				name, value := s[m[n]:m[n+1]], unquote(s[m[v]:m[v+1]])
				rest := s[m[1]:]
				if r, ok := replaceAlias(rest, name, value, limit); ok {
					s, changed = s[:m[1]]+r, true
					break
				}
			}
		}
		if !changed || len(s) > limit {
			return s
		}
	}
	return s
}

// settings are the places s sets a variable, as assignRE's submatch
// indexes (name at 4:5, value at 6:7): its assignments, and its loops
// (for k in ~/.ssh/id_*; do ...: k stands for the words; no dollar group,
// 2:3 is -1), in order.
func settings(s string) [][]int {
	ms := assignRE.FindAllStringSubmatchIndex(s, 32)
	if !strings.Contains(s, "for") {
		return ms
	}
	for _, f := range forRE.FindAllStringSubmatchIndex(s, 8) {
		ms = append(ms, []int{f[0], f[1], -1, -1, f[2], f[3], f[4], f[5]})
	}
	slices.SortFunc(ms, func(a, b []int) int { return a[0] - b[0] })
	return ms
}

// replaceVar replaces $name and ${name} in s by value, or by quoted (when
// not empty) where a "+" joins it to what stands before or after; it gives
// up (false) when the result would pass limit bytes.
func replaceVar(s, name, value, quoted string, limit int) (string, bool) {
	valueAt := func(start, end int) string { // the use s[start:end]
		if quoted != "" && (strings.HasSuffix(strings.TrimRight(s[:start], " "), "+") || strings.HasPrefix(strings.TrimLeft(s[end:], " "), "+")) {
			return quoted
		}
		return value
	}
	var b strings.Builder
	changed := false
	for i := 0; i < len(s); {
		if b.Len() > limit {
			return s, false
		}
		j := strings.IndexByte(s[i:], '$')
		if j < 0 {
			b.WriteString(s[i:])
			break
		}
		j += i
		b.WriteString(s[i:j])
		rest := s[j+1:]
		switch {
		case strings.HasPrefix(rest, "{"+name+"}"):
			b.WriteString(valueAt(j, j+len(name)+3))
			i, changed = j+len(name)+3, true
		case strings.HasPrefix(rest, name) && (len(rest) == len(name) || !isIdent(rest[len(name)])):
			if k := j + 1 + len(name); k < len(s) && (s[k] == '=' || strings.HasPrefix(strings.TrimLeft(s[k:], " "), "=") && !strings.HasPrefix(strings.TrimLeft(s[k:], " "), "==")) {
				b.WriteByte('$') // a new assignment to it: leave it to the next round
				i = j + 1
				continue
			}
			b.WriteString(valueAt(j, j+1+len(name)))
			i, changed = j+1+len(name), true
		default:
			b.WriteByte('$')
			i = j + 1
		}
	}
	return b.String(), changed
}

// replaceAlias replaces name where it stands as a command: at the start of
// s or after ;, &, |, a newline or an opening parenthesis; it gives up
// (false) when the result would pass limit bytes.
func replaceAlias(s, name, value string, limit int) (string, bool) {
	var b strings.Builder
	changed := false
	atCommand := true
	for i := 0; i < len(s); {
		if b.Len() > limit {
			return s, false
		}
		c := s[i]
		if atCommand && (c == ' ' || c == '\t') {
			b.WriteByte(c)
			i++
			continue
		}
		if atCommand && strings.HasPrefix(s[i:], name) && (i+len(name) == len(s) || strings.IndexByte(" \t;&|)\n", s[i+len(name)]) >= 0) {
			b.WriteString(value)
			i += len(name)
			changed, atCommand = true, false
			continue
		}
		atCommand = strings.IndexByte(";&|\n(", c) >= 0
		b.WriteByte(c)
		i++
	}
	return b.String(), changed
}

// runFilters replaces echo TEXT | filters... | sh and $(echo TEXT |
// filters...) by what the filters make of TEXT, piped into the same shell
// or left where the substitution was.
func runFilters(s string) string {
	for range 8 {
		m := filteredRE.FindStringSubmatchIndex(s)
		if m == nil {
			return s
		}
		text := unquote(s[m[2]:m[3]])
		out, ok := applyFilters(text, s[m[4]:m[5]])
		if !ok {
			return s
		}
		tail := s[m[6]:m[7]]
		start := m[0]
		if tail == ")" { // $(echo ... | rev): the substitution becomes its output
			if k := strings.LastIndex(s[:m[0]], "$("); k >= 0 && strings.TrimSpace(s[k+2:m[0]]) == "" {
				start = k
			}
			s = s[:start] + out + s[m[1]:]
			continue
		}
		// echo ... | rev | sh: the shell runs the output
		s = s[:start] + out + " ; " + s[m[1]:]
	}
	return s
}

// applyFilters runs the filters of a pipeline tail ("| rev | base64 -d")
// over text.
func applyFilters(text, filters string) (string, bool) {
	for _, f := range strings.Split(filters, "|") {
		f = strings.ToLower(strings.TrimSpace(f))
		switch {
		case f == "":
		case f == "rev":
			r := []rune(text)
			for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
				r[i], r[j] = r[j], r[i]
			}
			text = string(r)
		case strings.HasPrefix(f, "tr "):
			if !strings.Contains(f, "n-za-m") {
				return "", false // a tr that is not ROT13
			}
			text = scan.ROT13(text)
		case strings.HasPrefix(f, "base64"):
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
			if err != nil {
				if b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(text), "=")); err != nil {
					return "", false
				}
			}
			text = string(b)
		case strings.HasPrefix(f, "xxd"):
			b, err := hex.DecodeString(strings.TrimSpace(text))
			if err != nil {
				return "", false
			}
			text = string(b)
		default:
			return "", false
		}
		if !utf8.ValidString(text) {
			return "", false
		}
	}
	return text, true
}

// unquote removes one pair of matching outer quotes.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
