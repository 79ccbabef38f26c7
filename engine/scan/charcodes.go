package scan

import (
	"strings"
	"unicode/utf8"
)

// Character codes handed to a decoding function spell a string one number
// at a time: PowerShell's [char[]](83,101,116) and [byte[]](...), Python's
// bytes([...]) and bytearray([...]), JavaScript's String.fromCharCode(...),
// SQL's CHAR(83,69,76,...), and chr(99).chr(117) or Chr(99) & Chr(117)
// chains. A list is read only after one of these markers, so that a row of
// numbers in a spreadsheet is never taken for text.

// codeListMarkers open a list of codes (lower case; the text is searched
// case-insensitively).
var codeListMarkers = []string{"[char[]]", "[byte[]]", "fromcharcode(", "bytes([", "bytearray([", "char("}

const minCodes = 4 // shortest list or chain read

// charCodes returns the strings spelled by the code lists and chr() chains
// of s, each at most MaxDecoded bytes.
func charCodes(s string) []string {
	if len(s) > MaxDecodedPerRun {
		s = s[:MaxDecodedPerRun]
	}
	lower := strings.ToLower(s)
	var out []string
	for _, m := range codeListMarkers {
		for off := 0; ; {
			i := strings.Index(lower[off:], m)
			if i < 0 {
				break
			}
			start := off + i + len(m)
			text, end := codeList(lower, start)
			if text != "" {
				out = append(out, text)
			}
			off = max(end, start)
		}
	}
	for off := 0; ; {
		i := strings.Index(lower[off:], "chr(")
		if i < 0 {
			break
		}
		text, end := chrChain(lower, off+i)
		if text != "" {
			out = append(out, text)
		}
		off = max(end, off+i+4)
	}
	return out
}

// codeList reads a list of decimal (or 0x hex) codes separated by commas
// and spaces from s[i:], after an optional "(", "@(" or "[". It returns
// the string they spell ("" for a list shorter than minCodes or with a
// code that is not a printable character) and where the list ended.
func codeList(s string, i int) (string, int) {
	for i < len(s) && (s[i] == ' ' || s[i] == '(' || s[i] == '@' || s[i] == '[') {
		i++
	}
	var b []byte
	n := 0
	for i < len(s) && len(b) < MaxDecoded {
		v, next, ok := number(s, i)
		if !ok {
			break
		}
		if !codePoint(v) {
			return "", next
		}
		b = utf8.AppendRune(b, rune(v))
		n++
		i = next
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
	}
	if n < minCodes {
		return "", i
	}
	return string(b), i
}

// chrChain reads chr(N) calls joined by "+", ".", "&" or "," (and spaces)
// from s[i:], where s[i:] starts with "chr(".
func chrChain(s string, i int) (string, int) {
	var b []byte
	n := 0
	for len(b) < MaxDecoded && strings.HasPrefix(s[i:], "chr(") {
		v, next, ok := number(s, i+4)
		if !ok || next >= len(s) || s[next] != ')' || !codePoint(v) {
			break
		}
		b = utf8.AppendRune(b, rune(v))
		n++
		i = next + 1
		j := i
		for j < len(s) && strings.IndexByte(" +.&,", s[j]) >= 0 {
			j++
		}
		if !strings.HasPrefix(s[j:], "chr(") {
			break
		}
		i = j
	}
	if n < minCodes {
		return "", i
	}
	return string(b), i
}

// number reads a decimal or 0x-prefixed hex number of at most 7 digits at
// s[i:].
func number(s string, i int) (v, end int, ok bool) {
	base, j := 10, i
	if strings.HasPrefix(s[i:], "0x") {
		base, j = 16, i+2
	}
	start := j
	for j < len(s) && j-start < 7 {
		c := s[j]
		switch {
		case '0' <= c && c <= '9':
			v = v*base + int(c-'0')
		case base == 16 && 'a' <= c && c <= 'f':
			v = v*base + int(c-'a') + 10
		default:
			return v, j, j > start
		}
		j++
	}
	return v, j, j > start
}

// codePoint reports a code that spells printable text: tab, newline,
// carriage return, or a character from space up.
func codePoint(v int) bool {
	return v == '\t' || v == '\n' || v == '\r' || v >= ' ' && v != 0x7f && v <= utf8.MaxRune
}
