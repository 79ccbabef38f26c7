package scan

import (
	"regexp"
	"strings"
)

// A command or query can arrive written backwards and be turned round by
// the code that runs it: Python's 'ELBAT PORD'[::-1], a shell's
// echo '...' | rev, PHP's strrev('...'), VBScript's StrReverse("..."),
// PowerShell's [array]::Reverse, JavaScript's .split('').reverse(). Where
// the text turns a string round, its quoted literals are read backwards
// too, for the rules to match: a literal of a benign call read backwards
// is gibberish that no rule matches, one of an attack is its payload.

// reverses finds the reversals (the cheap test for "rev", any case, or
// "[::-1]" comes first).
var reverses = regexp.MustCompile(`\[::-1\]|\|\s*rev\b|\brev\s*<<<|(?i:strrev|strreverse)\s*\(|(?i:\[array\]::reverse)\s*\(|\.reverse\(\)`)

// minReversed is the shortest literal read backwards.
const minReversed = 6

// reversedLiterals returns the quoted literals of s ('...', "..." or
// `...`, on one line, at least minReversed bytes) read backwards, when s
// turns a string round; each at most MaxDecoded bytes, MaxDecodedPerRun in
// all.
func reversedLiterals(s string) []string {
	if !strings.Contains(s, "[::-1]") && !containsFoldRev(s) || !reverses.MatchString(s) {
		return nil
	}
	var out []string
	budget := MaxDecodedPerRun
	for i := 0; i < len(s) && budget > 0; i++ {
		q := s[i]
		if q != '\'' && q != '"' && q != '`' {
			continue
		}
		end := i + 1
		for end < len(s) && s[end] != q && s[end] != '\n' {
			end++
		}
		if end == len(s) || s[end] != q {
			continue // no closing quote on this line: read on from the next byte
		}
		if lit := s[i+1 : end]; len(lit) >= minReversed {
			r := clip(reverseRunes(lit), min(MaxDecoded, budget))
			if r == "" {
				break
			}
			budget -= len(r)
			out = append(out, r)
		}
		i = end
	}
	return out
}

// containsFoldRev reports whether s holds "rev" in any case.
func containsFoldRev(s string) bool {
	for i := strings.IndexAny(s, "rR"); i >= 0 && i+3 <= len(s); {
		if strings.EqualFold(s[i:i+3], "rev") {
			return true
		}
		next := strings.IndexAny(s[i+1:], "rR")
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return false
}

// reverseRunes is s backwards, rune by rune (invalid bytes read as U+FFFD).
func reverseRunes(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}
