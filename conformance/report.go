package conformance

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// Reporter writes a run's report in one format. Text for people, json for
// tools, junit for CI test-report pages.
type Reporter interface {
	Report(w io.Writer, r *Report) error
}

// Formats lists the reporters' names.
var Formats = []string{"text", "json", "junit"}

// NewReporter returns the reporter for format; verbose makes the text
// reporter list passing cases too.
func NewReporter(format string, verbose bool) (Reporter, error) {
	switch format {
	case "", "text":
		return TextReporter{Verbose: verbose}, nil
	case "json":
		return JSONReporter{}, nil
	case "junit":
		return JUnitReporter{}, nil
	}
	return nil, fmt.Errorf("unknown format %q: want text, json or junit", format)
}

// TextReporter prints each failing case with what each step expected and
// got and the reasons the verdict gave, then one line per suite and a
// summary.
type TextReporter struct{ Verbose bool }

// Report implements Reporter.
func (t TextReporter) Report(w io.Writer, r *Report) error {
	bw := bufio.NewWriter(w)
	for _, s := range r.Suites {
		for _, c := range s.Cases {
			switch {
			case c.Error != "":
				fmt.Fprintf(bw, "ERROR %s/%s (%s:%d)\n  %s\n", s.Name, c.Name, s.File, c.Line, c.Error)
			case !c.Passed:
				fmt.Fprintf(bw, "FAIL %s/%s (%s:%d)\n", s.Name, c.Name, s.File, c.Line)
				writeFailure(bw, c, "  ")
			case t.Verbose:
				fmt.Fprintf(bw, "ok   %s/%s\n", s.Name, c.Name)
			}
		}
	}
	for _, s := range r.Suites {
		status := "ok  "
		if s.Failed+s.Errors > 0 {
			status = "FAIL"
		}
		fmt.Fprintf(bw, "%s %-24s %d passed, %d failed, %d errors (%s)\n", status, s.Name, s.Passed, s.Failed, s.Errors, s.File)
	}
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(bw, "%s: %d cases, %d passed, %d failed, %d errors in %s\n", verdict, r.Passed+r.Failed+r.Errors, r.Passed, r.Failed, r.Errors, r.Duration.Round(time.Millisecond))
	return bw.Flush()
}

// writeFailure writes a failed case's failing steps: expected, got, the
// reasons.
func writeFailure(w io.Writer, c CaseResult, indent string) {
	for _, st := range c.Steps {
		if len(st.Failures) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s%s (line %d):\n", indent, st.Name, st.Line)
		fmt.Fprintf(w, "%s  expected: %s\n", indent, describeExpected(st.Expected))
		fmt.Fprintf(w, "%s  actual:   %s\n", indent, describeActual(st.Actual))
		for _, f := range st.Failures {
			fmt.Fprintf(w, "%s  - %s\n", indent, f)
		}
		if len(st.Reasons) > 0 {
			fmt.Fprintf(w, "%s  reasons:\n", indent)
			for _, r := range st.Reasons {
				fmt.Fprintf(w, "%s    %-8s %-14s %s\n", indent, r.Decision, r.Code, r.Message)
			}
		}
	}
}

func describeExpected(e Expectation) string {
	if e.Error != "" {
		return "request refused for " + e.Error
	}
	var parts []string
	if e.Decision != "" {
		parts = append(parts, string(e.Decision))
	}
	if e.Tier != 0 {
		parts = append(parts, fmt.Sprintf("tier %d", e.Tier))
	}
	if len(e.Codes) > 0 {
		parts = append(parts, "codes "+strings.Join(e.Codes, " "))
	}
	if len(e.NotCodes) > 0 {
		parts = append(parts, "not "+strings.Join(e.NotCodes, " "))
	}
	if len(parts) == 0 {
		return "a valid request"
	}
	return strings.Join(parts, ", ")
}

func describeActual(a Actual) string {
	if a.Error != "" {
		return a.Error
	}
	return fmt.Sprintf("%s, tier %d, codes %s", a.Decision, a.Tier, codeList(a.Codes))
}

// JSONReporter writes the Report as indented JSON.
type JSONReporter struct{}

// Report implements Reporter.
func (JSONReporter) Report(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// JUnitReporter writes JUnit XML as GitHub Actions report actions and
// GitLab's artifacts:reports:junit read it: testsuites, a testsuite per
// suite (classname is the suite's name), a testcase per case, failure (with
// a message and the expected/actual body) or error.
type JUnitReporter struct{}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	File     string      `xml:"file,attr,omitempty"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Line      int           `xml:"line,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",chardata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// Report implements Reporter.
func (JUnitReporter) Report(w io.Writer, r *Report) error {
	out := junitSuites{Name: "toolgate conformance", Tests: r.Passed + r.Failed + r.Errors, Failures: r.Failed, Errors: r.Errors, Time: seconds(r.Duration)}
	for _, s := range r.Suites {
		js := junitSuite{Name: s.Name, Tests: len(s.Cases), Failures: s.Failed, Errors: s.Errors, Time: seconds(s.Duration), File: s.File}
		for _, c := range s.Cases {
			jc := junitCase{Name: c.Name, Classname: s.Name, File: s.File, Line: c.Line, Time: seconds(c.Duration)}
			switch {
			case c.Error != "":
				jc.Error = &junitProblem{Message: c.Error, Type: "error", Body: c.Error}
			case !c.Passed:
				var body strings.Builder
				writeFailure(&body, c, "")
				jc.Failure = &junitProblem{Message: firstFailure(c), Type: "mismatch", Body: body.String()}
			}
			js.Cases = append(js.Cases, jc)
		}
		out.Suites = append(out.Suites, js)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func firstFailure(c CaseResult) string {
	for _, st := range c.Steps {
		if len(st.Failures) > 0 {
			return st.Name + ": " + st.Failures[0]
		}
	}
	return "failed"
}
