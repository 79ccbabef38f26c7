package scan

import (
	"fmt"
	"strings"
	"testing"
)

// ordinaryText returns n bytes of ordinary English prose, JSON and code,
// with no encodings and nothing suspicious.
func ordinaryText(n int) string {
	parts := []string{
		"The quarterly report shows that revenue grew by twelve percent, driven mostly by new customers in Europe. ",
		"Please review the attached document before the meeting on Thursday and let me know if you have any questions. ",
		`{"id": 1234, "name": "Widget Pro", "price": 19.99, "tags": ["tools", "garden"], "in_stock": true}` + "\n",
		"You can find the installation guide at https://docs.example.com/install?lang=en&version=2. ",
		"func handle(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, \"hello %s\", r.URL.Path) }\n",
		"Our team will ignore minor formatting issues and focus on the previous release's open bugs.\n",
		"If you would like to change your settings, open the menu and choose Preferences. ",
	}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(parts[i%len(parts)])
	}
	return b.String()[:n]
}

var benchSizes = []int{1 << 10, 4 << 10, 16 << 10, 256 << 10}

func BenchmarkMatch(b *testing.B) {
	rs, err := Compile(loadPatterns(b))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range benchSizes {
		texts := []Text{{Where: "context.blocks[0].content", Text: ordinaryText(n)}}
		b.Run(fmt.Sprintf("rules=%d/size=%dKB", rs.Len(), n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				rs.Match(texts)
			}
		})
	}
}

// BenchmarkCompile: what a process pays once, before its first decision,
// for each of the default policy's rule lists.
func BenchmarkCompile(b *testing.B) {
	for _, list := range []struct {
		name  string
		rules []Rule
	}{{"patterns", loadPatterns(b)}, {"danger", loadDanger(b)}} {
		b.Run(list.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(list.rules); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMatchUnfiltered shows the cost of one rule without a literal
// prefilter: its regex runs over the whole text.
func BenchmarkMatchUnfiltered(b *testing.B) {
	rs, err := Compile([]Rule{{Code: "U", Pattern: `\b[a-z]{2,8}\s+[0-9]{2,}\b`}})
	if err != nil {
		b.Fatal(err)
	}
	if len(rs.Unfiltered()) != 1 {
		b.Fatal("rule is not unfiltered")
	}
	texts := []Text{{Where: "t", Text: ordinaryText(4 << 10)}}
	b.SetBytes(4 << 10)
	for b.Loop() {
		rs.Match(texts)
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, n := range benchSizes {
		texts := []Text{{Where: "context.blocks[0].content", Text: ordinaryText(n)}}
		if fs := Decode(texts); len(fs) > 0 {
			b.Fatalf("ordinary text has findings: %+v", fs[0])
		}
		b.Run(fmt.Sprintf("size=%dKB", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				Decode(texts)
			}
		})
	}
}

func BenchmarkProvenance(b *testing.B) {
	args := []Text{
		{Where: "action.arguments.recipient", Text: "support@evil-pay.example"},
		{Where: "action.arguments.iban", Text: "DE89370400440532013000"},
		{Where: "action.arguments.url", Text: "https://evil-pay.example/claim?id=7"},
		{Where: "action.arguments.subject", Text: "Invoice 2291 for March"},
	}
	untrusted := []Text{{Where: "context.blocks[1].content", Text: ordinaryText(4<<10-80) + " IBAN DE89 3704 0044 0532 0130 00, support@evil-pay.example"}}
	trusted := []string{ordinaryText(1 << 10)}
	if len(Provenance(args, trusted, untrusted)) != 3 { // the e-mail, the IBAN and the URL's domain
		b.Fatalf("unexpected result %+v", Provenance(args, trusted, untrusted))
	}
	b.SetBytes(5 << 10)
	for b.Loop() {
		Provenance(args, trusted, untrusted)
	}
}

func BenchmarkDeobfuscate(b *testing.B) {
	for _, n := range benchSizes {
		text := ordinaryText(n)
		if forms := Deobfuscate(text); len(forms) > 0 {
			b.Fatalf("ordinary text has disguised words: %q", forms)
		}
		b.Run(fmt.Sprintf("size=%dKB", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				Deobfuscate(text)
			}
		})
	}
}
