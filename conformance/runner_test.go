package conformance

import (
	"bytes"
	"context"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func run(t *testing.T, opts Options, paths ...string) *Report {
	t.Helper()
	s, err := LoadPaths(paths)
	if err != nil {
		t.Fatal(err)
	}
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	r, err := Run(context.Background(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRunPassingAndFailing(t *testing.T) {
	r := run(t, Options{}, "testdata/pass", "testdata/fail")
	if r.OK() || r.Passed != 4 || r.Failed != 4 || r.Errors != 0 {
		t.Fatalf("passed %d failed %d errors %d, want 4, 4, 0", r.Passed, r.Failed, r.Errors)
	}
	mixed := r.Suites[0]
	want := map[string][]string{
		"passes":            nil,
		"wrong decision":    {"decision: expected deny, got allow", "codes: expected ACTION-001, not among [MATRIX-013]"},
		"unexpected code":   {"not_codes: ACTION-001 present"},
		"second step fails": {"tier: expected 2, got 1"},
		"expected an error": {"error: expected the request to be refused for context.step_number, got allow"},
	}
	for _, c := range mixed.Cases {
		var got []string
		for _, st := range c.Steps {
			got = append(got, st.Failures...)
		}
		if !reflect.DeepEqual(got, want[c.Name]) {
			t.Errorf("%s: failures %q, want %q", c.Name, got, want[c.Name])
		}
		if c.Passed != (want[c.Name] == nil) {
			t.Errorf("%s: passed %v", c.Name, c.Passed)
		}
	}
	if c := mixed.Cases[3]; !c.Stateful || len(c.Steps) != 2 || len(c.Steps[0].Failures) != 0 {
		t.Errorf("multi-step case: %+v", c)
	}
}

func TestRunSelectsCases(t *testing.T) {
	r := run(t, Options{Run: regexp.MustCompile(`^mixed/(passes|wrong)`)}, "testdata/fail")
	if n := len(r.Suites[0].Cases); n != 2 || r.Passed != 1 || r.Failed != 1 {
		t.Fatalf("%d cases, %d passed, %d failed; want 2, 1, 1", n, r.Passed, r.Failed)
	}
}

// TestIsolation: cases that use the same conversation id, in one suite and
// run in parallel, each see an empty conversation.
func TestIsolation(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("name: iso\ndefaults:\n  agent: {id: a, trust_level: trusted}\n  action: {type: calculate, arguments: {query: q}}\n  context: {conversation_id: same, step_number: 1}\ncases:\n")
	for i := range 20 {
		b.WriteString("  - name: case " + string(rune('a'+i)) + "\n    steps:\n      - {request: {}, decision: allow, not_codes: [LOOP-002]}\n      - {request: {context: {step_number: 2}}, decision: allow}\n")
	}
	s, err := Parse(filepath.Join(t.TempDir(), "iso.yaml"), b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), []*Suite{s}, Options{Parallel: 8, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		var out bytes.Buffer
		TextReporter{}.Report(&out, r)
		t.Fatalf("cases saw each other's steps:\n%s", out.String())
	}
}

// TestSharedAndFreshAgree: the reference suites give the same verdicts
// whether stateless cases share one Verifier or each get a database.
func TestSharedAndFreshAgree(t *testing.T) {
	shared := run(t, Options{}, "suites")
	fresh := run(t, Options{FreshDB: true}, "suites")
	if !shared.OK() {
		var out bytes.Buffer
		TextReporter{}.Report(&out, shared)
		t.Fatalf("the reference suites fail:\n%s", out.String())
	}
	for i, s := range shared.Suites {
		for j, c := range s.Cases {
			f := fresh.Suites[i].Cases[j]
			for k, st := range c.Steps {
				if !reflect.DeepEqual(st.Actual, f.Steps[k].Actual) {
					t.Errorf("%s/%s step %d: shared %+v, fresh %+v", s.Name, c.Name, k+1, st.Actual, f.Steps[k].Actual)
				}
			}
		}
	}
	stateful := 0
	for _, s := range shared.Suites {
		for _, c := range s.Cases {
			if c.Stateful {
				stateful++
			}
		}
	}
	t.Logf("reference suites: %d cases, %d on a database of their own, in %s", shared.Passed, stateful, shared.Duration)
}

// stable zeroes what changes between runs: durations and temp paths.
func stable(r *Report) *Report {
	r.Duration = 1500 * time.Millisecond
	for i := range r.Suites {
		r.Suites[i].Duration = 250 * time.Millisecond
		for j := range r.Suites[i].Cases {
			r.Suites[i].Cases[j].Duration = 125 * time.Millisecond
		}
	}
	return r
}

func TestReporters(t *testing.T) {
	r := stable(run(t, Options{}, "testdata/pass", "testdata/fail"))
	for _, f := range Formats {
		t.Run(f, func(t *testing.T) {
			rep, err := NewReporter(f, true)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := rep.Report(&out, r); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", "report."+f)
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("%s differs from %s (go test -update to accept):\n%s", f, golden, out.String())
			}
		})
	}
	if _, err := NewReporter("tap", false); err == nil {
		t.Error("an unknown format must fail")
	}
}

func TestJUnitParses(t *testing.T) {
	r := run(t, Options{}, "testdata/pass", "testdata/fail")
	var out bytes.Buffer
	if err := (JUnitReporter{}).Report(&out, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Suites   []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Time     string `xml:"time,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Time    string `xml:"time,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Body    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, out.String())
	}
	if doc.Tests != 8 || doc.Failures != 4 || len(doc.Suites) != 2 {
		t.Fatalf("tests %d failures %d suites %d; want 8, 4, 2", doc.Tests, doc.Failures, len(doc.Suites))
	}
	failures := 0
	for _, s := range doc.Suites {
		if s.Tests != len(s.Cases) || s.Time == "" {
			t.Errorf("suite %s: tests %d, %d testcases, time %q", s.Name, s.Tests, len(s.Cases), s.Time)
		}
		for _, c := range s.Cases {
			if c.Time == "" {
				t.Errorf("%s: no time", c.Name)
			}
			if c.Failure != nil {
				failures++
				if c.Failure.Message == "" || c.Failure.Body == "" {
					t.Errorf("%s: failure without message or body", c.Name)
				}
			}
		}
	}
	if failures != 4 {
		t.Errorf("%d failure elements, want 4", failures)
	}
}
