package state

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestFingerprintCanonical(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		a, b map[string]any
		same bool
	}{
		{"key order", map[string]any{"a": 1, "b": "x"}, map[string]any{"b": "x", "a": 1}, true},
		{"nested key order", map[string]any{"o": map[string]any{"y": 1, "x": []any{map[string]any{"q": 1, "p": 2}}}},
			map[string]any{"o": map[string]any{"x": []any{map[string]any{"p": 2, "q": 1}}, "y": 1}}, true},
		{"1 and 1.0", map[string]any{"n": json.Number("1")}, map[string]any{"n": json.Number("1.0")}, true},
		{"1 and float64 1", map[string]any{"n": json.Number("1")}, map[string]any{"n": 1.0}, true},
		{"1e0 and int 1", map[string]any{"n": json.Number("1e0")}, map[string]any{"n": 1}, true},
		{"-0 and 0", map[string]any{"n": json.Number("-0")}, map[string]any{"n": json.Number("0.0")}, true},
		{"leading zeros", map[string]any{"n": json.Number("007")}, map[string]any{"n": 7}, true},
		{"0.1 text and float", map[string]any{"n": json.Number("0.10")}, map[string]any{"n": 0.1}, true},
		{"1e21 and its digits", map[string]any{"n": json.Number("1e21")}, map[string]any{"n": json.Number("1000000000000000000000")}, true},
		{"big integers stay exact", map[string]any{"n": json.Number("12345678901234567890")}, map[string]any{"n": json.Number("12345678901234567891")}, false},
		{"1 and 2", map[string]any{"n": 1}, map[string]any{"n": 2}, false},
		{"number and string", map[string]any{"n": 1}, map[string]any{"n": "1"}, false},
		{"nil and empty args", nil, map[string]any{}, true},
		{"go map type", map[string]any{"m": map[string]string{"b": "2", "a": "1"}}, map[string]any{"m": map[string]any{"a": "1", "b": "2"}}, true},
		{"array order matters", map[string]any{"l": []any{1, 2}}, map[string]any{"l": []any{2, 1}}, false},
		{"null and missing", map[string]any{"x": nil}, map[string]any{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fa, fb := Fingerprint("calculate", tt.a, ""), Fingerprint("calculate", tt.b, "")
			if (fa == fb) != tt.same {
				t.Errorf("same = %v, want %v", fa == fb, tt.same)
			}
			if len(fa) != 64 || strings.ToLower(fa) != fa {
				t.Errorf("fingerprint %q is not 64 lowercase hex", fa)
			}
		})
	}
	args := map[string]any{"query": "2+2"}
	if Fingerprint("calculate", args, "") == Fingerprint("verify_logic", args, "") {
		t.Error("action type ignored")
	}
	if Fingerprint("calculate", args, "") == Fingerprint("calculate", args, hash) {
		t.Error("state hash ignored")
	}
	if Fingerprint("calculate", args, hash) != Fingerprint("calculate", map[string]any{"query": "2+2"}, hash) {
		t.Error("not deterministic")
	}
}

// A pinned value: the canonical encoding is part of the stored data, so it
// must not change between releases.
func TestFingerprintStable(t *testing.T) {
	got := Fingerprint("calculate", map[string]any{"query": "2+2", "n": json.Number("1.0")}, "")
	// sha256 of ["calculate",{"n":1,"query":"2+2"}]
	const want = "2e85c1cedc0a2f74a0d4bc78b332fa1d5ce1a58a6cabe6083d96a075dd82f9eb"
	if got != want {
		t.Errorf("fingerprint = %s, want %s", got, want)
	}
}

func TestFingerprintNoPanic(t *testing.T) {
	cyc := []any{nil}
	cyc[0] = cyc
	odd := map[string]any{
		"cycle": cyc, "chan": make(chan int), "nan": json.Number("nan?"), "huge": json.Number("1e999999999"),
		"ptr": (*int)(nil), "struct": struct{ A int }{1}, "f32": float32(0.5),
	}
	if fp := Fingerprint("x", odd, ""); len(fp) != 64 {
		t.Errorf("fingerprint %q", fp)
	}
}

func FuzzFingerprint(f *testing.F) {
	f.Add(`{"query":"2+2"}`)
	f.Add(`{"n":1.0,"m":[1,2,{"a":null}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		var args map[string]any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if dec.Decode(&args) != nil {
			return
		}
		if Fingerprint("t", args, "") != Fingerprint("t", args, "") {
			t.Fatal("not deterministic")
		}
	})
}
