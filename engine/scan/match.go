package scan

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// Rule is one suspicious-content pattern, as stored in the policy bundle's
// data.json under toolgate.patterns.rules.
type Rule struct {
	Code    string `json:"code"`    // stable reason code, e.g. "PATTERN-005"
	Name    string `json:"name"`    // short rule name, e.g. "pipe_to_shell"
	Message string `json:"message"` // human message, e.g. "pipe to shell"
	Pattern string `json:"pattern"` // RE2 regex; always matched case-insensitively
	// Except, when set, is an RE2 regex (also case-insensitive) for the
	// wordings that excuse a match: a match that a match of Except on the
	// same line overlaps does not count ("password" in "password reset").
	// Another match of Pattern in the text still does.
	Except string `json:"except,omitempty"`
}

// Match is one rule matching one text.
type Match struct {
	Code, Name, Message string
	Where               string // the Text's Where
	Excerpt             string // the matched text, at most MaxExcerpt bytes, valid UTF-8
	Offset              int    // byte offset of the match in the Text
}

// Limits of the pattern matcher.
const (
	MaxPatternLen = 16 << 10 // longest accepted pattern, in bytes (dangerous-command rules list many spellings)
	MaxExcerpt    = 120      // longest Match.Excerpt, in bytes
	lineWindow    = 2 << 10  // window around a literal hit for single-line patterns
	multiWindow   = 4 << 10  // window around a literal hit for patterns that can cross lines
)

// RuleSet is a compiled, immutable set of rules; safe for concurrent use.
type RuleSet struct {
	rules   []compiledRule
	ac      *acMachine
	litRule []int // literal id → rule index
	litSet  []int // literal id → index of its set in the rule's sets
	// A Subset shares its parent's rules and automaton; these say which of
	// the rules are its own. Nil when every rule is.
	members []int   // the set's rules (indexes into rules), in order
	slot    []int32 // rule index → its place in members, or -1
	// unfiltered are the set's rules without a usable required literal.
	unfiltered []int
}

type compiledRule struct {
	Rule
	re        *regexp.Regexp
	except    *regexp.Regexp // nil without Rule.Except
	multiline bool           // (?s) or a literal newline: windows span lines
	anchors   uint8          // the assertions the pattern holds (anchorBegin...)
	width     int            // most runes a match spans; -1 when unbounded
	sets      [][]string     // every match holds a literal of each set; windows come from sets[0]
	literals  []string       // sets[0]
}

// Compile validates and compiles rules. Each pattern must be valid RE2 of at
// most MaxPatternLen bytes that cannot match the empty string; codes must be
// non-empty and unique. Errors name the rule's code.
func Compile(rules []Rule) (*RuleSet, error) {
	seen := make(map[string]bool, len(rules))
	compiled := make([]compiledRule, 0, len(rules))
	var errs []error
	for i, r := range rules {
		cr, err := compileRule(r)
		switch {
		case strings.TrimSpace(r.Code) == "":
			errs = append(errs, fmt.Errorf("rule %d: empty code", i))
			continue
		case seen[r.Code]:
			errs = append(errs, fmt.Errorf("rule %s: duplicate code", r.Code))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("rule %s: %w", r.Code, err))
			continue
		}
		seen[r.Code] = true
		compiled = append(compiled, cr)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return newRuleSet(compiled), nil
}

// Subset returns the rules of rs for which keep holds, as a RuleSet that
// matches as they would compiled on their own. It shares rs's patterns and
// literal automaton (hits of the other rules are passed over), so sets
// split by scope, which mostly hold the same rules, cost one automaton
// between them.
func (rs *RuleSet) Subset(keep func(Rule) bool) *RuleSet {
	sub := &RuleSet{rules: rs.rules, ac: rs.ac, litRule: rs.litRule, litSet: rs.litSet, members: []int{}, slot: make([]int32, len(rs.rules))}
	for i := range sub.slot {
		sub.slot[i] = -1
	}
	for k := range rs.Len() {
		if i := rs.member(k); keep(rs.rules[i].Rule) {
			sub.slot[i] = int32(len(sub.members))
			sub.members = append(sub.members, i)
		}
	}
	for _, i := range rs.unfiltered {
		if sub.slot[i] >= 0 {
			sub.unfiltered = append(sub.unfiltered, i)
		}
	}
	return sub
}

// member is the rule index of the set's k-th rule.
func (rs *RuleSet) member(k int) int {
	if rs.members == nil {
		return k
	}
	return rs.members[k]
}

// slotOf is the place of rule index i among the set's rules, or -1.
func (rs *RuleSet) slotOf(i int) int {
	if rs.slot == nil {
		return i
	}
	return int(rs.slot[i])
}

// newRuleSet indexes compiled rules: their literals in one automaton, the
// rules without any listed as unfiltered.
func newRuleSet(rules []compiledRule) *RuleSet {
	rs := &RuleSet{rules: rules}
	var lits []string
	for idx, cr := range rules {
		if len(cr.sets) == 0 {
			rs.unfiltered = append(rs.unfiltered, idx)
			continue
		}
		for si, set := range cr.sets {
			// A prefix of a literal every match holds is one too: the
			// automaton keeps the first maxScanLit bytes of each, once.
			added := make(map[string]bool, len(set))
			for _, l := range set {
				if l = l[:min(len(l), maxScanLit)]; added[l] {
					continue
				}
				added[l] = true
				lits = append(lits, l)
				rs.litRule = append(rs.litRule, idx)
				rs.litSet = append(rs.litSet, si)
			}
		}
	}
	rs.ac = newAC(lits)
	return rs
}

func compileRule(r Rule) (compiledRule, error) {
	if r.Pattern == "" {
		return compiledRule{}, errors.New("empty pattern")
	}
	if len(r.Pattern) > MaxPatternLen {
		return compiledRule{}, fmt.Errorf("pattern is %d bytes, over the %d-byte limit", len(r.Pattern), MaxPatternLen)
	}
	src := "(?i)" + r.Pattern
	re, err := regexp.Compile(src)
	if err != nil {
		return compiledRule{}, fmt.Errorf("invalid pattern: %w", err)
	}
	if re.MatchString("") {
		return compiledRule{}, errors.New("pattern matches the empty string")
	}
	tree, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return compiledRule{}, fmt.Errorf("invalid pattern: %w", err)
	}
	cr := compiledRule{Rule: r, re: re, multiline: spansLines(tree), anchors: anchorsOf(tree), width: maxWidth(tree), sets: requiredSets(tree)}
	if len(cr.sets) > 0 {
		cr.literals = cr.sets[0]
	}
	if r.Except != "" {
		if len(r.Except) > MaxPatternLen {
			return compiledRule{}, fmt.Errorf("except is %d bytes, over the %d-byte limit", len(r.Except), MaxPatternLen)
		}
		if cr.except, err = regexp.Compile("(?i)" + r.Except); err != nil {
			return compiledRule{}, fmt.Errorf("invalid except: %w", err)
		}
	}
	return cr, nil
}

// spansLines reports whether re is matched across lines: it has a dot in
// (?s) mode or a literal newline. Other patterns are matched within the
// line of each literal hit, so \s or [^x] in them never cross a newline.
func spansLines(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpAnyChar:
		return true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r == '\n' {
				return true
			}
		}
	}
	for _, sub := range re.Sub {
		if spansLines(sub) {
			return true
		}
	}
	return false
}

// Len returns the number of rules in the set.
func (rs *RuleSet) Len() int {
	if rs.members == nil {
		return len(rs.rules)
	}
	return len(rs.members)
}

// Unfiltered returns the codes of rules that have no usable required
// literal; they run their regex over every whole text and so cost more.
func (rs *RuleSet) Unfiltered() []string {
	var codes []string
	for _, i := range rs.unfiltered {
		codes = append(codes, rs.rules[i].Code)
	}
	return codes
}

type window struct{ start, end int }

// Match runs every rule over every text and returns at most one Match per
// (rule, text), ordered by text and then by rule. Each text is scanned once,
// case-insensitively, for the rules' required literals; a rule runs only
// if its text holds a literal of each of its required sets, and then its
// regex runs only on windows around its literal hits: the hit's line, at most
// 2 KB either side, so matches do not cross newlines; for patterns with a
// (?s) dot or a literal newline, 4 KB either side. Unfiltered rules, and
// every rule on a text holding U+017F or U+212A (which fold to ASCII
// letters), run on the whole text.
func (rs *RuleSet) Match(texts []Text) []Match { return rs.match(texts, nil) }

// match is Match; when examined is not nil, it adds to it, by rule code, the
// bytes each rule's regex was run over: the prefilter's work left undone.
func (rs *RuleSet) match(texts []Text, examined map[string]int) []Match {
	if rs == nil || rs.Len() == 0 {
		return nil
	}
	var out []Match
	n := rs.Len()
	wins := make([][]window, n) // by the rule's place in the set
	seen := make([]uint8, n)    // bit i: a literal of the rule's sets[i] occurs
	for _, t := range texts {
		if t.Text == "" {
			continue
		}
		for k := range wins {
			wins[k] = wins[k][:0]
			seen[k] = 0
		}
		lower, fallback := t.Text, foldsToASCII(t.Text) // the scanner folds ASCII case itself
		whole := window{0, len(t.Text)}
		if fallback {
			for k := range wins {
				wins[k] = append(wins[k], whole)
			}
		} else {
			for _, ri := range rs.unfiltered {
				k := rs.slotOf(ri)
				wins[k] = append(wins[k], whole)
			}
			rs.ac.scan(lower, func(id, end int) {
				ri := rs.litRule[id]
				k := rs.slotOf(ri)
				if k < 0 {
					return // a rule of the parent set only
				}
				seen[k] |= 1 << rs.litSet[id]
				if rs.litSet[id] != 0 {
					return
				}
				start := end - rs.ac.patLen[id]
				if !rs.rules[ri].multiline && strings.IndexByte(lower[start:end], '\n') >= 0 {
					return // a line-local match cannot contain this hit
				}
				w := rs.window(ri, lower, start, end)
				ws := wins[k]
				if last := len(ws) - 1; last >= 0 && w.start <= ws[last].end {
					ws[last].start = min(ws[last].start, w.start)
					ws[last].end = max(ws[last].end, w.end)
					return
				}
				wins[k] = append(ws, w)
			})
		}
		for k := range n {
			r := &rs.rules[rs.member(k)]
			if !fallback && len(r.sets) > 0 && seen[k] != 1<<len(r.sets)-1 {
				continue // some required literal is missing from the text
			}
			for _, w := range wins[k] {
				if examined != nil {
					examined[r.Code] += w.end - w.start
				}
				loc := r.find(t.Text, w)
				if loc == nil {
					continue
				}
				s, e := w.start+loc[0], w.start+loc[1]
				out = append(out, Match{
					Code: r.Code, Name: r.Name, Message: r.Message, Where: t.Where,
					Excerpt: clip(t.Text[s:e], MaxExcerpt), Offset: s,
				})
				break
			}
		}
	}
	return out
}

// window returns the byte range the rule's regex examines around a literal
// hit at [start,end). A match holding this hit lies within the rule's
// maximum width of it, so for bounded patterns the window is that width
// either side; otherwise it is the hit's line capped to lineWindow either
// side, or multiWindow either side (starting at a line start when one is
// near) for patterns that span lines. Line-local windows never leave the
// hit's line. The start of a hit is estimated from the literal's length;
// white space collapsed by the scanner makes the true start earlier, which
// the width bound still covers (the end is exact).
//
// The regexp sees a window's ends as the ends of its text, so a window is
// not cut where that would change an assertion's answer: a pattern with ^
// or \A is not cut short of its line's start (nor one with $ or \z short of
// the end), and one with \b or \B is not cut inside a word.
func (rs *RuleSet) window(ri int, lower string, start, end int) window {
	r := &rs.rules[ri]
	floor, ceil := max(0, start-lineWindow), min(len(lower), end+lineWindow)
	if r.multiline {
		floor, ceil = max(0, start-multiWindow), min(len(lower), end+multiWindow)
	}
	lo, hi := floor, ceil
	if r.width >= 0 && r.anchors&anchorBegin == 0 {
		lo = max(lo, backRunes(lower, end, r.width))
	}
	if r.width >= 0 && r.anchors&anchorEnd == 0 {
		hi = min(hi, forwardRunes(lower, start, r.width))
	}
	if r.multiline {
		if lo > 0 && lo == floor && lower[lo-1] != '\n' && (r.width < 0 || r.anchors&anchorBegin != 0) {
			if nl := strings.IndexByte(lower[lo:start], '\n'); nl >= 0 {
				lo += nl + 1
			}
		}
	} else {
		if lo < start {
			if nl := strings.LastIndexByte(lower[lo:start], '\n'); nl >= 0 {
				lo += nl + 1
			}
		}
		if end < hi {
			if nl := strings.IndexByte(lower[end:hi], '\n'); nl >= 0 {
				hi = end + nl
			}
		}
	}
	lo, hi = runeStart(lower, lo), runeEnd(lower, hi)
	if r.anchors&anchorWord != 0 {
		for lo > floor && isWordChar(lower[lo-1]) {
			lo--
		}
		for hi < ceil && isWordChar(lower[hi]) {
			hi++
		}
	}
	return window{lo, hi}
}

// isWordChar reports whether c is a word character to \b: ASCII letters,
// digits and underscore.
func isWordChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// The assertions a pattern holds (compiledRule.anchors).
const (
	anchorBegin = 1 << iota // ^ or \A
	anchorEnd               // $ or \z
	anchorWord              // \b or \B
)

// anchorsOf returns the assertions re holds.
func anchorsOf(re *syntax.Regexp) uint8 {
	var a uint8
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpBeginText:
		a = anchorBegin
	case syntax.OpEndLine, syntax.OpEndText:
		a = anchorEnd
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		a = anchorWord
	}
	for _, sub := range re.Sub {
		a |= anchorsOf(sub)
	}
	return a
}

// backRunes returns the offset n runes before i (at most 4n bytes).
func backRunes(s string, i, n int) int {
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return i
}

// forwardRunes returns the offset n runes after i.
func forwardRunes(s string, i, n int) int {
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// find runs the rule's regexp over a window. A line-local rule (the rules
// are matched line by line unless they span lines) runs over each line of
// a window that holds several: a whole text, when the rule has no literal
// prefilter or the text folds beyond ASCII; windows cut around literal hits
// never hold a newline. So ^ and $ mean the ends of a line either way.
func (r *compiledRule) find(text string, w window) []int {
	if r.except != nil {
		return r.findUnexcused(text, w)
	}
	s := text[w.start:w.end]
	if r.multiline || strings.IndexByte(s, '\n') < 0 {
		return r.re.FindStringIndex(s)
	}
	for off := 0; ; {
		line, _, more := strings.Cut(s[off:], "\n")
		if loc := r.re.FindStringIndex(line); loc != nil {
			return []int{off + loc[0], off + loc[1]}
		}
		if !more {
			return nil
		}
		off += len(line) + 1
	}
}

// findUnexcused is find for a rule with an Except: the first match in the
// window w of text (within a line, unless the rule spans lines) that no
// match of Except overlaps. Except runs over the match's whole line (up to
// lineWindow either side), not only the window: an excusing wording may
// begin before it.
func (r *compiledRule) findUnexcused(text string, w window) []int {
	s := text[w.start:w.end]
	for _, loc := range r.re.FindAllStringIndex(s, maxExcused) {
		if !r.multiline && strings.IndexByte(s[loc[0]:loc[1]], '\n') >= 0 {
			continue
		}
		start, end := w.start+loc[0], w.start+loc[1]
		ls := max(strings.LastIndexByte(text[:start], '\n')+1, start-lineWindow)
		le := min(len(text), end+lineWindow)
		if i := strings.IndexByte(text[end:le], '\n'); i >= 0 {
			le = end + i
		}
		excused := false
		for _, x := range r.except.FindAllStringIndex(text[ls:le], maxExcused) {
			if ls+x[0] < end && start < ls+x[1] {
				excused = true
				break
			}
		}
		if !excused {
			return loc
		}
	}
	return nil
}

// maxExcused bounds the matches a rule with an Except examines per window.
const maxExcused = 64

// maxScanLit: the automaton holds each required literal's first maxScanLit
// bytes. The pattern rules' literal sets are cross products ("your new task
// is", "your new task are", ...): their tails made half the automaton's
// states (27,520 at 64 bytes, 18,069 at 16: a 15.6 MB table became 10.2 MB)
// while the shared prefix already tells the texts apart. At 12 bytes the
// regexes examined a fifth more of ordinary text; at 8, Match ran ten times
// slower on the benchmarks' text (TestPrefilterKeepsRegexWorkSmall fails).
const maxScanLit = 16
