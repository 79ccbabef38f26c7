// Package scan holds the text scanners behind toolgate's Tier 1 builtins:
// a pattern matcher that runs many case-insensitive RE2 rules over request
// text in one literal-prefiltered pass (Compile, RuleSet.Match), a bounded
// multi-layer decoder that reports encoded or disguised content (Decode),
// a de-obfuscator that undoes spaced-out letters and leetspeak so the
// injection rules can read them (Deobfuscate), a provenance check that
// finds argument values copied from untrusted text (Provenance), and a check
// for the action the untrusted text asks for in words the user never used
// (Verbs.RequestedActions). Disguised reports Decode's invisible-character
// and homoglyph findings alone, punycode domain labels that decode to
// look-alikes, tokens that spell letters in escapes no encoder writes, and
// URL query values that decode to data, for control arguments. Decodings
// returns what a command or file decodes to (its encoded runs,
// character-code lists, and its quoted literals read backwards where it
// turns a string round) for the danger rules to read. It owns only this
// pure, deterministic Go text work: it must not import OPA, read
// files, the network, the clock or any global state, and it must never
// panic or take more than linear time on any input; engine/ wraps these
// functions as builtins and the Rego policy decides what the returned facts
// mean.
//
// Pattern rules are matched line by line (a match never spans a newline)
// unless the pattern has a (?s) dot or a literal newline. Required literals
// of 3 bytes or more are preferred; a rule whose only set has 2-byte members
// ("su", "rm") is prefiltered by those. A rule whose required literals cannot
// be derived (or have a member shorter than 2 bytes) is unfiltered: its regex
// runs over every whole text, which is much slower; RuleSet.Unfiltered lists
// them. A rule whose pattern is an alternation (a|b|c) is matched branch by
// branch when every branch has required literals: a literal hit runs only
// its branch's (much smaller) program, and the rule reports the leftmost
// match of any branch, as the whole pattern would.
//
// Decode's stable codes:
//
//	ENCODED-001  base64 (standard or URL alphabet, with or without padding);
//	             Disguised: a URL query value of 32 or more characters that decodes
//	             to data (words, records), not to a token, compact JSON or a lone URL
//	ENCODED-002  base32
//	ENCODED-003  hex digit pairs (optionally 0x-prefixed), read as UTF-16LE when every second byte is NUL;
//	             Disguised: a URL query value, as for ENCODED-001
//	ENCODED-004  percent (URL) encoding of letters, digits or dots, encoded ../, or double encoding;
//	             Disguised: a token that percent-encodes three or more letters
//	ENCODED-005  HTML character references: numeric ones for letters or digits, or 4+ in a row
//	ENCODED-006  \xHH, \uHHHH and \u{H...} escapes: of letters or digits, or 4+ in a row;
//	             Disguised: a token that escapes two or more letters or digits and no
//	             byte outside printable ASCII
//	ENCODED-007  zero-width characters (U+200B..U+200D, U+2060, U+FEFF except a leading BOM)
//	ENCODED-008  bidi control characters (U+202A..U+202E, U+2066..U+2069, U+200E, U+200F)
//	ENCODED-009  a word mixing Latin letters with Cyrillic or Greek look-alikes
//	ENCODED-010  Unicode tag characters (U+E0000..U+E007F), which spell invisible ASCII,
//	             outside a subdivision flag (U+1F3F4, tag letters, U+E007F)
//	ENCODED-011  four or more variation selectors in a row (U+FE00..U+FE0F, U+E0100..U+E01EF),
//	             read as one byte each
//	ENCODED-012  a line that names ROT13 ("rot13", "rot-13") and reads as more English
//	             once rotated
//
// Codes 001-006 are reported only when the decoding (followed through up to
// three nested layers) reads as text; the code is that of the outermost layer.
// '/' is in the base64 alphabet, so a URL's path is one run; when the run
// does not decode whole, each path segment of 16 bytes or more is examined
// on its own (https://x.example/r/svc/<base64url of a connection string>).
package scan
