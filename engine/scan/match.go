package scan

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
//
// A rule whose pattern is an alternation of branches that each have
// required literals is kept as one part per branch: a literal hit then runs
// only the branch it belongs to, a fraction of the whole pattern's program
// (the regexp package's matcher slows with the program's size, and a small
// one may use its faster backtracker). Over the dev splits' requests this
// cut the time spent in regexps by three quarters. The rule matches where
// its leftmost part matches, as the whole pattern would.
type RuleSet struct {
	rules []compiledRule // the parts, a rule's parts next to each other
	ac    *acMachine
	// The automaton holds each literal once; a hit of literal id stands
	// for targets[targetAt[id]:targetAt[id+1]]: the parts (and the set of
	// each) that require it.
	targetAt []int32
	targets  []litTarget
	// A Subset shares its parent's parts and automaton; these say which of
	// the parts are its own. Nil when every part is.
	members []int   // the set's parts (indexes into rules), in order
	slot    []int32 // part index → its place in members, or -1
	// unfiltered are the set's parts without a usable required literal.
	unfiltered []int
	count      int       // rules (not parts) in the set
	pool       sync.Pool // *matchScratch
}

// compiledRule is one part of a rule: the whole rule, or one branch of its
// top-level alternation.
type compiledRule struct {
	Rule
	rule      int // index of the rule in Compile's list: parts of one rule share it
	re        *lazyRegexp
	except    *lazyRegexp // nil without Rule.Except
	empty     bool        // the pattern matches the empty string
	multiline bool        // (?s) or a literal newline: windows span lines
	anchors   uint8       // the assertions the pattern holds (anchorBegin...)
	width     int         // most runes a match spans; -1 when unbounded
	sets      [][]string  // every match holds a literal of each set; windows come from sets[0]
	bytes     string      // punctuation every match holds (requiredBytes): a window without one is skipped
}

// compileWorkers is how many goroutines Compile compiles rules on.
const compileWorkers = 4

// Compile validates and compiles rules. Each pattern must be valid RE2 of at
// most MaxPatternLen bytes that cannot match the empty string; codes must be
// non-empty and unique. Errors name the rule's code. A pattern's regexp is
// compiled when a text first needs it (lazyRegexp); its literals and the
// automaton over them are built here.
func Compile(rules []Rule) (*RuleSet, error) {
	type result struct {
		parts []compiledRule
		err   error
	}
	// Rules are analysed independently, so on several goroutines: the
	// default policy's take about a tenth of a second on one core, and the
	// first decision waits.
	results := make([]result, len(rules))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(compileWorkers, len(rules)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(rules); i = int(next.Add(1) - 1) {
				results[i].parts, results[i].err = compileRule(rules[i], i)
			}
		})
	}
	wg.Wait()
	seen := make(map[string]bool, len(rules))
	compiled := make([]compiledRule, 0, len(rules))
	var errs []error
	for i, r := range rules {
		switch err := results[i].err; {
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
		compiled = append(compiled, results[i].parts...)
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
	sub := &RuleSet{rules: rs.rules, ac: rs.ac, targetAt: rs.targetAt, targets: rs.targets, members: []int{}, slot: make([]int32, len(rs.rules))}
	for i := range sub.slot {
		sub.slot[i] = -1
	}
	kept := -1
	for k := range rs.parts() {
		i := rs.member(k)
		if !rs.firstPart(i) {
			if kept != i-1 {
				continue // the rule's first part was not kept
			}
		} else if !keep(rs.rules[i].Rule) {
			continue
		} else {
			sub.count++
		}
		kept = i
		sub.slot[i] = int32(len(sub.members))
		sub.members = append(sub.members, i)
	}
	for _, i := range rs.unfiltered {
		if sub.slot[i] >= 0 {
			sub.unfiltered = append(sub.unfiltered, i)
		}
	}
	return sub
}

// firstPart reports whether part index i begins its rule (a rule's parts
// are next to each other).
func (rs *RuleSet) firstPart(i int) bool {
	return i == 0 || rs.rules[i].rule != rs.rules[i-1].rule
}

// parts is the number of parts in the set.
func (rs *RuleSet) parts() int {
	if rs.members == nil {
		return len(rs.rules)
	}
	return len(rs.members)
}

// member is the part index of the set's k-th part.
func (rs *RuleSet) member(k int) int {
	if rs.members == nil {
		return k
	}
	return rs.members[k]
}

// slotOf is the place of part index i among the set's parts, or -1.
func (rs *RuleSet) slotOf(i int) int {
	if rs.slot == nil {
		return i
	}
	return int(rs.slot[i])
}

// newRuleSet indexes compiled parts: their literals in one automaton, the
// parts without any listed as unfiltered.
func newRuleSet(rules []compiledRule) *RuleSet {
	rs := &RuleSet{rules: rules}
	var lits []string
	var byLit [][]litTarget
	ids := map[string]int{}
	for idx, cr := range rules {
		if rs.firstPart(idx) {
			rs.count++
		}
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
				id, ok := ids[l]
				if !ok {
					id = len(lits)
					ids[l] = id
					lits = append(lits, l)
					byLit = append(byLit, nil)
				}
				byLit[id] = append(byLit[id], litTarget{part: int32(idx), set: uint8(si)})
			}
		}
	}
	rs.targetAt = make([]int32, 0, len(lits)+1)
	for _, ts := range byLit {
		rs.targetAt = append(rs.targetAt, int32(len(rs.targets)))
		rs.targets = append(rs.targets, ts...)
	}
	rs.targetAt = append(rs.targetAt, int32(len(rs.targets)))
	rs.ac = newAC(lits)
	return rs
}

// litTarget is a part that requires a literal, and the index of the
// literal's set in the part's sets.
type litTarget struct {
	part int32
	set  uint8
}

// compileRule compiles the i-th rule into its parts: one per branch of its
// top-level alternation, as written, when every branch has required
// literals; else the whole pattern.
func compileRule(r Rule, i int) ([]compiledRule, error) {
	if r.Pattern == "" {
		return nil, errors.New("empty pattern")
	}
	if len(r.Pattern) > MaxPatternLen {
		return nil, fmt.Errorf("pattern is %d bytes, over the %d-byte limit", len(r.Pattern), MaxPatternLen)
	}
	src := "(?i)" + r.Pattern
	tree, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("invalid pattern: %w", err)
	}
	var except *lazyRegexp
	if r.Except != "" {
		if len(r.Except) > MaxPatternLen {
			return nil, fmt.Errorf("except is %d bytes, over the %d-byte limit", len(r.Except), MaxPatternLen)
		}
		if except, err = parseLazy("(?i)" + r.Except); err != nil {
			return nil, fmt.Errorf("invalid except: %w", err)
		}
	}
	parts := splitRule(r, i, except)
	if parts == nil {
		parts = []compiledRule{newPart(r, i, src, tree, requiredSets(tree), except)}
	}
	for _, p := range parts {
		if p.empty {
			return nil, errors.New("pattern matches the empty string")
		}
	}
	return parts, nil
}

// splitRule returns the parts of a rule whose pattern is an alternation of
// branches that all have required literals, or nil.
func splitRule(r Rule, i int, except *lazyRegexp) []compiledRule {
	branches := topBranches(r.Pattern)
	if len(branches) < 2 {
		return nil
	}
	parts := make([]compiledRule, 0, len(branches))
	for _, b := range branches {
		src := "(?i)" + b
		tree, err := syntax.Parse(src, syntax.Perl)
		if err != nil {
			return nil
		}
		sets := requiredSets(tree)
		if len(sets) == 0 {
			return nil // a branch every text would run: keep the rule whole
		}
		parts = append(parts, newPart(r, i, src, tree, sets, except))
	}
	return parts
}

// newPart is the part of the i-th rule r whose pattern src parses to tree.
func newPart(r Rule, i int, src string, tree *syntax.Regexp, sets [][]string, except *lazyRegexp) compiledRule {
	return compiledRule{Rule: r, rule: i, re: &lazyRegexp{src: src}, except: except, empty: matchesEmpty(tree), multiline: spansLines(tree), anchors: anchorsOf(tree), width: maxWidth(tree), sets: sets, bytes: requiredBytes(tree)}
}

// lazyRegexp is a pattern compiled on its first use. A rule set holds
// thousands of patterns, a decision runs the few its literals point to,
// and a process that decides once (a hook call) would otherwise spend
// most of its start compiling regexps it never runs. The source has been
// parsed already, so compiling it cannot fail.
type lazyRegexp struct {
	src  string
	once sync.Once
	re   *regexp.Regexp
}

// parseLazy checks src parses and returns it, not yet compiled.
func parseLazy(src string) (*lazyRegexp, error) {
	if _, err := syntax.Parse(src, syntax.Perl); err != nil {
		return nil, err
	}
	return &lazyRegexp{src: src}, nil
}

func (l *lazyRegexp) get() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.src) })
	return l.re
}

// matchesEmpty reports whether re matches the empty string: regexp's
// MatchString("") without compiling re. In an empty text every position is
// both ends of the text and of a line, and no word character is near.
func matchesEmpty(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpNoWordBoundary, syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpLiteral:
		return len(re.Rune) == 0
	case syntax.OpCapture, syntax.OpPlus:
		return matchesEmpty(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min == 0 || matchesEmpty(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !matchesEmpty(sub) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if matchesEmpty(sub) {
				return true
			}
		}
		return false
	}
	return false // a character, a class, no match, a word boundary
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
func (rs *RuleSet) Len() int { return rs.count }

// Unfiltered returns the codes of rules that have no usable required
// literal; they run their regex over every whole text and so cost more.
func (rs *RuleSet) Unfiltered() []string {
	var codes []string
	for _, i := range rs.unfiltered {
		if c := rs.rules[i].Code; len(codes) == 0 || codes[len(codes)-1] != c {
			codes = append(codes, c)
		}
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
	sc := rs.scratch()
	defer rs.pool.Put(sc)
	wins, seen, hits := sc.wins, sc.seen, sc.hits
	for _, t := range texts {
		if t.Text == "" {
			continue
		}
		sc.reset()
		lower, fallback := t.Text, foldsToASCII(t.Text) // the scanner folds ASCII case itself
		whole := window{0, len(t.Text)}
		if fallback {
			for k := range wins {
				sc.touch(k)
				wins[k] = append(wins[k], whole)
			}
		} else {
			for _, ri := range rs.unfiltered {
				k := rs.slotOf(ri)
				sc.touch(k)
				wins[k] = append(wins[k], whole)
			}
			rs.ac.scan(lower, func(id, end int) {
				start := end - rs.ac.patLen[id]
				newline := strings.IndexByte(lower[start:end], '\n') >= 0
				for _, tg := range rs.targets[rs.targetAt[id]:rs.targetAt[id+1]] {
					k := rs.slotOf(int(tg.part))
					if k < 0 {
						continue // a part of the parent set only
					}
					sc.touch(k)
					seen[k] |= 1 << tg.set
					if tg.set != 0 {
						continue
					}
					if newline && !rs.rules[tg.part].multiline {
						continue // a line-local match cannot contain this hit
					}
					hits[k] = append(hits[k], window{start, end})
				}
			})
		}
		slices.Sort(sc.touched)
		best, bs, be := -1, 0, 0 // the current rule's leftmost part match: part, start, end
		for j, k := range sc.touched {
			i := rs.member(k)
			r := &rs.rules[i]
			if !fallback && len(r.sets) > 0 && seen[k] != 1<<len(r.sets)-1 {
				// some required literal is missing from the text
			} else {
				// Windows around the hits, cut only now that the part is
				// known to run: common literals hit often.
				for _, h := range hits[k] {
					w := rs.window(i, lower, h.start, h.end)
					ws := wins[k]
					if last := len(ws) - 1; last >= 0 && w.start <= ws[last].end {
						ws[last].start = min(ws[last].start, w.start)
						ws[last].end = max(ws[last].end, w.end)
						continue
					}
					wins[k] = append(ws, w)
				}
				for _, w := range wins[k] {
					if !holdsAll(t.Text[w.start:w.end], r.bytes) {
						continue // a byte every match holds is missing
					}
					if examined != nil {
						examined[r.Code] += w.end - w.start
					}
					if loc := r.find(t.Text, w); loc != nil {
						if s := w.start + loc[0]; best < 0 || s < bs {
							best, bs, be = i, s, w.start+loc[1]
						}
						break
					}
				}
			}
			if best >= 0 && (j == len(sc.touched)-1 || rs.rules[rs.member(sc.touched[j+1])].rule != r.rule) {
				b := &rs.rules[best]
				out = append(out, Match{
					Code: b.Code, Name: b.Name, Message: b.Message, Where: t.Where,
					Excerpt: clip(t.Text[bs:be], MaxExcerpt), Offset: bs,
				})
				best = -1
			}
		}
	}
	sc.reset()
	return out
}

// matchScratch is match's per-call state, by the part's place in the set:
// kept in a pool, and cleared only where a text touched it, so a call costs
// what its texts' literal hits cost, not the number of parts.
type matchScratch struct {
	wins    [][]window // windows to run the part's regexp over
	hits    [][]window // hits of the part's sets[0] literals
	seen    []uint8    // bit i: a literal of the part's sets[i] occurs
	marked  []bool     // the part is in touched
	touched []int      // parts a literal hit (or every text) reached
}

func (rs *RuleSet) scratch() *matchScratch {
	if sc, ok := rs.pool.Get().(*matchScratch); ok {
		return sc
	}
	n := rs.parts()
	return &matchScratch{wins: make([][]window, n), hits: make([][]window, n), seen: make([]uint8, n), marked: make([]bool, n)}
}

func (sc *matchScratch) touch(k int) {
	if !sc.marked[k] {
		sc.marked[k] = true
		sc.touched = append(sc.touched, k)
	}
}

func (sc *matchScratch) reset() {
	for _, k := range sc.touched {
		sc.wins[k] = sc.wins[k][:0]
		sc.hits[k] = sc.hits[k][:0]
		sc.seen[k] = 0
		sc.marked[k] = false
	}
	sc.touched = sc.touched[:0]
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
	return isAlnum(c) || c == '_'
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
		return r.re.get().FindStringIndex(s)
	}
	for off := 0; ; {
		line, _, more := strings.Cut(s[off:], "\n")
		if loc := r.re.get().FindStringIndex(line); loc != nil {
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
	for _, loc := range r.re.get().FindAllStringIndex(s, maxExcused) {
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
		for _, x := range r.except.get().FindAllStringIndex(text[ls:le], maxExcused) {
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

// topBranches splits a pattern at the | of its top level: the branches of
// its outermost alternation, as written. It returns nil when the pattern
// has none, sets flags at its top level ((?s) without a colon, which carry
// from one branch into the next) or quotes text (\Q...\E).
func topBranches(p string) []string {
	if strings.Contains(p, `\Q`) {
		return nil
	}
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			i = classEnd(p, i)
		case '(':
			if depth == 0 && strings.HasPrefix(p[i:], "(?") {
				if j := strings.IndexAny(p[i+2:], ":)"); j >= 0 && p[i+2+j] == ')' {
					return nil
				}
			}
			depth++
		case ')':
			depth--
		case '|':
			if depth == 0 {
				out = append(out, p[start:i])
				start = i + 1
			}
		}
	}
	if out == nil {
		return nil
	}
	return append(out, p[start:])
}

// classEnd returns the index of the ] that closes the character class
// opened at p[i] (len(p) when none does).
func classEnd(p string, i int) int {
	i++
	if i < len(p) && p[i] == '^' {
		i++
	}
	if i < len(p) && p[i] == ']' {
		i++ // a leading ] is a member
	}
	for ; i < len(p); i++ {
		switch {
		case p[i] == '\\':
			i++
		case strings.HasPrefix(p[i:], "[:"):
			if j := strings.Index(p[i+2:], ":]"); j >= 0 {
				i += j + 3
			}
		case p[i] == ']':
			return i
		}
	}
	return len(p)
}
