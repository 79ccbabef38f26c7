package scan

import "strings"

// Deobfuscate undoes two disguises that hide words from the pattern rules
// and returns the lines of s that had one, undone, as forms to scan besides
// s itself (none when there is nothing to undo):
//
//   - letters spaced or dotted apart: in a line with a run of at least
//     minSpaced single letters or digits (not digits alone), each followed
//     by the same one of " .-_*/|+~" or a tab, every such run of two or
//     more is joined into one word, and the gap after it becomes one space
//     ("i g n o r e  a l l" → "ignore all", "i.g.n.o.r.e" → "ignore");
//   - leetspeak: in a word of three characters or more made of letters and
//     the look-alike digits 0 1 3 4 5 7 (and not of hex digits alone), these
//     read as o i e a s t, with 1 read as i in the first form and as l
//     in a second ("1gn0r3 a11 ru1es" → "ignore aii ruies" and "lgnore all
//     rules"). Words with other digits (h264, 9f3c2a1) are left alone.
//
// Only changed lines are kept (joined by newlines), so the cost of scanning
// the forms follows the disguised text, not the whole text; rules that
// match within a line see each changed line whole. The forms are for
// matching only: offsets in them are not offsets in s. Deobfuscate runs in
// time linear in len(s), and each form is at most len(s) bytes.
func Deobfuscate(s string) []string {
	var fi, fl strings.Builder
	changed, two := false, false
	for rest := s; rest != ""; {
		line := rest
		if k := strings.IndexByte(rest, '\n'); k >= 0 {
			line, rest = rest[:k], rest[k+1:]
		} else {
			rest = ""
		}
		joined, spaced := joinSpaced(line, minSpaced)
		if spaced {
			joined, _ = joinSpaced(line, 2) // short words too, once the line is known to space them
		}
		i, l, leet := unleet(joined)
		if !spaced && !leet {
			continue
		}
		if changed {
			fi.WriteByte('\n')
			fl.WriteByte('\n')
		}
		changed = true
		fi.WriteString(i)
		fl.WriteString(l)
		two = two || i != l
	}
	switch {
	case !changed:
		return nil
	case !two:
		return []string{fi.String()}
	}
	return []string{fi.String(), fl.String()}
}

const minSpaced = 3 // single letters in a row before a line counts as spaced out

// obfClass classifies bytes for Deobfuscate: word characters (ASCII
// letters and digits) and spacers.
var obfClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			t[c] = obfWord
		}
	}
	for _, c := range []byte(" \t.-_*/|+~") {
		t[c] = obfSpacer
	}
	return t
}()

const (
	obfWord = 1 + iota
	obfSpacer
)

func isSpacer(c byte) bool  { return obfClass[c] == obfSpacer }
func isObfByte(c byte) bool { return obfClass[c] == obfWord }

// joinSpaced joins runs of at least min spaced-out single characters; it
// reports whether it joined any.
func joinSpaced(s string, min int) (string, bool) {
	var b strings.Builder
	changed := false
	last := 0 // s[last:i] is not yet written
	for i := 0; i < len(s); {
		// i is never inside a word: words of two characters or more are
		// skipped whole, and a run starts at a single character.
		if !isObfByte(s[i]) {
			i++
			continue
		}
		if i+1 < len(s) && isObfByte(s[i+1]) {
			for i += 2; i < len(s) && isObfByte(s[i]); i++ {
			}
			continue
		}
		// The run holds the characters at i, i+2, ..., end-1.
		j, end, n, letters := i, i, 0, 0
		var sep byte // the run's spacer: another one ends it
		for j < len(s) && isObfByte(s[j]) && (j+1 == len(s) || !isObfByte(s[j+1])) {
			n++
			if c := s[j] | 0x20; 'a' <= c && c <= 'z' {
				letters++
			}
			end = j + 1
			if j+2 < len(s) && isSpacer(s[j+1]) && (sep == 0 || s[j+1] == sep) && isObfByte(s[j+2]) {
				sep = s[j+1]
				j += 2
				continue
			}
			break
		}
		if n < min || letters == 0 { // numbers, dates and addresses stay as they are
			i = max(end, i+1)
			continue
		}
		if !changed {
			b.Grow(len(s))
			changed = true
		}
		b.WriteString(s[last:i])
		for k := i; k < end; k += 2 {
			b.WriteByte(s[k])
		}
		// The gap after the run becomes one space.
		k := end
		for k < len(s) && isSpacer(s[k]) {
			k++
		}
		if k > end {
			b.WriteByte(' ')
		}
		last, i = k, k
	}
	if !changed {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// unleet reads look-alike characters as letters inside words that mix
// them with letters. It returns the form with 1 read as i, the form with 1
// read as l, and whether it changed anything.
func unleet(s string) (string, string, bool) {
	var bi, bl []byte
	for i := 0; i < len(s); {
		if leetClass[s[i]] == 0 {
			i++
			continue
		}
		// A word is read when it holds a look-alike digit and a letter
		// past f (so not hex digits alone), no other digit, and is at
		// least three characters long.
		j, kinds := i, uint8(0)
		for ; j < len(s) && leetClass[s[j]] != 0; j++ {
			kinds |= leetClass[s[j]]
		}
		if kinds&(leetNonHex|leetDigit|leetOther) == leetNonHex|leetDigit && j-i >= 3 {
			if bi == nil {
				bi, bl = []byte(s), []byte(s)
			}
			for k := i; k < j; k++ {
				if r := leetLetter(s[k]); r != 0 {
					bi[k], bl[k] = r, r
					if s[k] == '1' {
						bl[k] = 'l'
					}
				}
			}
		}
		i = j
	}
	if bi == nil {
		return s, s, false
	}
	return string(bi), string(bl), true
}

// leetClass sorts the word bytes (ASCII letters and digits) for unleet.
const (
	leetLetterKind = 1 << iota // a letter
	leetNonHex                 // a letter past f
	leetDigit                  // 0 1 3 4 5 7
	leetOther                  // another digit
)

var leetClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		switch {
		case 'a' <= b|0x20 && b|0x20 <= 'z' && isObfByte(b):
			t[c] = leetLetterKind
			if b|0x20 > 'f' {
				t[c] |= leetNonHex
			}
		case leetLetter(b) != 0:
			t[c] = leetDigit
		case '0' <= b && b <= '9':
			t[c] = leetOther
		}
	}
	return t
}()

func leetLetter(c byte) byte {
	switch c {
	case '0':
		return 'o'
	case '1':
		return 'i'
	case '3':
		return 'e'
	case '4':
		return 'a'
	case '5':
		return 's'
	case '7':
		return 't'
	}
	return 0
}
