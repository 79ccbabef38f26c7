package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConformanceExitCodes(t *testing.T) {
	td := filepath.Join("..", "..", "conformance", "testdata")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"all pass", []string{filepath.Join(td, "pass")}, exitOK, "PASS: 3 cases", ""},
		{"a case fails", []string{filepath.Join(td, "pass"), filepath.Join(td, "fail")}, exitError, "FAIL mixed/wrong decision", ""},
		{"invalid suite", []string{filepath.Join(td, "invalid")}, exitUsage, "", "unknown-key.yaml:5: decison: unknown key"},
		{"missing path", []string{filepath.Join(td, "nope")}, exitUsage, "", "nope"},
		{"bad format", []string{"--format", "tap", filepath.Join(td, "pass")}, exitUsage, "", "--format"},
		{"bad regex", []string{"--run", "(", filepath.Join(td, "pass")}, exitUsage, "", "--run"},
		{"selected cases pass", []string{"--run", "mixed/passes", filepath.Join(td, "fail")}, exitOK, "1 passed", ""},
		{"json", []string{"--format", "json", filepath.Join(td, "pass")}, exitOK, `"passed": 3`, ""},
		{"labels", []string{"--labels", filepath.Join(td, "labels.jsonl")}, exitOK, "attacks not allowed: 66.7%", ""},
		{"labels json", []string{"--labels", filepath.Join(td, "labels.jsonl"), "--format", "json"}, exitOK, `"benign_allowed_pct": 50`, ""},
		{"labels invalid lines", []string{"--labels", filepath.Join(td, "labels-invalid.jsonl")}, exitUsage, "invalid line 3", "labels-invalid.jsonl:3: label"},
		{"labels junit", []string{"--labels", filepath.Join(td, "labels.jsonl"), "--format", "junit"}, exitUsage, "", "--format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", append([]string{"conformance", "run"}, tt.args...)...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
		})
	}
}

func TestConformanceJUnitFile(t *testing.T) {
	td := filepath.Join("..", "..", "conformance", "testdata")
	out := filepath.Join(t.TempDir(), "report.xml")
	code, _, errOut := runCLI(t, "", "conformance", "run", "--format", "junit", "--output", out, filepath.Join(td, "pass"), filepath.Join(td, "fail"))
	if code != exitError || !strings.Contains(errOut, "4 failed") {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil || doc.Tests != 8 || doc.Failures != 4 {
		t.Fatalf("junit: %v, tests %d failures %d", err, doc.Tests, doc.Failures)
	}
}
