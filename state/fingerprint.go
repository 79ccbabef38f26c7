package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// maxDepth bounds nesting in arguments; deeper values are cut off with a
// marker rather than overflowing the stack on a cyclic Go value.
const maxDepth = 256

// Fingerprint identifies an action for loop detection: the SHA-256 (lowercase
// hex) of the canonical JSON array [actionType, args] or, when a state hash
// is given, [actionType, args, stateHash].
//
// The canonical JSON has object keys sorted by their bytes, no insignificant
// whitespace, strings escaped as encoding/json does (HTML characters left
// alone) and numbers by value: an integer written as an integer keeps all its
// digits ("1", "12345678901234567890"); any other number (1.0, 1e3, 0.1,
// float64 values) is read as a float64 and written as the shortest text that
// reads back to it: integral values in plain digits without ".0" or exponent,
// others as strconv.FormatFloat(f, 'g', -1, 64). So
// 1, 1.0, 1e0 and float64(1) all give "1", and 0.1 and json.Number("0.10")
// give "0.1". Decimals beyond float64 precision are compared at float64
// precision.
func Fingerprint(actionType string, args map[string]any, stateHash string) string {
	var b bytes.Buffer
	b.WriteByte('[')
	writeString(&b, actionType)
	b.WriteByte(',')
	if args == nil {
		b.WriteString("{}") // a missing arguments object is an empty one
	} else {
		writeCanonical(&b, args, 0)
	}
	if stateHash != "" {
		b.WriteByte(',')
		writeString(&b, stateHash)
	}
	b.WriteByte(']')
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // strings always encode
	b.Truncate(b.Len() - 1) // Encode's newline
}

func writeCanonical(b *bytes.Buffer, v any, depth int) {
	if depth > maxDepth {
		b.WriteString(`"\u0000too-deep"`)
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		writeString(b, x)
	case json.Number:
		b.WriteString(canonicalNumber(string(x)))
	case float64:
		b.WriteString(canonicalFloat(x))
	case float32:
		b.WriteString(canonicalFloat(float64(x)))
	case int:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case int8:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case int16:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case int32:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case uint:
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint8:
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint16:
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint32:
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint64:
		b.WriteString(strconv.FormatUint(x, 10))
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeCanonical(b, x[k], depth+1)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e, depth+1)
		}
		b.WriteByte(']')
	default:
		writeOther(b, v, depth)
	}
}

// writeOther handles values a Go caller may put in arguments that JSON
// decoding never produces (map[string]string, structs, ...): through
// encoding/json and back, so they fingerprint like their JSON form.
func writeOther(b *bytes.Buffer, v any, depth int) {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		b.WriteString("null")
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(b, `"\u0000unencodable %T"`, v)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var back any
	if err := dec.Decode(&back); err != nil {
		fmt.Fprintf(b, `"\u0000unencodable %T"`, v)
		return
	}
	writeCanonical(b, back, depth+1)
}

// canonicalNumber canonicalises a JSON number's text (see Fingerprint).
func canonicalNumber(s string) string {
	if isPlainInteger(s) {
		neg := s[0] == '-'
		d := strings.TrimLeft(strings.TrimPrefix(s, "-"), "0")
		if d == "" {
			return "0"
		}
		if neg {
			return "-" + d
		}
		return d
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeError(err) {
		// Not a number at all (a json.Number built by hand): keep it apart
		// from every real number.
		var b bytes.Buffer
		writeString(&b, "\u0000number:"+s)
		return b.String()
	}
	return canonicalFloat(f) // out of range gives ±Inf, handled there
}

func isRangeError(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func isPlainInteger(s string) bool {
	if strings.HasPrefix(s, "-") {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func canonicalFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return `"\u0000NaN"`
	case math.IsInf(f, 1):
		return `"\u0000+Inf"`
	case math.IsInf(f, -1):
		return `"\u0000-Inf"`
	case f == 0:
		return "0" // and -0
	case f == math.Trunc(f):
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
