package scan

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
)

// Limits for literal derivation: sets larger than maxLitSet or exact strings
// longer than maxLitLen stop growing; required literals shorter than
// minLitLen are used only when no other set exists, and shorter than
// minShortLitLen make the rule unfiltered.
const (
	maxLitSet  = 64  // exact sets (cross products)
	maxFoldSet = 8   // spellings of a run of non-ASCII letters under (?i)
	maxReqSet  = 512 // required sets (unions over alternations)
	maxLitLen  = 64
	minLitLen  = 3
	// minShortLitLen: a rule with no set of minLitLen literals is still
	// prefiltered by its best set when every member has this many bytes.
	minShortLitLen = 2
)

// litInfo describes what a regexp node can match: exact is the finite set of
// all strings it matches (nil when unknown or too large); req is a set such
// that every match contains at least one member (nil when none is known).
type litInfo struct {
	exact  []string
	req    []string
	all    [][]string // further sets that every match also hits (conjunction)
	prefix []string   // when exact is nil: every match starts with a member (nil: unknown)
}

// prefixOf is a set every match of info starts with, or nil.
func prefixOf(info litInfo) []string {
	if info.exact != nil {
		return info.exact
	}
	return info.prefix
}

// requiredLiterals returns lowercased ASCII literals such that every match
// of re contains at least one of them, or nil when no useful set exists.
func requiredLiterals(re *syntax.Regexp) []string {
	sets := requiredSets(re)
	if len(sets) == 0 {
		return nil
	}
	return sets[0]
}

// requiredSets returns sets of literals such that every match of re
// contains a member of each set, the most selective set first; nil when
// no usable set exists. Sets with a member shorter than minLitLen are
// dropped; at most maxSets are kept.
func requiredSets(re *syntax.Regexp) [][]string {
	info := analyze(re)
	first := best(info)
	var sets [][]string
	if usable(first) {
		sets = append(sets, first)
	}
	for _, s := range info.all {
		if usable(s) && len(sets) < maxSets {
			sets = append(sets, s)
		}
	}
	if len(sets) == 0 {
		// Two-byte literals ("su", "rm") still spare the regexp every text
		// that holds none of them: better than no prefilter at all.
		if minLen(first) >= minShortLitLen && !slices.Contains(first, "") {
			return [][]string{first}
		}
		return nil
	}
	// The most selective set goes first: windows are cut around its hits.
	bi := 0
	for i, s := range sets {
		if better(s, sets[bi]) {
			bi = i
		}
	}
	sets[0], sets[bi] = sets[bi], sets[0]
	return sets
}

const maxSets = 8

func usable(set []string) bool {
	if len(set) == 0 {
		return false
	}
	for _, s := range set {
		if len(s) < minLitLen {
			return false
		}
	}
	return true
}

func analyze(re *syntax.Regexp) litInfo {
	switch re.Op {
	case syntax.OpLiteral:
		return analyzeLiteral(re)
	case syntax.OpCharClass:
		return analyzeClass(re)
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return litInfo{exact: []string{""}}
	case syntax.OpCapture:
		return analyze(re.Sub[0])
	case syntax.OpPlus, syntax.OpStar, syntax.OpRepeat:
		sub := analyze(re.Sub[0])
		atLeastOne := re.Op == syntax.OpPlus || (re.Op == syntax.OpRepeat && re.Min >= 1)
		if isSpaceSet(sub.exact) {
			// The scanner sees any run of white space as one ' '.
			if atLeastOne {
				return litInfo{exact: []string{" "}}
			}
			return litInfo{exact: []string{"", " "}}
		}
		if atLeastOne {
			return litInfo{req: best(sub), all: sub.all, prefix: prefixOf(sub)}
		}
		return litInfo{}
	case syntax.OpQuest:
		sub := analyze(re.Sub[0])
		if sub.exact != nil {
			return litInfo{exact: union(sub.exact, []string{""})}
		}
		return litInfo{}
	case syntax.OpConcat:
		return analyzeConcat(re.Sub)
	case syntax.OpAlternate:
		var exact, req, prefix, second []string
		allExact, reqOK, prefixOK, secondOK, secondDiffers := true, true, true, true, false
		for _, sub := range re.Sub {
			info := analyze(sub)
			if info.exact == nil {
				allExact = false
			} else {
				exact = union(exact, info.exact)
			}
			b := best(info)
			if b == nil {
				reqOK = false
			} else {
				req = union(req, b)
			}
			if p := prefixOf(info); p != nil && prefixOK {
				prefix = union(prefix, p)
			} else {
				prefixOK = false
			}
			// A second required set: from each branch another set it
			// requires (or the same one when it has no other); every
			// match holds a member of the union of those too.
			other := b
			for _, s := range info.all {
				if usable(s) && !sameSet(s, b) && (!usable(other) || sameSet(other, b) || better(s, other)) {
					other = s
				}
			}
			if usable(other) {
				second = union(second, other)
				secondDiffers = secondDiffers || !sameSet(other, b)
			} else {
				secondOK = false
			}
		}
		if allExact && len(exact) <= maxLitSet {
			return litInfo{exact: exact}
		}
		out := litInfo{}
		if prefixOK && len(prefix) <= maxReqSet {
			out.prefix = prefix
		}
		if !reqOK || len(req) == 0 || len(req) > maxReqSet {
			return out
		}
		out.req = req
		if secondOK && secondDiffers && len(second) <= maxReqSet {
			out.all = [][]string{second}
		}
		return out
	}
	return litInfo{} // star, any char, etc.
}

const utf8RuneSelf = 0x80

// analyzeLiteral returns the literal's exact spellings as the scanner sees
// them: ASCII letters lowercased (the scanner folds ASCII case itself) and,
// under (?i), every other letter spelled each way its case folds (the
// scanner compares other bytes exactly). Non-ASCII letters are grouped in
// runs of at most maxFoldSet spellings (three Cyrillic letters: six bytes,
// eight spellings), each run a required set, so that alternations of such
// words stay within maxReqSet.
func analyzeLiteral(re *syntax.Regexp) litInfo {
	ascii := true
	for _, r := range re.Rune {
		if r >= utf8RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		var b strings.Builder
		for _, r := range re.Rune {
			b.WriteRune(unicode.ToLower(r))
		}
		return litInfo{exact: []string{collapseSpace(b.String())}}
	}
	fold := re.Flags&syntax.FoldCase != 0
	infos := make([]litInfo, len(re.Rune))
	for i, r := range re.Rune {
		infos[i] = litInfo{exact: runeSpellings(r, fold)}
	}
	return concatInfos(infos, maxFoldSet)
}

// runeSpellings returns the strings the scanner must look for to find r:
// with fold, each member of r's case-folding orbit (ASCII ones lowercased).
func runeSpellings(r rune, fold bool) []string {
	one := func(r rune) string {
		if r < utf8RuneSelf {
			return collapseSpace(string(unicode.ToLower(r)))
		}
		return string(r)
	}
	out := []string{one(r)}
	if !fold {
		return out
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		out = union(out, []string{one(f)})
	}
	return out
}

// analyzeClass turns a small class (case variants of one letter, or a few
// punctuation characters) into an exact set of strings: ASCII letters
// lowercased, other characters as they are (the scanner folds only ASCII).
func analyzeClass(re *syntax.Regexp) litInfo {
	seen := map[string]bool{}
	var exact []string
	for i := 0; i+1 < len(re.Rune); i += 2 {
		lo, hi := re.Rune[i], re.Rune[i+1]
		if lo == hi && (lo == '\u017F' || lo == '\u212A') {
			continue // folds to s or k; texts holding them are scanned in full
		}
		if hi > unicode.MaxRune || hi-lo > 8 {
			return litInfo{}
		}
		for r := lo; r <= hi; r++ {
			s := string(r)
			if r < utf8RuneSelf {
				s = collapseSpace(string(unicode.ToLower(r)))
			}
			if !seen[s] {
				seen[s] = true
				exact = append(exact, s)
			}
		}
		if len(exact) > 8 {
			return litInfo{}
		}
	}
	if len(exact) == 0 {
		return litInfo{}
	}
	return litInfo{exact: exact}
}

// analyzeConcat multiplies out runs of exact children into longer literals
// and keeps the most selective required set seen along the way.
func analyzeConcat(subs []*syntax.Regexp) litInfo {
	infos := make([]litInfo, len(subs))
	for i, sub := range subs {
		infos[i] = analyze(sub)
	}
	return concatInfos(infos, maxLitSet)
}

// concatInfos combines the infos of consecutive pieces of a pattern; runs
// of exact pieces are multiplied out up to limit strings.
func concatInfos(infos []litInfo, limit int) litInfo {
	cur := []string{""} // cross product of the current run of exact children
	var bestReq []string
	var all [][]string
	allExact := true
	flush := func() {
		if usable(cur) {
			all = append(all, cur)
		}
		if better(cur, bestReq) {
			bestReq = cur
		}
	}
	// prefix: every match starts with a member; known while the pieces
	// so far are exact and, then, through the first piece that is not.
	var prefix []string
	leading := true
	for _, info := range infos {
		if info.exact != nil {
			if next := cross(cur, info.exact, limit); next != nil {
				cur = next
				continue
			}
			// Too large: close the run and start a new one with this child.
			if leading {
				prefix, leading = cur, false
			}
			allExact = false
			flush()
			cur = info.exact
			continue
		}
		allExact = false
		// The run before this piece runs straight into one of its
		// prefixes: their cross product is required too (a run "mk"
		// before (?:fs|e2fs) gives "mkfs", "mke2fs").
		if p := info.prefix; p != nil {
			if joined := cross(cur, p, maxReqSet); joined != nil {
				if usable(joined) {
					all = append(all, joined)
				}
				if better(joined, bestReq) {
					bestReq = joined
				}
				if leading {
					prefix = joined
				}
			}
		}
		if leading && prefix == nil && len(cur) > 0 && !(len(cur) == 1 && cur[0] == "") {
			prefix = cur
		}
		leading = false
		flush()
		if usable(info.req) {
			all = append(all, info.req)
		}
		all = append(all, info.all...)
		if better(info.req, bestReq) {
			bestReq = info.req
		}
		cur = []string{""}
	}
	if allExact {
		return litInfo{exact: cur}
	}
	flush()
	return litInfo{req: bestReq, all: all, prefix: prefix}
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

// best returns the required set implied by info.
func best(info litInfo) []string {
	if info.exact != nil {
		for _, s := range info.exact {
			if s == "" {
				return nil
			}
		}
		return info.exact
	}
	return info.req
}

// better reports whether set a is more selective than b: a longer shortest
// member wins, then fewer members. Sets holding "" are useless.
func better(a, b []string) bool {
	ma := minLen(a)
	if ma <= 0 {
		return false
	}
	mb := minLen(b)
	if ma != mb {
		return ma > mb
	}
	return variants(a) < variants(b)
}

// variants is how many members of set differ other than by leading or
// trailing white space: "ai:" and " ai: " (white space folded in by the
// patterns' [ \t]*) are as rare as each other, so they count once when
// sets are compared.
func variants(set []string) int {
	seen := make(map[string]bool, len(set))
	for _, s := range set {
		seen[strings.TrimSpace(s)] = true
	}
	return len(seen)
}

func minLen(set []string) int {
	if len(set) == 0 {
		return -1
	}
	m := len(set[0])
	for _, s := range set[1:] {
		m = min(m, len(s))
	}
	return m
}

// cross returns every a+b, or nil when the result would have more than
// limit strings or a string longer than maxLitLen.
func cross(as, bs []string, limit int) []string {
	if len(as)*len(bs) > limit {
		return nil
	}
	out := make([]string, 0, len(as)*len(bs))
	seen := map[string]bool{}
	for _, a := range as {
		for _, b := range bs {
			s := collapseSpace(a + b)
			if len(s) > maxLitLen {
				return nil
			}
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// isSpaceByte reports the bytes the literal scanner folds into one ' '
// (the white space of RE2's \s, plus vertical tab).
func isSpaceByte(c byte) bool {
	return c == ' ' || ('\t' <= c && c <= '\r')
}

// collapseSpace maps every run of white space in s to a single ' ', the
// way the literal scanner sees text.
func collapseSpace(s string) string {
	if !strings.ContainsAny(s, " \t\n\v\f\r") {
		return s
	}
	var b strings.Builder
	prev := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isSpaceByte(c) {
			if prev {
				continue
			}
			prev, c = true, ' '
		} else {
			prev = false
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isSpaceSet(set []string) bool {
	if len(set) == 0 {
		return false
	}
	for _, s := range set {
		if s != " " {
			return false
		}
	}
	return true
}

// maxWidth returns the most runes a match of re can span, or -1 when
// unbounded.
func maxWidth(re *syntax.Regexp) int {
	const unbounded = -1
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpQuest:
		return maxWidth(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		return unbounded
	case syntax.OpRepeat:
		w := maxWidth(re.Sub[0])
		if re.Max < 0 || w < 0 {
			return unbounded
		}
		return re.Max * w
	case syntax.OpConcat, syntax.OpAlternate:
		total := 0
		for _, sub := range re.Sub {
			w := maxWidth(sub)
			if w < 0 {
				return unbounded
			}
			if re.Op == syntax.OpConcat {
				total += w
			} else {
				total = max(total, w)
			}
		}
		return total
	}
	return 0 // empty-width assertions
}

// requiredBytes returns the ASCII punctuation bytes (not letters, digits
// or white space) that every match of re holds, each once: the "@" of a
// pattern that ends in an e-mail address. They are too short for the
// automaton, but a window of text without one of them cannot match, and
// looking for a byte costs far less than running the regexp.
func requiredBytes(re *syntax.Regexp) string {
	var set [128]bool
	collectRequiredBytes(re, &set)
	var b []byte
	for c, ok := range set {
		if ok {
			b = append(b, byte(c))
		}
	}
	return string(b)
}

func collectRequiredBytes(re *syntax.Regexp, set *[128]bool) {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if isPunct(r) {
				set[r] = true
			}
		}
	case syntax.OpCharClass:
		if len(re.Rune) == 2 && re.Rune[0] == re.Rune[1] && isPunct(re.Rune[0]) {
			set[re.Rune[0]] = true
		}
	case syntax.OpCapture, syntax.OpPlus:
		collectRequiredBytes(re.Sub[0], set)
	case syntax.OpRepeat:
		if re.Min >= 1 {
			collectRequiredBytes(re.Sub[0], set)
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			collectRequiredBytes(sub, set)
		}
	case syntax.OpAlternate:
		// Only the bytes every branch holds.
		var common [128]bool
		for i, sub := range re.Sub {
			var own [128]bool
			collectRequiredBytes(sub, &own)
			for c := range common {
				common[c] = own[c] && (i == 0 || common[c])
			}
		}
		for c, ok := range common {
			if ok {
				set[c] = true
			}
		}
	}
}

// isPunct reports whether r is an ASCII byte that case folding leaves
// alone and that is not white space: punctuation and symbols.
func isPunct(r rune) bool {
	return r > ' ' && r < 0x7f && !isAlnum(byte(r))
}

// holdsAll reports whether s holds every byte of bytes.
func holdsAll(s, bytes string) bool {
	for i := 0; i < len(bytes); i++ {
		if strings.IndexByte(s, bytes[i]) < 0 {
			return false
		}
	}
	return true
}
