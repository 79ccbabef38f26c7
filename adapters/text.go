package adapters

import (
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/schema"
)

// Bounds of the context a request carries.
const (
	// MaxContextBytes bounds the content of all blocks of one request.
	MaxContextBytes = 64 << 10
	// MaxBlocks bounds how many blocks one request carries.
	MaxBlocks = 24
)

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s[len(s)-1:]) {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// flatten collects the text of a JSON value: strings as they are, the string
// leaves of objects (keys in order) and arrays one per line. Escaped JSON
// would show the scanners "\u" escapes that are not in the text.
func flatten(v any, max int) string {
	var b strings.Builder
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if b.Len() >= max || depth > 32 {
			return
		}
		switch t := v.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t)
		case []any:
			for _, e := range t {
				walk(e, depth+1)
			}
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if !skipKeys[k] {
					walk(t[k], depth+1)
				}
			}
		case json.Number, float64, bool:
			// Numbers and flags carry no instructions.
		}
	}
	walk(v, 0)
	return truncate(b.String(), max)
}

// skipKeys are structural fields of content parts, not text.
var skipKeys = map[string]bool{"type": true, "mimeType": true, "tool_use_id": true}

// flattenRaw is flatten over raw JSON; text that is not JSON is kept as is.
func flattenRaw(raw []byte, max int) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return truncate(string(raw), max)
	}
	return flatten(v, max)
}

// assemble merges transcript blocks and recorded results (newest last),
// drops duplicates, and keeps the newest within MaxBlocks and
// MaxContextBytes.
func assemble(lists ...[]schema.Block) []schema.Block {
	var all []schema.Block
	seen := map[string]bool{}
	for _, l := range lists {
		for _, b := range l {
			if strings.TrimSpace(b.Content) == "" || seen[string(b.Trust)+"\x00"+b.Content] {
				continue
			}
			seen[string(b.Trust)+"\x00"+b.Content] = true
			all = append(all, b)
		}
	}
	budget := MaxContextBytes
	start := len(all)
	for start > 0 && len(all)-start < MaxBlocks {
		n := len(all[start-1].Content)
		if n > budget {
			if budget > 0 {
				// Keep the tail of the oldest block that still fits in part.
				all[start-1].Content = truncate(all[start-1].Content, budget)
				start--
			}
			break
		}
		budget -= n
		start--
	}
	return all[start:]
}
