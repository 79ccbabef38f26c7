package scan

import (
	"strings"
	"unicode/utf8"
)

// Character codes handed to a decoding function spell a string one number
// at a time: PowerShell's [char[]](83,101,116) and [byte[]](...), Python's
// bytes([...]), bytearray([...]) and map(chr, [...]), JavaScript's
// String.fromCharCode(...), MySQL's CHAR(83,69,76,...), and chains of one
// code per call: chr(99).chr(117), Chr(99) & Chr(117), SQL Server's
// CHAR(68)+CHAR(82) and PostgreSQL's chr(68)||chr(82). A list is read only
// after one of these markers, so that a row of numbers in a spreadsheet is
// never taken for text.

// codeListMarkers open a list of codes (lower case; the text is searched
// case-insensitively).
var codeListMarkers = []string{"[char[]]", "[byte[]]", "fromcharcode(", "bytes([", "bytearray([", "map(chr,", "char("}

// chainCalls are the functions whose calls, one code each, chain into a
// string (lower case; nchar before char, which it holds).
var chainCalls = []string{"chr(", "nchar(", "char("}

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
	for _, call := range chainCalls {
		for off := 0; ; {
			i := strings.Index(lower[off:], call)
			if i < 0 {
				break
			}
			// nchar( holds char(: the chain is read once, from nchar.
			if call == "char(" && off+i > 0 && lower[off+i-1] == 'n' {
				off += i + len(call)
				continue
			}
			text, end := chrChain(lower, off+i)
			if text != "" {
				out = append(out, text)
			}
			off = max(end, off+i+len(call))
		}
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

// chrChain reads calls of one code each (chainCalls: chr, char, nchar,
// mixed as SQL Server allows) joined by "+", ".", "&", "," or "||" (and
// spaces) from s[i:], where s[i:] starts with one. A call of several codes
// (MySQL's CHAR(83,69,76)) ends the chain; codeList reads it.
func chrChain(s string, i int) (string, int) {
	var b []byte
	n := 0
	for call := chainCallAt(s, i); len(b) < MaxDecoded && call > 0; call = chainCallAt(s, i) {
		v, next, ok := number(s, i+call)
		for next < len(s) && s[next] == ' ' {
			next++
		}
		if !ok || next >= len(s) || s[next] != ')' || !codePoint(v) {
			break
		}
		b = utf8.AppendRune(b, rune(v))
		n++
		i = next + 1
		j := i
		for j < len(s) && strings.IndexByte(" +.&,|", s[j]) >= 0 {
			j++
		}
		if chainCallAt(s, j) == 0 {
			break
		}
		i = j
	}
	if n < minCodes {
		return "", i
	}
	return string(b), i
}

// chainCallAt returns the length of the chain call s[i:] starts with, or 0.
func chainCallAt(s string, i int) int {
	for _, call := range chainCalls {
		if strings.HasPrefix(s[i:], call) {
			return len(call)
		}
	}
	return 0
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
