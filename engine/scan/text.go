package scan

import (
	"strings"
	"unicode/utf8"
)

// Text is one string to scan and where it came from in the request, as an
// input path such as "action.arguments.command" or "context.blocks[2].content".
type Text struct {
	Where string
	Text  string
}

// foldsToASCII reports whether s holds one of the two non-ASCII runes that
// Go's case-insensitive matching folds to an ASCII letter (U+017F ſ → s,
// U+212A Kelvin sign → k). A literal prefilter over ASCII cannot see
// those, so callers fall back to running every rule on the whole text.
func foldsToASCII(s string) bool {
	return strings.Contains(s, "\u017F") || strings.Contains(s, "\u212A")
}

// lowerASCII lowercases the ASCII letters of s and leaves every other byte
// alone, so byte offsets in the result are offsets in s.
func lowerASCII(s string) string {
	firstUpper := -1
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			firstUpper = i
			break
		}
	}
	if firstUpper < 0 {
		return s
	}
	b := []byte(s)
	for i := firstUpper; i < len(b); i++ {
		if c := b[i]; 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// clip returns s cut to at most max bytes at a rune boundary, with any
// invalid UTF-8 replaced by U+FFFD (the result never exceeds max bytes).
func clip(s string, max int) string {
	if len(s) <= max && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n := size
		if r == utf8.RuneError && size == 1 {
			n = len("\uFFFD")
		}
		if b.Len()+n > max {
			break
		}
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// runeStart moves i back to the start of the rune containing byte i.
func runeStart(s string, i int) int {
	for n := 0; i > 0 && i < len(s) && !utf8.RuneStart(s[i]) && n < utf8.UTFMax; n++ {
		i--
	}
	return i
}

// runeEnd moves i forward to the next rune boundary at or after i.
func runeEnd(s string, i int) int {
	for n := 0; i < len(s) && !utf8.RuneStart(s[i]) && n < utf8.UTFMax; n++ {
		i++
	}
	return i
}
